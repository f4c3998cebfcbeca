"""What tools reach through the server's lifespan context, and the caller's working-memory namespace."""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp.server.mcpserver import Context

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.compaction import Compactor
from rockmem_mcp.consolidation.dream import Dreamer, Progress
from rockmem_mcp.consolidation.enrichment import Enricher
from rockmem_mcp.consolidation.reflection import Reflector
from rockmem_mcp.consolidation.reflection_triggers import ReflectionTriggers
from rockmem_mcp.consolidation.shapes import Reflection
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.conversation.service import ConversationMemory
from rockmem_mcp.core.learnings import Learnings
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.core.workspace import Workspace
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.governance.erasure import Erasure
from rockmem_mcp.governance.forgetting import Forgetting
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.governance.integrity import CriticalFiles
from rockmem_mcp.governance.rollback import Rollback
from rockmem_mcp.governance.trail import AuditTrail
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.stores import Deferred
from rockmem_mcp.llm import language_model
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.proposals.service import Proposals
from rockmem_mcp.recall.remembering import Remembering
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.recall.triggers import TriggerResponder
from rockmem_mcp.server.tenancy import current_services
from rockmem_mcp.working.service import WorkingMemory
from rockmem_mcp.working.vectors import WorkingVectors

MAX_SESSIONS = 10_000  # namespaces remembered per process (a few hundred bytes each); the oldest are forgotten


@dataclass
class Services:
    memory: MemoryService
    graph_opening: Deferred[GraphService]  # the graph loads in the background; `graph` waits for all of it
    settings: Settings
    conversation: ConversationMemory
    recall: Recall
    templates: Templates
    core: CoreMemory
    learnings: Learnings  # tool failures, corrections and anti-patterns
    workspace: Workspace  # the user's AGENTS.md, SOUL.md, USER.md, HEARTBEAT.md in the home
    episodes: Episodes  # the episodic store: what happened, when
    procedures: Procedures  # learned workflows (seed 004 §7)
    triggers: TriggerResponder | None = None  # remember/forget/reflect/search phrases in user messages
    remembering: Remembering | None = None  # routes what the user asked to keep, writes it in one step
    compactor: Compactor | None = None  # write-then-compact of conversation windows (needs compacted=True windows)
    enricher: Enricher | None = None  # save-time enrichment, with a language model configured
    working_vectors: WorkingVectors | None = None  # with embeddings: working-memory search ranks hybrid
    forgetting: Forgetting | None = None  # forget across every store (seed 004 §8.3)
    history: GitHistory | None = None  # the home's git history, committed in the background (seed 004 §12.3)
    audit_trail: AuditTrail | None = None  # who changed what, when and why; an item's versions
    rollback: Rollback | None = None  # put an item, a run or the whole home back
    critical_files: CriticalFiles | None = None  # checksums of SOUL.md, MEMORY.md, …; alerts until acknowledged
    reflection_triggers: ReflectionTriggers | None = None  # schedule, idle and threshold (reflection_in_server)
    proposals: Proposals | None = None  # sub-agents' gated writes, for the main agent's review (seed 004 §13)
    # Each MCP session (a stdio process; an HTTP session, told apart by its Mcp-Session-Id) gets its own
    # session/{id} namespace, unless the process was started with one (--namespace / ROCKMEM_NAMESPACE:
    # a sub-agent or a patrol).
    _namespaces: OrderedDict[str | None, WorkingMemory] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def graph(self) -> GraphService:
        return self.graph_opening.result()

    def erasure(self) -> Erasure:
        """What runs after a permanent delete (forgotten means gone): the forget tool's, or one for this home."""
        if self.forgetting is not None:
            return self.forgetting.erasure
        return Erasure(self.settings, self.memory.audit, self.memory, self.episodes, self.history)

    def dreamer(self) -> Dreamer:
        return Dreamer(
            self.memory,
            self.graph,
            self.settings,
            self.templates,
            episodes=self.episodes,
            procedures=self.procedures,
            before_run=self.history.flush if self.history is not None else None,
        )

    def reflector(self) -> Reflector:
        return Reflector(self.settings, self.dreamer(), self.core, proposals=self.proposals)

    def reflect(self, trigger: str, progress: Progress | None = None) -> Reflection:
        """Run a reflection now, with the server's language model if one is configured."""
        llm = language_model(self.settings)
        try:
            return self.reflector().run(trigger, llm, progress)
        finally:
            if llm is not None:
                llm.close()

    def working(self, session_id: str | None) -> WorkingMemory:
        key = None if self.settings.namespace else session_id
        with self._lock:
            working = self._namespaces.get(key)
            if working is None:
                namespace = self.settings.namespace or f"session/{secrets.token_hex(4)}"
                other = next(iter(self._namespaces.values()), None)  # all share one view of the files
                if other:
                    working = other.for_namespace(namespace)
                else:
                    working = WorkingMemory(self.settings, namespace, vectors=self.working_vectors)
                self._namespaces[key] = working
                if len(self._namespaces) > MAX_SESSIONS:
                    self._namespaces.popitem(last=False)
            return working


def services(ctx: Context) -> Services:
    """The services of the caller's tenant (server/tenancy.py), else the server's own."""
    return current_services.get() or ctx.request_context.lifespan_context


def working_memory(ctx: Context) -> WorkingMemory:
    """The caller's working memory: by HTTP session id where the protocol has sessions; otherwise (stdio, or
    the stateless 2026-07-28 HTTP protocol) the process's own namespace."""
    headers = ctx.headers
    return services(ctx).working(headers.get("mcp-session-id") if headers else None)


def default_session_id(ctx: Context) -> str:
    """A caller that names no conversation session gets its working-memory namespace's, e.g. 'session:ab12cd34'."""
    return working_memory(ctx).namespace.replace("/", ":")
