"""Opening a data home: SQLite or PostgreSQL, its guard against storage failures, migration, bearer tokens."""
