"""The knowledge graph: entities, their observations and the relations between them (seed 001).

Owns: `shapes` (its data shapes), `service` (GraphService: entities, triples, traversal, search), `files` (the
graph's journal files), `postgres` (the same as database rows), `relations` (the relation vocabulary and its
inverses), `pages` (an entity's page, read with the memories that name it).
Imports: the shared engine, `reinforcement`, the audit trail and memory's `service` (for `pages`).
"""
