"""The visible checks speak in a few short lines: course.checks, course.quiz and course.plotting.drawing.

Unit tests, plus IPython itself running cells the way a notebook does, to show what a student
sees: for a failed check, what was expected and what came back on the first line, the check's
label after it, no line longer than an 80-column terminal shows under `nbgrader validate` (76
characters: it indents by four); one line for a function not written yet, wherever it is called;
the student's own frames, without the course's, for any other error.
"""

from __future__ import annotations

import contextlib
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course.checks import CheckFailed, check_close, check_equal, check_raises, checking
from course.formatting import WIDTH, format_number, format_pair, ratio_note
from course.plotting import drawing
from course.quiz import QuizAnswerError, check_choice
from course.stubs import name_stubs


def stub(x):
    raise NotImplementedError()


def one_line(err: CheckFailed) -> str:
    lines = err._render_traceback_()
    assert len(lines) == 1 and "\n" not in lines[0], lines
    return lines[0]


def shown_lines(err: CheckFailed) -> list[str]:
    """What IPython shows for `err`: a few lines, none longer than WIDTH (76) characters."""
    lines = err._render_traceback_()
    assert 1 <= len(lines) <= 4 and all("\n" not in line and len(line) <= WIDTH for line in lines), lines
    return lines


# --- numbers in one format, with their ratio ---------------------------------------------------

@pytest.mark.parametrize("expected, returned, shown", [
    (90177536, 9.0177536e7, ("90,177,536", "90,177,536")),  # int and float alike: both whole
    (327680, 2621440.0, ("327,680", "2,621,440")),
    (0.03, 0.029849, ("0.03", "0.029849")),
    (1.0, 1.0000001, ("1", "1.0000001")),  # as many digits as it takes to tell them apart
    (1.4e13, 7e12, ("14,000,000,000,000", "7,000,000,000,000")),  # no e-notation beside 1,000s
    (137_756_688_384, 1.377e11, ("137,756,688,384", "137,700,000,000")),  # the same for whole and not
    (0.00660961255517, 0.0066, ("0.00660961", "0.0066")),
    (2.5e-7, -2.5e-7, ("0.00000025", "-0.00000025")),
    (2000.0, 1999.5, ("2000", "1999.5")),  # grouped from five digits on
    (1.0, 3e22, ("1", "3e+22")),  # a wild answer: both in e-notation
])
def test_both_numbers_in_one_format(expected, returned, shown):
    assert format_pair(expected, returned) == shown


@pytest.mark.parametrize("expected, returned, note", [
    (327680, 2621440, " (8x the expected)"),
    (2.0, 1.0, " (1/2 of the expected)"),
    (1e-3, 1.0, " (1000x the expected)"),
    (1.0, 2e5, " (200,000x the expected)"),
    (0.03, 0.02985, " (0.995x the expected)"),
    (1.0, -1.0, " (the opposite sign)"),
    (1.0, 1.0000001, ""),  # rounding: no ratio worth reading
    (0.0, 1.0, ""),
    (1.0, float("nan"), ""),
])
def test_ratio_when_it_is_telling(expected, returned, note):
    assert ratio_note(expected, returned) == note


def test_check_close_passes_and_prints_one_line(capsys):
    check_close("TTFT (s)", np.float64(0.4000000001), 0.4)
    assert capsys.readouterr().out == "ok    TTFT (s): expected 0.4, returned 0.4\n"


def test_check_close_failure_puts_both_numbers_first_then_the_label(capsys):
    with pytest.raises(CheckFailed) as caught:
        check_close("KV bytes per token", 2621440.0, 327680)
    assert shown_lines(caught.value) == ["CheckFailed: expected 327,680, returned 2,621,440 (8x the expected)",
                                         "  check: KV bytes per token"]
    assert capsys.readouterr().out == ""  # the message is the exception, printed once


# The longest labels and the largest numbers of the lessons' checks, each answer 8x off.
LONG = [
    ("prefill FLOPs, Llama-2-70B, 1,000 tokens", 137_429_008_384_000 * 8, 137_429_008_384_000),
    ("H100 SXM in bf16 (989 TFLOP/s, 3.35 TB/s, 2 bytes per weight), tokens", 2361.79, 295.223880597),
    ("TTFT floor (s), batch 8: 8,000 tokens of FLOPs and of cache", 0.106893 * 1.0123456, 0.106893),
    ("Llama-2-7B bf16 on 80 GiB: 4,096-token sequences that fit", 1.5, 2),
]


