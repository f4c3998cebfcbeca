"""Governance: history, rollback, integrity checks and forgetting, over every store (seed 004 §11, §8).

Owns: `shapes` (its data shapes), `history` (every version of an item), `trail` (reading the audit trail by item,
actor, run), `integrity` (critical-file hashes and alerts), `rollback` (reverting an item, a run or the whole home),
`forgetting` (archive, purge and permanent delete across stores), `forgotten_files` / `forgotten_postgres` (the
forget log).
Imports: the shared engine, the audit trail and the stores' services (memory, core, episodes, procedures, graph).
"""
