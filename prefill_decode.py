"""The entry point of the `prefill-decode` command (pyproject.toml's [project.scripts]).

The instructor's tools are not installed: they stay in this checkout's utils/, so that no other
folder's Python finds them by accident (a Dask scheduler started elsewhere, a worker running its own
clone). This module, installed (editable) beside `course`, puts its checkout on the path and runs
utils/commands.py."""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> int:
    checkout = str(Path(__file__).resolve().parent)
    if checkout not in sys.path:
        sys.path.insert(0, checkout)
    from utils.commands import main as run_tool

    return run_tool()
