"""python -m utils.classroom setup|add-student|teardown: the class server (utils/classroom/cli.py)."""

import sys

from utils.classroom.cli import main

sys.exit(main())
