"""viewstore: event-sourced SQL persistence for OpenHands agent conversations."""
