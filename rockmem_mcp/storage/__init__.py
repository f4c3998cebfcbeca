"""Storage: how anything reaches the disk or the database, for every store.

Owns: the atomic writer (`atomic`), the change journal between processes (`changes`; `pg_changes` in a
database), per-id locks (`id_locks`; `pg_id_locks`), the home's claim (`home_claim`), file access that never
follows a link (`no_follow`), records and their checks (`records`), the daily log (`daily_log`,
`pg_daily_log`), the access log of uses (`access_log`, `pg_access_log`), edit versions (`edited_files`) and the
database connection (`pg`). A store's own file and database formats live in its room, not here.
Imports: errors, models and text only.
"""
