"""Working memory: short-lived keyed notes for the task at hand, with a time to live (RockBot's working tier).

Owns: `shapes` (its data shapes), `service` (WorkingMemory: get, set, search a namespace), `vectors` (their
embeddings, kept in memory), `files` (one file per namespace), `postgres` (the same as database rows).
Imports: the shared engine and `vector_worker`.
"""
