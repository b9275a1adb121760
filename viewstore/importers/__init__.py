"""Readers of conversations stored elsewhere (OpenHands folders)."""
