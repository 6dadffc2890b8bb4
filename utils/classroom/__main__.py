"""python -m utils.classroom setup|add-student|teardown: the class server (utils/classroom/server_admin.py)."""

import sys

from utils.classroom.server_admin import main

sys.exit(main())
