"""Feedback and dream tools: record a signal, run or drive a dream pass, apply a plan, read a report."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from rockmem_mcp.consolidation.shapes import DreamMaterial, DreamPlan, DreamReport, DreamResult
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.llm import ChatLLM, unfenced
from rockmem_mcp.models import Feedback, FeedbackType
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.context import default_session_id, services
from rockmem_mcp.server.tools import progress_of, reports_errors
from rockmem_mcp.server.tools.conversation import SessionId

DreamPass = Literal["consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes"]
DreamMode = Literal["auto", "agent", "deterministic"]
SAMPLING_MAX_TOKENS = 8192
PLAN_DESCRIPTION = "A plan matching plan_schema in dream's agent-mode reply (merges, archives, updates, creates, graph)"


@functools.cache
def _plan_schema() -> dict[str, Any]:
    """The plan schema as an agent reads it in dream's reply: pruned as tools/list's schemas are (no per-node
    titles, optional fields without their null, no class docstrings): ~1,320 tokens instead of ~1,530."""
    schema = DreamPlan.model_json_schema()
    toolsets.drop_titles(schema)
    toolsets.drop_null_options(schema)
    toolsets.drop_def_descriptions(schema)
    return schema


def _compact(material: DreamMaterial) -> DreamMaterial:
    return material.model_copy(update={"plan_schema": _plan_schema()})


def next_step_after(report: DreamReport, done: str = "Read report.summary; nothing else to do.") -> str:
    """What to do after a run: a contradiction is the user's to decide (seed 004: detected, never resolved
    silently), a refused merge says how to plan it again; otherwise `done`."""
    steps = []
    if report.contradictions:
        steps.append(
            f"{len(report.contradictions)} pairs of memories contradict each other (report.contradictions): none "
            "was merged. Ask the user which is right, then archive the wrong one (or keep both if both hold)."
        )
    if any(r.action == "merge" for r in report.rejected):
        steps.append(
            "Merges refused (report.rejected) say what they drop: plan them again keeping every word, name, number "
            "and negation of each source, or leave those memories apart."
        )
    return " ".join(steps) or done


def client_model_plan(action: str, dream_pass: str, mode: str, offset: int, ctx: Context) -> Sample | None:
    """In auto mode with no language model of the server's own, ask the calling client's model (MCP sampling)
    when the client offers it; otherwise None (the tool falls back to agent-driven). Runs before the tool,
    possibly more than once: it reads and changes nothing."""
    svc = services(ctx)
    capabilities = ctx.client_capabilities
    if action != "start" or mode != "auto" or (svc.settings.llm_endpoint and svc.settings.llm_model):
        return None
    if capabilities is None or capabilities.sampling is None:
        return None
    dreamer = svc.dreamer()
    material = dreamer.material(dream_pass, offset)
    if material.items == 0:
        return None
    system, user = dreamer.prompt(material)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=user))
    return Sample([message], max_tokens=SAMPLING_MAX_TOKENS, system_prompt=system, temperature=0.0)


def register(server: MCPServer) -> None:
    @server.tool(
        title="Record feedback",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def record_feedback(
        type: Annotated[FeedbackType, Field(description="What kind of signal")],
        content: Annotated[str, Field(description="What happened")],
        ctx: Context,
        session_id: SessionId = None,
        metadata: Annotated[dict[str, str] | None, Field(description="Key/value strings")] = None,
    ) -> Feedback:
        """Record how you did (a user's correction, a tool failure, thumbs up or down): dreams turn a week of
        corrections into lessons."""
        return services(ctx).dreamer().feedback.record(type, content, session_id or default_session_id(ctx), metadata)

    @server.tool(
        title="Consolidate memory (dream)",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def dream(
        ctx: Context,
        action: Annotated[
            Literal["start", "apply", "report"],
            Field(description="start; apply your plan; report a past run"),
        ] = "start",
        dream_pass: Annotated[DreamPass, Field(description="Which pass")] = "consolidation",
        mode: Annotated[
            DreamMode,
            Field(description="auto: a model if any, else agent: you plan; deterministic: no model"),
        ] = "auto",
        dry_run: Annotated[bool, Field(description="Change nothing, report")] = False,
        offset: Annotated[int, Field(ge=0, description="agent: skip this many items")] = 0,
        plan: Annotated[dict[str, Any] | None, Field(description=f"apply: {PLAN_DESCRIPTION}")] = None,
        report_id: Annotated[str | None, Field(description="report: default the latest")] = None,
        sampled: Annotated[CreateMessageResult | None, Resolve(client_model_plan)] = None,
    ) -> DreamResult:
        """Consolidate memory while idle: merge duplicates, turn corrections into lessons, fade what is unused.
        Without a model, start hands you material and a plan schema: answer with action=apply. Every change is
        checked and reported."""
        if action == "apply":
            if plan is None:
                raise InvalidInputError("dream apply needs plan: the plan matching plan_schema from dream start")
            report = apply_dream(plan, ctx, dream_pass, dry_run)
            return DreamResult(mode="agent", report=report, next_step=next_step_after(report, "Read report.summary."))
        if action == "report":
            return DreamResult(mode="report", report=get_dream_report(ctx, report_id), next_step="")
        svc = services(ctx)
        dreamer = svc.dreamer()
        if mode == "auto" and svc.settings.llm_endpoint and svc.settings.llm_model:
            llm = ChatLLM(svc.settings)
            try:
                report = dreamer.run_llm(dream_pass, llm, dry_run=dry_run, progress=progress_of(ctx))
            finally:
                llm.close()
            return DreamResult(mode="llm", report=report, next_step=next_step_after(report))
        if sampled is not None:
            text = sampled.content.text if isinstance(sampled.content, TextContent) else ""
            try:
                plan = DreamPlan.model_validate_json(unfenced(text))
            except ValidationError as exc:
                problem = f"your client's model answered no valid plan ({exc.error_count()} problems)"
                return DreamResult(
                    mode="agent",
                    material=_compact(dreamer.material(dream_pass, offset)),
                    next_step=f"{problem}: follow material.directive yourself, then call dream with action='apply'.",
                )
            report = dreamer.apply(plan, dream_pass, "sampling", dry_run)
            return DreamResult(mode="sampling", report=report, next_step=next_step_after(report))
        if mode == "deterministic":
            report = dreamer.run_deterministic(dry_run=dry_run, progress=progress_of(ctx))
            return DreamResult(mode=mode, report=report, next_step=next_step_after(report))
        material = _compact(dreamer.material(dream_pass, offset))
        more = (
            f" Then call dream again with offset={offset + material.items} for the next batch."
            if material.remaining
            else ""
        )
        capabilities = ctx.client_capabilities
        unaided = mode == "auto" and (capabilities is None or capabilities.sampling is None)
        why = "No language model here (none configured, and your client offers no sampling): you are it. "
        return DreamResult(
            mode="agent",
            material=material,
            next_step=(why if unaided else "")
            + (
                f"Follow material.directive over material.material, then call dream with action='apply', dream_pass="
                f"'{dream_pass}' and a plan matching material.plan_schema (use dry_run=true to preview).{more}"
            ),
        )

    @server.tool(
        title="Apply a dream plan",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def apply_dream(
        plan: Annotated[dict[str, Any], Field(description=PLAN_DESCRIPTION)],
        ctx: Context,
        dream_pass: Annotated[DreamPass, Field(description="The pass the plan answers")] = "consolidation",
        dry_run: Annotated[bool, Field(description="Report what would change, change nothing")] = False,
    ) -> DreamReport:
        """Apply a dream plan. Every action is checked: unknown ids, protected memories, merges of memories that
        contradict each other or that drop any word, number or negation of a source, memories changed since you
        read them, and actions outside the pass are refused and listed in `rejected` with the reason; merge
        sources are archived (superseded by the merged memory), never deleted."""
        # The plan's schema (~1,500 tokens) comes with the dream reply that asks for a plan, not in tools/list.
        try:
            checked = DreamPlan.model_validate(plan)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'plan'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
            )
            raise InvalidInputError(
                f"plan does not match plan_schema ({exc.error_count()} problems): {problems}"
            ) from None
        return services(ctx).dreamer().apply(checked, dream_pass, mode="agent", dry_run=dry_run)

    @server.tool(title="Read a dream report", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_dream_report(
        ctx: Context,
        report_id: Annotated[str | None, Field(description="A report id; default the latest")] = None,
    ) -> DreamReport:
        """A dream run's report: what was merged, archived, created or purged, with ids and reasons; the decay
        pass's salience tier changes and archive candidates to review."""
        return services(ctx).dreamer().report(report_id)
