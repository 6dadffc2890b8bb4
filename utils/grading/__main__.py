"""python -m utils.grading: the grading command (cli.py)."""

import sys

from utils.grading.cli import main
from utils.grading.nbgrader_worker import serve_forked, warm
from utils.nbgrader_client import fork_here

fork_here(serve_forked, warm)   # the grading workers keep what this process imports (utils/nbgrader_client.py)
sys.exit(main())
