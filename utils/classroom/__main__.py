"""python -m utils.classroom setup|add-student|teardown: the class server (utils/classroom/setup.py)."""

import sys

from utils.classroom.setup import main

sys.exit(main())
