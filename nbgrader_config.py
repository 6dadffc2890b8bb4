"""nbgrader configuration: the repository root is the course directory."""

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "prefill-decode"

# Per-cell execution limit while autograding. The slowest cell (lesson 3's sweeps on a 2-core
# CPU, shrunk under NBGRADER_EXECUTION) takes well under a minute; 300 s leaves a wide margin
# and still stops an endless loop. nbgrader reads Execute.timeout (not ExecutePreprocessor's).
c.Execute.timeout = 300

# A student who deletes a graded test cell gets it back before grading.
c.OverwriteCells.add_missing_cells = True

# The stub a student sees in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# The course's grading plugins (utils/nbgrader_plugins.py): survive a dead or hung kernel, cap
# gigantic outputs, do not zero a correct cell for a warning on stderr, and keep hidden tests out
# of feedback (`--HideHiddenTests.enabled=False` shows them). They are found beside this file,
# under $COURSE_TOOLS, or in the repository whose .venv runs nbgrader; without them nbgrader
# grades as it does by default and says so.
import os as _os
import sys as _sys


def _course_tools():
    here = _os.path.dirname(_os.path.abspath(__file__))
    for root in (here, _os.environ.get("COURSE_TOOLS", ""), _os.path.dirname(_sys.prefix)):
        if root and _os.path.isfile(_os.path.join(root, "utils", "nbgrader_plugins.py")):
            return root
    return None


_tools = _course_tools()
if _tools:
    if _tools not in _sys.path:
        _sys.path.insert(0, _tools)
    from utils.nbgrader_plugins import install as _install_plugins

    _install_plugins(c)
else:
    print("nbgrader_config: utils/nbgrader_plugins.py not found; grading with nbgrader's defaults",
          file=_sys.stderr)
