"""A conversation's lifecycle after its appends: forking, redaction (with its pure payload
scrub and leaf digests), erasure."""
