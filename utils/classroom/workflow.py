"""Submissions into the course, re-exported from the modules that hold them: collect from the
exchange (collect.py: only what each student owns, capped) and the LMS import (lms_import.py: each
upload attributed by the name the LMS gave it, read under caps per student). nbgrader_config.py
names the collector classes through here; the command line is utils/classroom/term.py.
"""

from __future__ import annotations

from utils.classroom.collect import (COLLECT_CLASS, NBGRADER_FILES, REFUSED, OverCap,  # noqa: F401 (re-exported)
                                     OwnerCheckedCollect, collect)
from utils.classroom.lms_import import (LMS_REGEXP, ZIP_COLLECTOR, IdCheckedCollector,  # noqa: F401 (re-exported)
                                        ImportCaps, lms_import, zip_collect)
