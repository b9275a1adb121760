"""The ``viewstore`` command line (click + rich). Entry point: ``viewstore.cli:main``.

Each command's module is imported when the command runs (``app.LAZY_COMMANDS``), so that
``viewstore --help`` starts fast.
"""

<<<<<<< HEAD
from viewstore.cli import commands, serve, transfer  # register the commands
from viewstore.cli.app import cli, main

__all__ = ["cli", "commands", "main", "serve", "transfer"]
=======
from viewstore.cli.app import cli, main

__all__ = ["cli", "main"]
>>>>>>> main
