"""The ``viewstore`` command line (click + rich). Entry point: ``viewstore.cli:main``.

Each command's module is imported when the command runs (``app.LAZY_COMMANDS``), so that
``viewstore --help`` starts fast.
"""

from viewstore.cli.app import cli, main

__all__ = ["cli", "main"]
