"""Episodes: what happened, as dated summaries of sessions and events (seed 004 §4).

Owns: `service` (Episodes: record, search by words and time, fade). The day files are storage's daily log and
the index is search's `episode_index`; in a database they are the same rows as the daily log's.
Imports: the shared engine, `reinforcement` and the audit trail.
"""
