"""Cheating inside the kernel earns nothing: the grade is decided outside the student's process.

One scratch course with a small lesson of its own (an `add` exercise, a numpy `scale` exercise
and a quiz question: 2 + 2 + 1 points) is graded through the real pipeline (utils.grading.grade_course, two
workers side by side as `make grade` runs on two cores, each an `nbgrader autograde` run that
grades its share of the students one after another). Each cheat below is a wrong answer plus a way of making a
graded cell look right from inside the kernel: patched comparison functions and modules, tracing
and frame rewriting, rebinding the names the checks use, silent resume through the interpreter's
and the kernel's hooks, forged observations and messages, a fake score, extra or missing
observations. Before grading moved outside the kernel, most of these earned full marks.
Fair students graded in the same run keep full marks, and grading completes for everyone.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from course.observe import MIME
from utils.authoring import nbauthor as A
from utils.notebooks import submission_from
from utils.processes import nbgrader
from utils.scratch import scratch_config
from utils.grading.grade_course import grade_lessons
from utils.grading.settings import course_settings
from utils.sandbox.probe import unavailable

pytestmark = pytest.mark.slow
LESSON, NB = "01_cheats", "cheats.ipynb"
POINTS = {"add_test": 2, "scale_test": 2, "q1_test": 1}


def lesson_cells() -> list:
    return [
        A.md("# A small lesson\nAdd, scale, and one question.", "intro"),
        A.readonly("setup", "import numpy as np\nfrom course.checks import check_close, check_equal\n"
                            "from course.quiz import check_choice"),
        A.solution("add", "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION"),
        A.tests("add_test", 2, "check_equal('add(1, 2)', add(1, 2), 3)\n### BEGIN HIDDEN TESTS\n"
                               "from course.observe import observe\nobserve('add(0.1, 0.2)', add(0.1, 0.2))\n"
                               "observe('add(-5, 7)', add(-5, 7), 'exact')\n### END HIDDEN TESTS"),
        A.solution("scale", "def scale(x, k):\n    ### BEGIN SOLUTION\n    return np.asarray(x, dtype=float) * k\n"
                            "    ### END SOLUTION"),
        A.tests("scale_test", 2, "check_close('scale([1, 2], 3)[1]', scale([1, 2], 3)[1], 6.0)\n"
                                 "### BEGIN HIDDEN TESTS\nfrom course.observe import observe\n"
                                 "observe('scale([0.5, 4.0], -2)', [float(v) for v in scale([0.5, 4.0], -2)])\n"
                                 "### END HIDDEN TESTS"),
        A.solution("q1_answer", "### BEGIN SOLUTION\nq1 = 'c'\n### END SOLUTION"),
        A.tests("q1_test", 1, "check_choice('q1', q1, 'abcd')"),
    ]


WRONG = "def add(a, b):\n    return 0\n"
RAISES = "def add(a, b):\n    raise NotImplementedError('not yet')\n"
NOTHING = "import ast\nclass Nothing(ast.NodeTransformer):\n    def visit_Module(self, node):\n" \
          "        return ast.Module(body=[ast.Pass()], type_ignores=[])\n"
RESUME = ("import ast\nclass Resume(ast.NodeTransformer):\n    def visit_Module(self, node):\n"
          "        node.body = [ast.Try(body=[s], handlers=[ast.ExceptHandler(type=None, name=None, "
          "body=[ast.Pass()])], orelse=[], finalbody=[]) for s in node.body]\n"
          "        return ast.fix_missing_locations(node)\n")
FRAME = ("import ctypes, sys\ndef _tracer(frame, event, arg):\n"
         "    if event == 'call' and frame.f_code.co_name == 'observe':\n"
         "        frame.f_locals['value'] = 3\n"
         "        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))\n"
         "    return None\nsys.settrace(_tracer)\n")
FORGE = ("import course.observe, course.checks\n_real = course.observe.observe\n"
         "def _forge(label, value, rule='close', **kw):\n    return _real(label, 3, rule, **kw)\n"
         "course.observe.observe = course.checks.observe = _forge\n")

# {student: source of the `add` cell}: a wrong answer, made to look right from inside the kernel
ADD_CHEATS = {
    "patched_isclose": WRONG + "import math\nmath.isclose = lambda *a, **k: True\n",
    "patched_numpy": WRONG + "import numpy\nnumpy.allclose = lambda *a, **k: True\n"
                             "numpy.isclose = lambda *a, **k: True\nnumpy.testing.assert_allclose = lambda *a, **k: None\n",
    "patched_operator": WRONG + "import operator\noperator.eq = lambda a, b: True\noperator.ne = lambda a, b: False\n",
    "equal_to_anything": "class Any(float):\n    def __eq__(self, other): return True\n    __hash__ = float.__hash__\n"
                         "class Eq:\n    def __eq__(self, other): return True\n"
                         "def add(a, b):\n    return Any(0) if a == 1 else Eq()\n",
    "settrace_frame_rewrite": WRONG + FRAME,
    "rebound_checks": WRONG + "check_equal = lambda *a, **k: None\ncheck_close = lambda *a, **k: None\n",
    "rebound_observe": WRONG + "import course.observe, course.checks\n"
                               "course.observe.observe = course.checks.observe = lambda *a, **k: None\n",
    "forging_observe": WRONG + FORGE,
    "rebound_display": WRONG + "import IPython.display, IPython.core.display_functions as f\n"
                               "IPython.display.display = f.display = lambda *a, **k: None\n",
    "excepthook": RAISES + "import sys\nsys.excepthook = lambda *a: None\n",
    "custom_exception_handler": RAISES + "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)\n",
    "input_transformer": WRONG + "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n",
    "ast_transformer": WRONG + NOTHING + "get_ipython().ast_transformers.append(Nothing())\n",
    "ast_silent_resume": RAISES + RESUME + "get_ipython().ast_transformers.append(Resume())\n",
    "print_keeps_quiet": RAISES + "import builtins\nbuiltins.print = lambda *a, **k: None\n"
                                  "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)\n",
    "forged_observation": "from IPython.display import display\ndef add(a, b):\n"
                          f"    display({{{MIME!r}: {{'label': f'add({{a}}, {{b}})', 'rule': 'exact', 'rel': 1e-6, "
                          "'abs': 0.0, 'value': 3}}, raw=True)\n    return 0\n",
    "fake_score": "def add(a, b):\n    get_ipython().displayhook(1.0)\n"
                  "    print('✔ all 3 checks match the reference solution (1 visible, 2 hidden)')\n    return 0\n",
    "fake_score_number": "def add(a, b):\n    get_ipython().displayhook(2)\n"
                         "    return 3 if (a, b) == (1, 2) else 0\n",
    "extra_observation": "from course.observe import observe\ndef add(a, b):\n"
                         "    observe('bonus', 1, 'exact')\n    return a + b\n",
    "only_the_visible_case": "def add(a, b):\n    if (a, b) == (1, 2):\n        return 3\n    raise SystemExit\n",
}
# {student: source of the quiz answer cell}
QUIZ_CHEATS = {
    "quiz_str_subclass": "class S(str):\n    def __eq__(self, other): return True\n    __hash__ = str.__hash__\n"
                         "    def strip(self): return self\n    def lower(self): return self\nq1 = S('z')",
    "quiz_every_letter": "q1 = ['a', 'b', 'c', 'd']",
    "quiz_rebound_check": "check_choice = lambda *a, **k: None\nq1 = 'a'",
    "quiz_forged_in_answer_cell": "from IPython.display import display\n"
                                  f"display({{{MIME!r}: {{'label': 'q1', 'rule': 'choice', 'rel': 1e-6, 'abs': 0.0, "
                                  "'value': 'c'}}, raw=True)\nq1 = 'a'",
}
FAIR = {
    "fair": {},
    "fair_alternative": {"add": "def add(a, b):\n    return sum([a, b])",
                         "scale": "def scale(x, k):\n    return [float(v) * k for v in x]",
                         "q1_answer": "q1 = ' C '"},
    "fair_with_warnings": {"add": "import sys, warnings\ndef add(a, b):\n    warnings.warn('old API')\n"
                                  "    print('debug', file=sys.stderr)\n    return a + b",
                           "q1_answer": "q1 = 'c'  # sum = 3 shadows nothing the grader needs\nsum = 3"},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("cheats") / "course"
    # Without bubblewrap the kernels run unconfined: what is shown here holds without the sandbox.
    scratch_config(course, extra="c.SandboxKernelManager.enabled = False\n" if unavailable() else "")
    A.write(course / "source" / LESSON / NB, lesson_cells())
    nbgrader(["generate_assignment", LESSON, "--force"], cwd=course)
    release = nbformat.read(str(course / "release" / LESSON / NB), as_version=4)
    source = nbformat.read(str(course / "source" / LESSON / NB), as_version=4)
    students = {s: {"add": src} for s, src in ADD_CHEATS.items()}
    students |= {s: {"q1_answer": src} for s, src in QUIZ_CHEATS.items()} | FAIR
    for student, overrides in students.items():
        folder = course / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        nbformat.write(submission_from(release, source, overrides), str(folder / NB))
    run = grade_lessons(course, [LESSON], workers=2, cell_timeout=60, quiet=True)
    s = course_settings(course)
    from utils.scores import read_scores_url

    scores: dict[str, dict[str, float]] = {}
    for r in read_scores_url(s.db_url, s.course_id, [LESSON]):
        scores.setdefault(r.student, {})[r.cell] = r.score
    return course, {o.student: o for o in run.outcomes}, scores


def test_grading_completes_for_everyone_in_one_run(graded):
    _, outcomes, scores = graded
    expected = set(ADD_CHEATS) | set(QUIZ_CHEATS) | set(FAIR)
    assert set(outcomes) == expected
    assert {s for s, o in outcomes.items() if o.status == "graded"} == expected, \
        "\n".join(o.line() for o in outcomes.values() if o.status != "graded")
    assert set(scores) == expected


@pytest.mark.parametrize("student", sorted(FAIR))
def test_fair_students_keep_full_marks(graded, student):
    _, outcomes, scores = graded
    assert scores[student] == POINTS, outcomes[student].verdicts


@pytest.mark.parametrize("student", sorted(ADD_CHEATS))
def test_an_in_kernel_cheat_earns_nothing_for_its_cell(graded, student):
    _, outcomes, scores = graded
    assert scores[student]["add_test"] == 0, outcomes[student].verdicts["add_test"]
    assert outcomes[student].verdicts["add_test"][0] is False


@pytest.mark.parametrize("student", sorted(QUIZ_CHEATS))
def test_a_forged_quiz_answer_earns_nothing(graded, student):
    _, outcomes, scores = graded
    assert scores[student]["q1_test"] == 0, outcomes[student].verdicts["q1_test"]


def test_the_verdicts_say_what_went_wrong(graded):
    _, outcomes, _ = graded
    said = {s: o.verdicts["add_test"][1] for s, o in outcomes.items() if s in ADD_CHEATS}
    assert "hidden test 'add(0.1, 0.2)' does not match" in said["forging_observe"]
    assert "the test cell did not run as written" in said["extra_observation"]
    assert "check 2 should be 'add(0.1, 0.2)'" in said["forged_observation"]
    assert "check 1 should be 'add(1, 2)'" in said["rebound_checks"]
    assert said["excepthook"].startswith("NotImplementedError: a function this cell calls is not written yet")
    assert outcomes["fair"].verdicts["add_test"] == (
        True, "all 3 checks match the reference solution (1 visible, 2 hidden)")


def test_each_graded_cell_keeps_only_the_verdict(graded):
    course, *_ = graded
    for student in ("fake_score", "fake_score_number", "fair_with_warnings", "forged_observation"):
        nb = nbformat.read(str(course / "autograded" / student / LESSON / NB), as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") in POINTS:
                assert len(cell.outputs) == 1, (student, cell.outputs)
                out = cell.outputs[0]
                assert out.output_type == "error" or (out.output_type == "stream" and out.name == "stdout")
                assert MIME not in json.dumps(out)


def test_the_reference_was_run_once_and_cached_outside_the_work_folders(graded):
    course, *_ = graded
    cached = list((course / ".grading-cache").glob("*.json"))
    assert len(cached) == 1
    data = json.loads(cached[0].read_text())
    assert [o["label"] for o in data["cells"]["add_test"]["observations"]] == ["add(1, 2)", "add(0.1, 0.2)", "add(-5, 7)"]
