"""A revert tells the store which memory files it put back or removed (`adopt_files`): a memory it removed leaves
no vector behind, as a delete does (`doctor` reported an orphaned vector after a dream run was undone)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService


def test_a_memory_removed_behind_the_store_takes_its_vector_with_it(tmp_path: Path) -> None:
    memory = MemoryService(Settings.load({"home": tmp_path, "embedding_model": "off", "audit_git": False}, env={}))
    try:
        kept = memory.save("The ferry leaves at nine", "travel")
        gone = memory.save("The ferry leaves at ten", "travel")
        for entry in (kept, gone):
            memory.vector_files.write(entry.id, entry.content, np.ones(4, dtype=np.float32))
        file = f"memory/travel/{gone.id}.json"
        os.remove(tmp_path / file)  # as a revert removes a merge's result

        assert memory.adopt_files([file, f"memory/travel/{kept.id}.json"]) == 2

        assert not Path(memory.vector_files.path(gone.id)).exists()
        assert Path(memory.vector_files.path(kept.id)).exists()  # a memory that is still there keeps its vector
        assert [hit.entry.id for hit in memory.search("ferry").results] == [kept.id]
    finally:
        memory.close()
