"""Writing a conversation's rows: the row-level SQL of an append, the fast path and its
server-side call."""