@pytest.mark.parametrize("label, returned, expected", LONG)
def test_a_failure_fits_an_80_column_terminal_numbers_first(label, returned, expected):
    """`nbgrader validate` indents an error by 4 and cuts its lines at 87 characters, the Validate
    dialog does not wrap: both numbers and the ratio on the first line, within 76 characters."""
    with pytest.raises(CheckFailed) as caught:
        (check_equal if isinstance(expected, int) and expected < 10 else check_close)(label, returned, expected)
    lines = [line.strip() for line in shown_lines(caught.value)]
    at = next(i for i, line in enumerate(lines) if line.startswith("check: "))
    numbers = " ".join(lines[:at])  # on one line where they fit, else the returned one just below
    assert re.fullmatch(r"CheckFailed: expected \S+, returned \S+( \(\S+x the expected\))?", numbers), lines
    assert " ".join(lines[at:]) == f"check: {label}"


def test_one_notation_in_a_cell_whole_or_not():
    """A cell's checks (and the labels that name 1,000 tokens) never mix e-notation with grouped
    digits: a passing whole number and a failing float of the same size look alike."""
    with pytest.raises(CheckFailed) as caught:
        check_close("bytes", 1.3775668838e11 * 1.01, 137_756_688_384)
    text = " ".join(shown_lines(caught.value)) + format_pair(137_429_008_384, 137_429_008_384)[0]
    assert not re.search(r"\de[+-]?\d", text) and "137,756,688,384" in text and "139,134,255,264" in text
    assert format_number(float("nan")) == "nan" and format_number(-0.5) == "-0.5"


@pytest.mark.parametrize("returned, said", [
    (None, "returned None (type NoneType): does the function end with `return ...`?"),
    (np.array([0.4, 0.5]), "of type ndarray"),
    ("0.4", "of type str"),
    (True, "of type bool"),
])
def test_check_close_wants_a_number(returned, said):
    with pytest.raises(CheckFailed, match=r"expected a number close to 0\.4") as caught:
        check_close("TTFT (s)", returned, 0.4)
    assert said in str(caught.value)


def test_check_equal_formats_numbers_alike_and_compares_arrays_safely():
    check_equal("bars", 2, 2.0)
    with pytest.raises(CheckFailed, match="expected 'memory', returned 'compute'"):
        check_equal("bound", "compute", "memory")
    with pytest.raises(CheckFailed, match=r"expected 2, returned 3 \(1\.5x the expected\)"):
        check_equal("bars", 3, 2)
    with pytest.raises(CheckFailed):
        check_equal("ticks", np.array([1, 2]), [1, 2])


def test_check_raises_names_the_argument(capsys):
    def good(bandwidth):
        raise ValueError("bandwidth must be positive")

    check_raises("neg bw", good, -1, names="bandwidth")
    assert "ok    neg bw: ValueError" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="expected a ValueError naming 'bw'"):
        check_raises("neg bw", good, -1, names="bw")
    with pytest.raises(CheckFailed, match="`stub` is not written yet"):
        check_raises("neg", stub, -1)
    with pytest.raises(CheckFailed, match="returned -1 of type int"):
        check_raises("neg", lambda b: b, -1)


# --- checking(): the one-line reports -----------------------------------------------------------

def test_checking_puts_the_numbers_of_a_failed_check_first():
    # nbgrader's Validate dialog does not wrap lines: what matters comes first, and is short.
    with pytest.raises(CheckFailed) as caught:
        with checking("Exercise A: request_metrics"):
            check_close("TPOT (s)", 0.02985, 0.03)
    assert shown_lines(caught.value) == ["CheckFailed: expected 0.03, returned 0.02985 (0.995x the expected)",
                                         "  check: TPOT (s)"]


def test_checking_says_which_function_is_not_written_yet():
    def e2e_model(x):
        return stub(x) + 1  # the unwritten function is the one called, not the one checked

    with pytest.raises(CheckFailed) as caught:
        with checking("Exercise B"):
            e2e_model(1)
    first, *rest = shown_lines(caught.value)
    assert first == "CheckFailed: `stub` is not written yet"
    assert " ".join(rest).split() == ("[Exercise B] write it in its cell above, in place of "
                                      "`raise NotImplementedError()`, then run that cell and this one").split()


def test_checking_says_how_to_answer_a_quiz():
    with pytest.raises(CheckFailed) as caught:
        with checking("q2"):
            check_choice("q2", q2, "abcd")  # noqa: F821 - not answered yet
    assert shown_lines(caught.value)[0] == 'CheckFailed: q2 is not answered yet: write q2 = "a" (your letter, in quotes)'



def test_checking_says_what_to_run_for_an_undefined_name():
    with pytest.raises(CheckFailed, match="`ttft_model` is not defined yet: run the cells above"):
        with checking("Exercise B"):
            ttft_model(1000, 2500)  # noqa: F821 - not defined on purpose: the NameError is the test


