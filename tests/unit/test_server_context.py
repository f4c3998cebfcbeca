"""Which working-memory namespace a caller gets."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import sentinel

from rockmem_mcp.config import Settings
from rockmem_mcp.server.context import Services


def test_each_session_id_gets_its_own_namespace_and_keeps_it(tmp_path: Path) -> None:
    services = Services(
        memory=sentinel.memory,
        graph_opening=sentinel.graph_opening,
        conversation=sentinel.conversation,
        recall=sentinel.recall,
        templates=sentinel.templates,
        core=sentinel.core,
        learnings=sentinel.learnings,
        workspace=sentinel.workspace,
        episodes=sentinel.episodes,
        procedures=sentinel.procedures,
        settings=Settings(home=tmp_path, embedding_model="off"),
    )
    a, b, process = services.working("abc"), services.working("def"), services.working(None)
    assert len({a.namespace, b.namespace, process.namespace}) == 3
    assert all(w.namespace.startswith("session/") for w in (a, b, process))
    assert services.working("abc") is a and services.working(None) is process
    assert a.files is b.files is process.files  # one view of the files, not a copy per session


def test_a_configured_namespace_is_used_for_every_caller(tmp_path: Path) -> None:
    services = Services(
        memory=sentinel.memory,
        graph_opening=sentinel.graph_opening,
        conversation=sentinel.conversation,
        recall=sentinel.recall,
        templates=sentinel.templates,
        core=sentinel.core,
        learnings=sentinel.learnings,
        workspace=sentinel.workspace,
        episodes=sentinel.episodes,
        procedures=sentinel.procedures,
        settings=Settings(home=tmp_path, namespace="subagent/t1b2c3", embedding_model="off"),
    )
    assert services.working("abc").namespace == services.working(None).namespace == "subagent/t1b2c3"
