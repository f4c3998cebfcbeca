"""Long-term memories: the entries an agent saves, searches and recalls (RockBot's long-term tier, seed 000).

Owns: `service` (MemoryService: save, search, update, archive, delete; the index and its snapshot),
`files` (one JSON file per memory under the home), `postgres` (the same over a database, ROCKMEM_STORE),
`migrations` (bringing an older home's files to the current format).
Imports: the shared engine, `vector_worker`, `reinforcement` and the audit trail. Other rooms use `service`.
"""