def test_checking_lets_the_students_own_errors_through():
    def request_metrics(times):
        return times[0] / undefined_in_the_function  # noqa: F821 - not defined on purpose: the NameError is the test

    with pytest.raises(NameError):  # a bug inside the function: the traceback is the help
        with checking("Exercise A"):
            request_metrics([1.0])
    with pytest.raises(ZeroDivisionError):
        with checking("Exercise A"):
            1 / 0  # noqa: B018 - the ZeroDivisionError the test expects


def test_checking_reports_a_missing_return_and_a_missing_key():
    with pytest.raises(CheckFailed, match="returned None: does it end with `return ...`"):
        with checking("Exercise A"):
            m = None  # what `m = f(); m["ttft_s"]` meets when f forgets to return
            m["ttft_s"]
    with pytest.raises(CheckFailed, match="has no key 'ttft_s'"):
        with checking("Exercise A"):
            {"ttft": 0.4}["ttft_s"]


def test_no_empty_chart_under_an_unwritten_plot():
    plt.close("all")
    kept = plt.figure()
    with pytest.raises(CheckFailed, match="not written yet"):
        with checking("Exercise C"):
            fig, ax = plt.subplots()
            stub(ax)
    assert plt.get_fignums() == [kept.number]  # the new, empty figure is gone; others stay
    with pytest.raises(CheckFailed):  # a wrong figure stays: the student should see it
        with checking("Exercise C"):
            fig, ax = plt.subplots()
            check_equal("lines drawn", len(ax.lines), 1)
    assert len(plt.get_fignums()) == 2
    plt.close("all")


def test_drawing_closes_its_figure_when_the_function_is_not_written():
    plt.close("all")
    with pytest.raises(CheckFailed, match=r"`stub` is not written yet\n\[the staircase\] write it"):
        with drawing("the staircase", figsize=(4, 3)) as ax:
            stub(ax)
    assert plt.get_fignums() == []
    with drawing("a line") as ax:
        ax.plot([0, 1], [0, 1])
    assert len(ax.lines) == 1
    plt.close("all")


# --- quizzes -----------------------------------------------------------------------------------

def test_check_choice_accepts_an_option(capsys):
    check_choice("q1", " B ", "abcd")
    assert "q1: answer 'b' recorded (one of a, b, c or d)" in capsys.readouterr().out


@pytest.mark.parametrize("answer, said", [
    ("e", "'e' is not one of the options"),
    (2, "it is 2, of type int"),
    (None, "it is None, of type NoneType"),
])
def test_check_choice_says_how_to_answer(answer, said):
    with pytest.raises(QuizAnswerError) as caught:
        check_choice("q1", answer, "abcd")
    text = " ".join(line.strip() for line in shown_lines(caught.value))
    assert said in text and 'for example q1 = "a" (one of a, b, c or d)' in text
    assert isinstance(caught.value, ValueError)  # what check_choice has always raised
    with pytest.raises(CheckFailed) as caught:
        with checking("q1"):
            check_choice("q1", answer, "abcd")
    assert str(caught.value).startswith("q1: ")  # the question is named once


# --- what a notebook shows: IPython running the cells ------------------------------------------

@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_cell("from course.checks import checking, check_close\n"
                "def stub(x):\n    raise NotImplementedError()\n"
                "def tpot(times):\n    return (times[-1] - times[0]) / len(times)\n"
                "def broken(times):\n    return times.nope\n")
    yield sh
    InteractiveShell.clear_instance()


def run(shell, capsys, code: str) -> str:
    capsys.readouterr()
    shell.run_cell(code)
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_ipython_shows_a_failed_check_numbers_first(shell, capsys):
    out = run(shell, capsys, 'with checking("Exercise A: tpot"):\n'
                             '    check_close("TPOT (s)", tpot([0.4, 0.43, 0.46]), 0.03)\n')
    assert out.strip().splitlines() == ["CheckFailed: expected 0.03, returned 0.02 (0.6667x the expected)",
                                        "  check: TPOT (s)"]


def test_ipython_shows_an_unwritten_exercise_in_short_lines(shell, capsys):
    out = run(shell, capsys, 'with checking("Exercise A: stub"):\n    stub(1)\n')
    lines = out.strip().splitlines()
    assert lines[0] == "CheckFailed: `stub` is not written yet" and len(lines) <= 3
    assert "Traceback" not in out and all(len(line) <= WIDTH for line in lines)


