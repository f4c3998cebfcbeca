"""Sub-agents' proposals: memory a sub-agent suggests, held until the main agent or a person commits it (seed 004 §12).

Owns: `shapes` (its data shapes), `service` (Proposals: propose, list, commit, reject, defer), `files` (one file per
proposal), `postgres` (the same as database rows).
Imports: the shared engine, the audit trail, memory's `service` and recall's `remembering` (a commit files the note
where it belongs).
"""
