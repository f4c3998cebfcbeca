"""Recall: what a turn brings back from every store, and where a "remember this" goes (seeds 000, 003, 004 §6).

Owns: `shapes` (its data shapes), `service` (Recall: one bounded context from working memory, core, episodes,
procedures, graph and memories), `triggers` (phrases that start a remember or a forget), `remembering` (routing a
note to the store it belongs in), `router` (which store a note is for, by its words).
Imports: the shared engine, every store's service and governance's `forgetting`.
"""
