"""A store spread out: hash-partitioned tables, a Citus cluster (checked by hand on a cluster,
not in CI: docs/distribution.md), the change feed per Citus node, and the append as one call
of a server-side function."""