def test_a_given_cell_that_calls_an_unwritten_function_says_so_in_one_line(shell, capsys):
    """Outside any check (a given cell of the lesson that uses an exercise): one line naming the
    function to write, from the stub's own exception; no IPython handler or hook is installed."""
    assert name_stubs(shell) and shell.custom_exceptions == ()
    run(shell, capsys, "def token_arrival_times(prompt):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")
    out = run(shell, capsys, "arrivals = [token_arrival_times(p) for p in (1, 2)]\n")
    assert out.strip() == "NotImplementedError: `token_arrival_times` is not written yet"
    out = run(shell, capsys, "# YOUR CODE HERE\nraise NotImplementedError()\n")  # an answer cell
    assert out.strip() == "NotImplementedError: this cell is not answered yet: write your answer here"
    out = run(shell, capsys, "try:\n    token_arrival_times(1)\nexcept NotImplementedError as err:\n"
                             "    print(type(err).__name__, isinstance(err, __builtins__.NotImplementedError))\n")
    assert out.strip() == "NotImplementedError True"
    out = run(shell, capsys, "def backend(x):\n    raise NotImplementedError('no such kernel on this backend')\n"
                             "backend(1)\n")  # one with a message: the usual traceback
    assert "Traceback" in out or "----> " in out
    assert "no such kernel on this backend" in out


def test_ipython_hides_the_course_frames_of_other_errors(shell, capsys):
    out = run(shell, capsys, 'with checking("Exercise A: broken"):\n    broken([1.0])\n')
    assert "AttributeError" in out and "broken" in out  # the student's frame is the help
    assert "checks.py" not in out and "__exit__" not in out


# --- the token-arrival staircase ---------------------------------------------------------------

def test_token_staircase_steps_up_one_token_at_each_arrival():
    from course.plotting import token_staircase

    fig, ax = plt.subplots()
    line = token_staircase(ax, np.array([0.4, 0.43, 0.46]), send_time_s=0.0, label="example")
    assert line.get_drawstyle() == "steps-post"  # flat until each arrival, then one step up
    assert list(line.get_xdata()) == [0.0, 0.4, 0.43, 0.46]  # the first step is TTFT wide
    assert list(line.get_ydata()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="token_times_s"):
        token_staircase(ax, [])
    plt.close(fig)


def test_a_librarys_not_implemented_error_is_not_an_unwritten_exercise():
    def torch_like(x):
        raise NotImplementedError("Could not run 'aten::foo' with arguments from the 'CPU' backend")

    with pytest.raises(NotImplementedError, match="aten::foo"):  # passes through, with its message
        with checking("Exercise D"):
            torch_like(1)


# --- the lessons' own checks: one notation in each cell ---------------------------------------

E_NOTATION, GROUPED = re.compile(r"\d(\.\d+)?e[+-]?\d"), re.compile(r"\d,\d{3}")


def what_a_cell_can_print(source: str) -> str:
    """The labels of a graded cell's visible checks and every number its lines can show: each
    expected value passing, and against a wrong float answer (8x, and 1 % off)."""
    import ast

    text = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        args = node.args
        if node.func.id in ("check_close", "check_equal", "checking") and args and isinstance(args[0], ast.Constant):
            text.append(str(args[0].value))
        expected = {}
        if node.func.id in ("check_close", "check_equal") and len(args) >= 3:
            with contextlib.suppress(Exception):
                expected[None] = eval(compile(ast.Expression(args[2]), "<check>", "eval"), {})  # literals only
        if node.func.id in ("check_roofline", "check_markers") and len(args) >= 2 and isinstance(args[1], ast.Dict):
            expected = ast.literal_eval(args[1])
        for at, want in expected.items():
            if at is not None:
                text.append(f"roofline at {at:g} FLOP/byte (FLOP/s)")
            if isinstance(want, (int, float)) and not isinstance(want, bool):
                text += [*format_pair(want, want), *format_pair(want, want * 8.0), *format_pair(want, want * 1.01)]
    return " ".join(text)


def test_each_lesson_cell_shows_its_numbers_in_one_notation():
    """No graded cell of a lesson mixes e-notation with grouped digits in what its checks print
    (labels that name 1,000 tokens, numbers that pass and numbers that fail)."""
    import nbformat

    from utils.lessons import REPO
    from utils.notebooks import BEGIN_HIDDEN, nbgrader_meta

    mixed, seen = [], 0
    for path in sorted((REPO / "release").glob("*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.cell_type != "code" or not nbgrader_meta(cell).get("grade"):
                continue
            text = what_a_cell_can_print(cell.source.partition(BEGIN_HIDDEN)[0])
            seen += bool(text)
            if E_NOTATION.search(text) and GROUPED.search(text):
                mixed.append(f"{path.parent.name} {nbgrader_meta(cell)['grade_id']}: {text[:200]}")
    assert seen > 20 and not mixed, mixed
