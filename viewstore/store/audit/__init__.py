"""Audit: the stored rows checked against a replay of the log (derived columns, fork links),
and checkpoints of the chain heads."""
