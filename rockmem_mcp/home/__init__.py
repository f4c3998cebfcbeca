"""The whole home: opening every store at once, import and export, moving between files and a database, and
the doctor (seed 000's data home).

Owns: `stores` (open_stores: memory and the graph of one home, opened together at start), `transfer` (JSON Lines
import and export of every store), `store_migration` (files to PostgreSQL and back), `doctor` (checks and repairs).
Imports: any room, their files and database stores included: repairing and moving a home reads every store as
it lies on disk. Only the server, the page and the CLI import this room.
"""
