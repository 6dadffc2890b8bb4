"""The grader's side of observations (course/observe.py emits them in the student's kernel).

Everything here runs outside the student's process and reads the kernel's outputs as untrusted
data: `collect` takes a graded cell's observations from its outputs, `judge` compares them with
the reference solution's under the reference's rules and returns a one-line verdict.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from typing import Any

from course.formatting import format_pair, ratio_note
from course.observe import MIME, RULES

MAX_PAYLOAD = 2_000_000   # characters of one observation the grader reads; larger ones are refused


@dataclass(frozen=True)
class Observation:
    label: str
    rule: str
    rel: float
    abs: float
    value: Any


def _as_observation(data: Any) -> Observation | None:
    """One output's payload as an Observation, or None when it is not a well-formed one."""
    if isinstance(data, str):
        if len(data) > MAX_PAYLOAD:
            return None
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):   # RecursionError: nested deeper than the parser goes
            return None
    try:
        data = json.loads(json.dumps(data))   # NotebookNode and friends to plain JSON
    except (TypeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("label"), str) or data.get("rule") not in RULES:
        return None
    try:
        rel, abs_tol = float(data.get("rel", 1e-6)), float(data.get("abs", 0.0))
    except (TypeError, ValueError, OverflowError):   # OverflowError: an integer beyond any float
        return None
    if not (math.isfinite(rel) and math.isfinite(abs_tol)) or rel < 0 or abs_tol < 0:
        return None
    return Observation(data["label"], data["rule"], rel, abs_tol, data.get("value"))


def collect(outputs: list) -> list[Observation]:
    """The observations among a cell's outputs, in order (malformed ones are left out)."""
    found = []
    for out in outputs or []:
        if out.get("output_type") != "display_data":
            continue
        data = out.get("data", {})
        if MIME in data:
            obs = _as_observation(data[MIME])
            if obs is not None:
                found.append(obs)
    return found


def unreadable(outputs: list) -> int:
    """How many observation payloads among a cell's outputs are not well-formed observations
    (malformed, over MAX_PAYLOAD, nested deeper than JSON parsing goes, numbers beyond range)."""
    count = 0
    for out in outputs or []:
        data = out.get("data", {}) if out.get("output_type") == "display_data" else {}
        if isinstance(data, dict) and MIME in data and _as_observation(data[MIME]) is None:
            count += 1
    return count


# -- comparing ---------------------------------------------------------------------------------

def _float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:   # an int beyond any float: no number the reference can match
            return None
    if isinstance(v, dict) and set(v) == {"float"} and v["float"] in ("nan", "inf", "-inf"):
        return float(v["float"])
    return None


def _close(ref: Any, got: Any, rel: float, abs_tol: float) -> bool:
    a, b = _float(ref), _float(got)
    if a is not None:
        if b is None:
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
    if isinstance(ref, list):
        return isinstance(got, list) and len(got) == len(ref) and all(
            _close(x, y, rel, abs_tol) for x, y in zip(ref, got))
    if isinstance(ref, dict):
        return isinstance(got, dict) and set(got) == set(ref) and all(
            _close(ref[k], got[k], rel, abs_tol) for k in ref)
    return _exact(ref, got)


def _exact(ref: Any, got: Any) -> bool:
    # bool is not int here: True must not pass for 1
    if isinstance(ref, bool) or isinstance(got, bool):
        return type(ref) is type(got) and ref == got
    if isinstance(ref, list):
        return isinstance(got, list) and len(ref) == len(got) and all(_exact(x, y) for x, y in zip(ref, got))
    if isinstance(ref, dict):
        return isinstance(got, dict) and set(ref) == set(got) and all(_exact(ref[k], got[k]) for k in ref)
    if isinstance(ref, (int, float)) and isinstance(got, (int, float)):
        return ref == got
    return type(ref) is type(got) and ref == got


def _choice(ref: Any, got: Any) -> bool:
    return isinstance(ref, str) and isinstance(got, str) and ref.strip().casefold() == got.strip().casefold()


def matches(ref: Observation, got: Observation) -> bool:
    """Does `got` match `ref` under the reference's rule (the student's rule is ignored)?"""
    if ref.rule == "close":
        return _close(ref.value, got.value, ref.rel, ref.abs)
    if ref.rule == "choice":
        return _choice(ref.value, got.value)
    return _exact(ref.value, got.value)


# -- verdicts ------------------------------------------------------------------------------------

def shown(value: Any, limit: int = 80) -> str:
    """A value as a student reads it in one line."""
    f = _float(value)
    if f is not None:
        return format_pair(f, f)[0]
    if isinstance(value, dict) and set(value) == {"type"}:
        return f"an object of type {value['type']}"
    if isinstance(value, dict) and set(value) == {"too_large"}:
        return f"{value['too_large']:,} values (too many to compare)"
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _difference(ref: Observation, got: Observation, visible: bool) -> str:
    if not visible:
        return f"hidden test '{ref.label}' does not match the reference solution"
    a, b = _float(ref.value), _float(got.value)
    if a is not None and b is not None:
        want, have = format_pair(a, b)
        return f"{ref.label}: expected {want}, returned {have}{ratio_note(a, b)}"
    return f"{ref.label}: expected {shown(ref.value)}, returned {shown(got.value)}"


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str   # one line


