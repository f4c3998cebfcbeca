"""Feedback and dream tools: record a signal, run or drive a dream pass, apply a plan, read a report."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from rockmem_mcp.consolidation.shapes import DreamPlan, DreamReport, DreamResult
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.llm import ChatLLM, unfenced
from rockmem_mcp.models import Feedback, FeedbackType
from rockmem_mcp.server.context import default_session_id, services
from rockmem_mcp.server.tools import progress_of, reports_errors
from rockmem_mcp.server.tools.conversation import SessionId

DreamPass = Literal["consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes"]
DreamMode = Literal["auto", "agent", "deterministic"]
SAMPLING_MAX_TOKENS = 8192
PLAN_DESCRIPTION = "A plan matching plan_schema in dream's agent-mode reply (merges, archives, updates, creates, graph)"


def client_model_plan(dream_pass: str, mode: str, offset: int, ctx: Context) -> Sample | None:
    """In auto mode with no language model of the server's own, ask the calling client's model (MCP sampling)
    when the client offers it; otherwise None (the tool falls back to agent-driven). Runs before the tool,
    possibly more than once: it reads and changes nothing."""
    svc = services(ctx)
    capabilities = ctx.client_capabilities
    if mode != "auto" or (svc.settings.llm_endpoint and svc.settings.llm_model):
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
        content: Annotated[str, Field(description="What happened, e.g. what the user corrected and how")],
        ctx: Context,
        session_id: SessionId = None,
        metadata: Annotated[dict[str, str] | None, Field(description="Optional key/value strings")] = None,
    ) -> Feedback:
        """Record how you did: a Correction by the user, a ToolFailure, a SessionSummary, UserThumbsUp or
        UserThumbsDown. The dream pass reads the last week of them and turns corrections into anti-patterns."""
        return services(ctx).dreamer().feedback.record(type, content, session_id or default_session_id(ctx), metadata)

    @server.tool(
        title="Consolidate memory (dream)",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def dream(
        ctx: Context,
        dream_pass: Annotated[DreamPass, Field(description="Which pass (default consolidation)")] = "consolidation",
        mode: Annotated[
            DreamMode,
            Field(
                description="auto: the server's language model if one is configured, else your client's model "
                "(MCP sampling) if it offers one, else agent; agent: you get the material and answer with "
                "apply_dream; deterministic: no model at all"
            ),
        ] = "auto",
        dry_run: Annotated[bool, Field(description="report what would change, change nothing")] = False,
        offset: Annotated[int, Field(ge=0, description="agent mode: skip this many items (next batch)")] = 0,
        sampled: Annotated[CreateMessageResult | None, Resolve(client_model_plan)] = None,
    ) -> DreamResult:
        """Consolidate memory while idle. With no language model on the server or in your client, you (agent
        mode) receive a directive, numbered material and a plan schema: think it through, then call
        apply_dream with your plan. Deterministic mode merges exact
        and near duplicates, runs the decay pass (reports salience tier changes and archive candidates for
        review, archives nothing), purges old archives and tidies the graph, with no model.
        Every change is checked by the server's safeguards and reported."""
        svc = services(ctx)
        dreamer = svc.dreamer()
        if mode == "auto" and svc.settings.llm_endpoint and svc.settings.llm_model:
            llm = ChatLLM(svc.settings)
            try:
                report = dreamer.run_llm(dream_pass, llm, dry_run=dry_run, progress=progress_of(ctx))
            finally:
                llm.close()
            return DreamResult(mode="llm", report=report, next_step="Read report.summary; nothing else to do.")
        if sampled is not None:
            text = sampled.content.text if isinstance(sampled.content, TextContent) else ""
            try:
                plan = DreamPlan.model_validate_json(unfenced(text))
            except ValidationError as exc:
                problem = f"your client's model answered no valid plan ({exc.error_count()} problems)"
                return DreamResult(
                    mode="agent",
                    material=dreamer.material(dream_pass, offset),
                    next_step=f"{problem}: follow material.directive yourself and call apply_dream with a plan.",
                )
            report = dreamer.apply(plan, dream_pass, "sampling", dry_run)
            return DreamResult(mode="sampling", report=report, next_step="Read report.summary; nothing else to do.")
        if mode == "deterministic":
            report = dreamer.run_deterministic(dry_run=dry_run, progress=progress_of(ctx))
            return DreamResult(mode=mode, report=report, next_step="Read report.summary; nothing else to do.")
        material = dreamer.material(dream_pass, offset)
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
                f"Follow material.directive over material.material, then call apply_dream with dream_pass="
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
        contradict each other or that drop a name, number, date or negation of their sources, memories changed
        since you read them, and actions outside the pass are refused and listed in `rejected` with the reason;
        merge sources are archived (superseded by the merged memory), never deleted."""
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
        """A dream run's report: what was merged, archived, created or purged, with ids and reasons; salience tier
        changes and archive candidates to review."""
        return services(ctx).dreamer().report(report_id)
