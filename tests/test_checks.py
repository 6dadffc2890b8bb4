"""The visible checks speak in one line: course.checks, course.quiz and course.plotting.drawing.

Unit tests, plus IPython itself running cells the way a notebook does, to show what a student
sees: one line for a failed check, an unwritten exercise or an unanswered quiz; the student's own
frames, without the course's, for any other error.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from course.checks import (CheckFailed, check_close, check_equal, check_raises, checking,  # noqa: E402
                           format_pair, ratio_note)
from course.plotting import drawing  # noqa: E402
from course.quiz import QuizAnswerError, check_choice  # noqa: E402


def stub(x):
    raise NotImplementedError()


def one_line(err: CheckFailed) -> str:
    lines = err._render_traceback_()
    assert len(lines) == 1 and "\n" not in lines[0], lines
    return lines[0]


# --- numbers in one format, with their ratio ---------------------------------------------------

@pytest.mark.parametrize("expected, returned, shown", [
    (90177536, 9.0177536e7, ("90,177,536", "90,177,536")),  # int and float alike: both whole
    (327680, 2621440.0, ("327,680", "2,621,440")),
    (0.03, 0.029849, ("0.03", "0.029849")),
    (1.0, 1.0000001, ("1", "1.0000001")),  # as many digits as it takes to tell them apart
    (1.4e13, 7e12, ("1.4e+13", "7e+12")),
])
def test_both_numbers_in_one_format(expected, returned, shown):
    assert format_pair(expected, returned) == shown


@pytest.mark.parametrize("expected, returned, note", [
    (327680, 2621440, " (8x the expected)"),
    (2.0, 1.0, " (1/2 of the expected)"),
    (1e-3, 1.0, " (1,000x the expected)"),
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


def test_check_close_failure_is_one_line_with_the_ratio(capsys):
    with pytest.raises(CheckFailed) as caught:
        check_close("KV bytes per token", 2621440.0, 327680)
    assert one_line(caught.value) == ("CheckFailed: KV bytes per token: expected 327,680, "
                                      "returned 2,621,440 (8x the expected)")
    assert capsys.readouterr().out == ""  # the message is the exception, printed once


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
    assert one_line(caught.value) == ("CheckFailed: TPOT (s): expected 0.03, returned 0.02985 "
                                      "(0.995x the expected)")


def test_checking_says_which_function_is_not_written_yet():
    def e2e_model(x):
        return stub(x) + 1  # the unwritten function is the one called, not the one checked

    with pytest.raises(CheckFailed) as caught:
        with checking("Exercise B"):
            e2e_model(1)
    line = one_line(caught.value)
    assert line.startswith("CheckFailed: [Exercise B] `stub` is not written yet")
    assert "replace `raise NotImplementedError()`" in line


def test_checking_says_how_to_answer_a_quiz():
    with pytest.raises(CheckFailed) as caught:
        with checking("q2"):
            check_choice("q2", q2, "abcd")  # noqa: F821 - not answered yet
    assert one_line(caught.value).startswith('CheckFailed: q2 is not answered yet: write q2 = "a" '
                                             '(your letter, in quotes) in the answer cell above')


def test_checking_says_what_to_run_for_an_undefined_name():
    with pytest.raises(CheckFailed, match="`ttft_model` is not defined yet: run the cells above"):
        with checking("Exercise B"):
            ttft_model(1000, 2500)  # noqa: F821


def test_checking_lets_the_students_own_errors_through():
    def request_metrics(times):
        return times[0] / undefined_in_the_function  # noqa: F821

    with pytest.raises(NameError):  # a bug inside the function: the traceback is the help
        with checking("Exercise A"):
            request_metrics([1.0])
    with pytest.raises(ZeroDivisionError):
        with checking("Exercise A"):
            1 / 0


def test_checking_reports_a_missing_return_and_a_missing_key():
    with pytest.raises(CheckFailed, match="returned None: does it end with `return ...`"):
        with checking("Exercise A"):
            m = None  # what `m = f(); m["ttft_s"]` meets when f forgets to return
            m["ttft_s"]  # noqa: B018
    with pytest.raises(CheckFailed, match="has no key 'ttft_s'"):
        with checking("Exercise A"):
            {"ttft": 0.4}["ttft_s"]  # noqa: B018


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
    with pytest.raises(CheckFailed, match=r"\[the staircase\] `stub` is not written yet"):
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
    line = one_line(caught.value)
    assert said in line and 'for example q1 = "a" (one of a, b, c or d)' in line
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


def test_ipython_shows_a_failed_check_as_one_line(shell, capsys):
    out = run(shell, capsys, 'with checking("Exercise A: tpot"):\n'
                             '    check_close("TPOT (s)", tpot([0.4, 0.43, 0.46]), 0.03)\n')
    assert out.strip() == "CheckFailed: TPOT (s): expected 0.03, returned 0.02 (0.6667x the expected)"


def test_ipython_shows_an_unwritten_exercise_as_one_line(shell, capsys):
    out = run(shell, capsys, 'with checking("Exercise A: stub"):\n    stub(1)\n')
    assert len(out.strip().splitlines()) == 1 and "`stub` is not written yet" in out
    assert "Traceback" not in out


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