def judge(reference: list[Observation], observed: list[Observation], visible_labels: set[str]) -> Verdict:
    """Every reference observation present, in order, each matching; nothing missing or extra.

    visible_labels: labels whose expected value the student can already see (the visible checks):
    their message shows both values; a hidden test's shows only its label."""
    for i, ref in enumerate(reference):
        visible = ref.label in visible_labels
        if i >= len(observed):
            what = f"'{ref.label}'" if visible else f"hidden test '{ref.label}'"
            return Verdict(False, f"{what} was not reached: the cell stopped before it "
                                  f"({len(observed)} of {len(reference)} checks ran)")
        got = observed[i]
        if got.label != ref.label:
            return Verdict(False, f"check {i + 1} should be '{ref.label}' but the cell reported "
                                  f"'{got.label[:80]}': the test cell did not run as written")
        if not matches(ref, got):
            if ref.rule == "choice":   # never show the answer of a quiz question
                return Verdict(False, choice_message(ref, got))
            return Verdict(False, _difference(ref, got, visible))
    if len(observed) > len(reference):
        return Verdict(False, f"the cell reported {len(observed) - len(reference)} more check(s) than the "
                              f"reference solution: the test cell did not run as written")
    n_visible = sum(1 for r in reference if r.label in visible_labels)
    return Verdict(True, f"all {len(reference)} checks match the reference solution "
                         f"({n_visible} visible, {len(reference) - n_visible} hidden)")


def choice_message(ref: Observation, got: Observation) -> str:
    return f"{ref.label}: {shown(got.value)} is not the answer"


def visible_labels(source: str) -> set[str]:
    """String literals in the part of a test cell the student sees (outside the hidden tests)."""
    import ast

    kept, inside = [], False
    for line in source.splitlines():
        if "### BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "### END HIDDEN TESTS" in line:
            inside = False
        elif not inside:
            kept.append(line)
    try:
        tree = ast.parse("\n".join(kept))
    except SyntaxError:
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


# -- running a notebook and reading its observations (for the reference run and the tests) -------

def observations_by_cell(nb) -> dict[str, list[Observation]]:
    """grade_id -> observations, for every graded test cell of an executed notebook."""
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and meta.get("grade_id"):
            found[meta["grade_id"]] = collect(cell.get("outputs", []))
    return found


@contextlib.contextmanager
def as_autograding():
    """NBGRADER_EXECUTION=autograde for the kernels started inside (observe() then emits), as
    nbgrader's autograde sets it; the variable as it was afterwards."""
    import os

    before = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = before


def run_observed(path, cwd=None, timeout: int = 600):
    """Execute a notebook as autograding does (NBGRADER_EXECUTION=autograde), in a trusted kernel
    without the sandbox; returns the executed notebook. Errors in cells are kept as outputs; the
    kernel is killed after the last cell, as SafeExecute's is."""
    from pathlib import Path

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    with as_autograding():
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate",
                       resources={"metadata": {"path": str(cwd or Path(path).parent)}}).execute()
    return nb


def restore_locked_cells(nb, source_path):
    """`nb` as nbgrader's autograde runs it: every locked cell (given code, graded tests with their
    hidden part) restored from the source notebook, as OverwriteCells does. For tests that run a
    submission outside nbgrader."""
    import nbformat

    def meta(cell):
        return cell.get("metadata", {}).get("nbgrader", {})

    source = {meta(c)["grade_id"]: c.source for c in nbformat.read(str(source_path), as_version=4).cells
              if meta(c).get("locked") and not meta(c).get("solution") and meta(c).get("grade_id")}
    for cell in nb.cells:
        gid = meta(cell).get("grade_id")
        if gid in source:
            cell.source = source[gid]
    return nb


def compare_notebooks(reference_nb, submission_nb) -> dict[str, Verdict]:
    """grade_id -> Verdict of each graded cell of an executed submission against an executed reference."""
    ref = observations_by_cell(reference_nb)
    sources = {c.metadata.nbgrader.grade_id: c.source for c in reference_nb.cells
               if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}
    out = {}
    for cell in submission_nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid not in ref:
            continue
        if any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
            err = next(o for o in cell.outputs if o.get("output_type") == "error")
            out[gid] = Verdict(False, f"{err.get('ename', 'Error')}: {str(err.get('evalue', ''))[:200]}")
            continue
        out[gid] = judge(ref[gid], collect(cell.get("outputs", [])), visible_labels(sources.get(gid, "")))
    return out


def main(argv: list[str] | None = None) -> int:
    """python -m utils.grading.steps.observations REFERENCE.ipynb [SUBMISSION.ipynb]: the reference's
    observations per graded cell, or each graded cell's verdict for the submission."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    ref = run_observed(args[0])
    if len(args) == 1:
        for gid, obs in observations_by_cell(ref).items():
            print(f"{gid}: {len(obs)} observations")
            for o in obs:
                print(f"    {o.label!r} [{o.rule}] = {shown(o.value)}")
        return 0
    verdicts = compare_notebooks(ref, run_observed(args[1]))
    for gid, v in verdicts.items():
        print(f"{'PASS' if v.passed else 'FAIL'} {gid}: {v.message}")
    return 0 if all(v.passed for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
