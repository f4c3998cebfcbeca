"""Procedures: how-to knowledge with steps and outcomes, which get better with use (seed 004 §5).

Owns: `shapes` (its data shapes), `service` (Procedures: save, match a task, record an outcome), `files` (one file
per procedure), `postgres` (the same as database rows).
Imports: the shared engine, `reinforcement` and the audit trail.
"""
