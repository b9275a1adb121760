"""The domain: what an OpenHands event is, what view the LLM is sent, how an append changes the
stored projection, the hash chain and the redaction rules, and the one error tree.

Pure Python over pydantic: nothing here imports SQLAlchemy or any other part of viewstore
(tests/test_layers.py holds it to that). The store below and the adapters above import it."""
