"""The ``viewstore`` command line (click + rich). Entry point: ``viewstore.cli:main``."""

from viewstore.cli import catalogue, commands, transfer  # register the commands
from viewstore.cli.app import cli, main

__all__ = ["catalogue", "cli", "commands", "main", "transfer"]
