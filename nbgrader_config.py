"""nbgrader configuration: the repository root is the course directory."""

import os as _os
import sys as _sys

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "prefill-decode"

# Per-cell execution limit while autograding. The slowest cell (lesson 3's sweeps on a 2-core
# CPU, shrunk under NBGRADER_EXECUTION) takes well under a minute; 300 s leaves a wide margin
# and still stops an endless loop. nbgrader reads Execute.timeout (not ExecutePreprocessor's).
c.Execute.timeout = 300

# Total time one notebook may take while autograding (kernel starts and re-runs included). A whole
# lesson takes a few minutes on a 2-core CPU; when 1200 s are spent the running cell is interrupted,
# the cells after it are not run and their graded cells score 0, with that reason in the report.
# utils.grading.grade_course's per-submission watchdog (1800 s) only ends a grader stuck outside any cell.
c.SafeExecute.notebook_timeout = 1200

# A student who deletes a graded test cell gets it back before grading.
c.OverwriteCells.add_missing_cells = True

# The stub a student sees in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Every autograding kernel runs in a bubblewrap sandbox (utils/sandbox/): no course files,
# gradebook, other students or network; read-only Python; memory and process limits. Where
# bubblewrap cannot run, grading stops and says why. Only where grading itself runs in a
# container without network, secrets or the course folder may it be turned off:
# c.SandboxKernelManager.enabled = False
# c.SandboxKernelManager.memory_limit_mb = 4096   # per kernel process
# c.SandboxKernelManager.process_limit = 256

# The course's grading (utils/grading/): graded test cells only observe values in the student's
# kernel; the grader runs the same cells on the reference solution (source/) in a trusted kernel
# and judges each cell outside the student's process, replacing its outputs by one verdict line.
# Also: the sandbox, surviving a dead or hung kernel, capping gigantic outputs, and keeping hidden
# tests out of feedback (`--HideHiddenTests.enabled=False` shows them). The reference runs are
# cached in .grading-cache/ (c.ReferenceObservations.cache_dir). The plugins are found beside this
# file, under $COURSE_TOOLS, or in the repository whose .venv runs nbgrader. Without them nothing is
# graded: every autograde and feedback step fails with a message saying so.


def _course_tools():
    here = _os.path.dirname(_os.path.abspath(__file__))
    for root in (here, _os.environ.get("COURSE_TOOLS", ""), _os.path.dirname(_sys.prefix)):
        if root and _os.path.isfile(_os.path.join(root, "utils", "grading", "__init__.py")):
            return root
    return None


_tools = _course_tools()
if _tools:
    if _tools not in _sys.path:
        _sys.path.insert(0, _tools)
    from utils.grading.pipeline import install as _install_plugins

    _install_plugins(c)
    # Collect takes from each submission in the exchange only the files its student owns: on one
    # server anyone who learns a submission folder's name can write into it (utils/classroom/workflow.py).
    c.ExchangeFactory.collect = "utils.classroom.collect.OwnerCheckedCollect"
else:
    from nbconvert.preprocessors import Preprocessor as _Preprocessor

    _MISSING = ("the course's grading plugins (utils/grading/) were not found beside "
                "nbgrader_config.py, under $COURSE_TOOLS or beside the Python environment; nothing is "
                "graded without them (no sandbox, no reference, hidden tests would reach the feedback)")

    class PluginsMissing(_Preprocessor):
        def preprocess(self, nb, resources):
            raise RuntimeError(_MISSING)

    print(f"nbgrader_config: {_MISSING}", file=_sys.stderr)
    c.Autograde.sanitize_preprocessors = [PluginsMissing]
    c.Autograde.autograde_preprocessors = [PluginsMissing]
    c.GenerateFeedback.preprocessors = [PluginsMissing]
