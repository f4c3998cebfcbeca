"""The audit trail every store writes to: who changed what, when and why (seed 004 §11).

Owns: `shapes` (its data shapes), `service` (Audit: records a change, its actor and approval), `log` (meta/audit.log
lines and their shape), `postgres` (the same log as database rows), `line_index` (where the log names each item,
run and revert: the trail reads those lines only), `versions` (the earlier versions of edited files), `retention`
(folding old lines into the archive).
Imports: the shared engine only (config, errors, models, storage). Every store above imports `service` and `log`;
`postgres` is this room's own.
"""
