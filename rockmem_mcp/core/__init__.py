"""Core memory: MEMORY.md's blocks, the learnings and the workspace files a session starts from (seed 004 §3).

Owns: `shapes` (its data shapes), `service` (CoreMemory: the blocks, their caps, mirror memories of the Critical
Facts), `files` (MEMORY.md read and written), `postgres` (the same in a database), `learnings` (LEARNINGS.md, fed by
feedback), `workspace` and `workspace_files` (the workspace's markdown files).
Imports: the shared engine, the audit trail, memory's `service` and conversation's `feedback`.
"""
