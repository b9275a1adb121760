"""The database itself: engines per dialect, driver errors, the schema, migrations, and the
PostgreSQL layouts (roles, partitions, Citus)."""
