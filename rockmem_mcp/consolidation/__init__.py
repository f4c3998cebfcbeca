"""Consolidation: what runs between sessions to keep memory small and true (seeds 002, 004 §7, §10).

Owns: `shapes` (its data shapes), `dream` (merge, decay, purge, infer: the no-LLM pass and the model's plan),
`dream_hooks`, `dream_journal`, `dream_episodes`, `dream_reports`, `fact_check`, `decay` (salience over time),
`compaction` (a long conversation into facts and an episode), `enrichment` (tags and links on save, by the client's
model), `templates` (the prompts), `reflection` (the daily review, with approval), `reflection_summary`,
`reflection_triggers` and `schedule` (when it runs), `reflection_files` / `reflection_postgres`.
Imports: the shared engine, the audit trail, every store's service, and proposals' `service` (a reflection's actions
wait there).
"""
