"""A rehearsal course: two tiny lessons shaped like the real ones, in a scratch course directory, to
rehearse the instructor's steps on (docs/instructors.md) and for the tests that grade hostile and
broken submissions without paying for a real lesson.

    python -m utils.classroom.workflow rehearsal DIR
"""

from __future__ import annotations

from pathlib import Path

from utils.authoring import nbauthor as A
from utils.lessons import REPO
from utils.processes import nbgrader
from utils.scratch import scratch_config


def rehearsal_lessons() -> dict[str, tuple[str, list]]:
    """Two tiny lessons shaped like the real ones (setup, solution, graded test with hidden part)."""
    tiny = [
        A.md("# Tiny lesson\nThree small functions.", "intro"),
        A.readonly("setup", "from course.checks import check_equal"),
        A.solution("add", "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION"),
        A.tests("add_test", 2, "check_equal('add(1, 2)', add(1, 2), 3)\n"
                "### BEGIN HIDDEN TESTS\n# HIDDEN-CHECK-ADD\nfrom course.observe import observe\n"
                "observe('add(0.1, 0.2)', add(0.1, 0.2))\nobserve('add(-5, 7)', add(-5, 7), 'exact')\n"
                "### END HIDDEN TESTS"),
        A.solution("mul", "def mul(a, b):\n    ### BEGIN SOLUTION\n    return a * b\n    ### END SOLUTION"),
        A.tests("mul_test", 3, "check_equal('mul(2, 3)', mul(2, 3), 6)\n### BEGIN HIDDEN TESTS\n# HIDDEN-CHECK-MUL\n"
                "from course.observe import observe\nobserve('mul(4, 5)', mul(4, 5), 'exact')\n### END HIDDEN TESTS"),
        A.solution("sub", "def sub(a, b):\n    ### BEGIN SOLUTION\n    return a - b\n    ### END SOLUTION"),
        A.tests("sub_test", 1, "check_equal('sub(3, 1)', sub(3, 1), 2)\n### BEGIN HIDDEN TESTS\n"
                "from course.observe import observe\nobserve('sub(10, 4)', sub(10, 4), 'exact')\n### END HIDDEN TESTS"),
    ]
    other = [
        A.md("# Other lesson", "other_intro"),
        A.readonly("other_setup", "from course.checks import check_close"),
        A.solution("half", "def half(x):\n    ### BEGIN SOLUTION\n    return x / 2\n    ### END SOLUTION"),
        A.tests("half_test", 1, "check_close('half(4)', half(4), 2.0)\n### BEGIN HIDDEN TESTS\n"
                "from course.observe import observe\nobserve('half(1)', half(1))\n### END HIDDEN TESTS"),
    ]
    return {"01_tiny": ("tiny.ipynb", tiny), "02_other": ("other.ipynb", other)}


def rehearsal_course(root: Path, cell_timeout: int | None = None, extra_config: str = "", one_account: bool = True) -> Path:
    """A course directory at `root` with the two rehearsal lessons in source/ and release/ built.
    one_account: one Unix account plays every student (a rehearsal), so collect cannot check
    that a submission's files belong to the student named in it; False keeps the check."""
    root = Path(root)
    extra = f"\nc.Execute.timeout = {int(cell_timeout)}\n" if cell_timeout else ""
    if one_account:
        extra += "\n# a rehearsal: one account plays every student, so owners cannot be checked\nc.ExchangeCollect.check_owner = False\n"
    scratch_config(root, REPO, extra + extra_config)
    for lesson, (name, cells) in rehearsal_lessons().items():
        A.write(root / "source" / lesson / name, cells)
        nbgrader(["generate_assignment", lesson, "--force"], cwd=root)
    return root
