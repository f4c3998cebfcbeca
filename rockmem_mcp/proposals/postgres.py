"""Sub-agents' proposals in PostgreSQL: ProposalFiles' interface over the `proposals` table, so a proposal a
gated sub-agent filed on one replica is reviewed from any other. The readable view (meta/pending-memories.md) is
still rendered in each replica's home; the store's write lock is store-wide (an advisory lock)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.proposals.files import SUFFIX, ProposalFiles
from rockmem_mcp.proposals.shapes import Proposal
from rockmem_mcp.storage.pg import PROPOSALS_LOCK, Database, store_lock

log = logging.getLogger(__name__)


class PgProposalRows(ProposalFiles):
    """The records in the database; `path_for` (audit lines) and `render` (the view) as in a home."""

    def __init__(self, db: Database, home: Path, root: Path, lock_file: Path, readable: Path) -> None:
        super().__init__(home, root, lock_file, readable)
        self.db = db

    def _parsed(self, proposal_id: str, doc: str) -> Proposal:
        try:
            proposal = Proposal.model_validate_json(doc)
        except ValueError as exc:
            raise CorruptEntryError(f"proposal {proposal_id} in the store does not parse: {exc}") from None
        return proposal if proposal.id == proposal_id else proposal.model_copy(update={"id": proposal_id})

    def read(self, proposal_id: str) -> Proposal:
        rows = self.db.all("SELECT doc FROM proposals WHERE id = %s", (proposal_id,))
        if not rows:
            raise FileNotFoundError(f"no proposal {proposal_id}{SUFFIX}")
        return self._parsed(proposal_id, rows[0][0])

    def create(self, proposal: Proposal) -> bool:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO proposals (id, doc) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                (proposal.id, self.encode(proposal).decode()),
            )
            return bool(cursor.rowcount)

    def write(self, proposal: Proposal) -> None:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO proposals (id, doc) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc",
                (proposal.id, self.encode(proposal).decode()),
            )

    def remove(self, proposal_id: str) -> None:
        with self.db.transaction() as cursor:
            cursor.execute("DELETE FROM proposals WHERE id = %s", (proposal_id,))

    def ids(self) -> list[str]:
        return [row[0] for row in self.db.all("SELECT id FROM proposals ORDER BY id")]

    def all(self) -> list[Proposal]:
        found = []
        for proposal_id, doc in self.db.all("SELECT id, doc FROM proposals ORDER BY id"):
            try:
                found.append(self._parsed(proposal_id, doc))
            except CorruptEntryError as exc:  # one bad record costs the others nothing
                log.warning("proposal left out: %s", exc)
        return found

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with store_lock(self.db, PROPOSALS_LOCK):
            yield
