"""CLI commands for the cluster layer; imports of heavy modules stay inside the commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
