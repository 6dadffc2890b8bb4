"""python -m utils.grading: the grading command (cli.py)."""

import sys

from utils.grading.cli import command

sys.exit(command())
