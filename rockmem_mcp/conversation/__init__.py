"""The conversation: recorded turns by day, sessions, and feedback on what memory gave (RockBot's short tier).

Owns: `service` (ConversationMemory: record_turn, get_conversation, marks for compaction and dreams),
`sessions` (which turns belong together), `feedback` (what the user said of a recall: the feedback log).
Imports: the shared engine and the audit trail.
"""
