"""A conversation's lifecycle after its appends: forking, redaction, erasure. The pure rules
redaction follows (the payload scrub, the leaf digests) are the domain's
(viewstore/domain/scrub.py, viewstore/domain/leaves.py)."""
