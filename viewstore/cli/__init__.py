"""The ``viewstore`` command line (click + rich). Entry point: ``viewstore.cli:main``."""

from viewstore.cli import commands, serve, transfer  # register the commands
from viewstore.cli.app import cli, main

__all__ = ["cli", "commands", "main", "serve", "transfer"]
