"""What adapters need besides events: the SDK's base state, a lock across processes, and
the agent server's records of its conversations."""
