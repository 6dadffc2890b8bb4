"""Lessons open unmodified in JupyterLab: each generated notebook carries the full language_info
its kernel reports (utils/grading/steps/language_info.py), which JupyterLab would otherwise write in on opening
and so mark the notebook unsaved. One kernel started (a few seconds)."""

from __future__ import annotations

import json
import shutil

import pytest

from utils.lessons import REPO
from utils.grading.steps.language_info import kernel_language_info, stamp


@pytest.fixture(scope="module")
def reported() -> dict:
    """language_info from a real python3 kernel's kernel_info reply."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        return kc.kernel_info(reply=True, timeout=60)["content"]["language_info"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_every_release_notebook_holds_what_the_kernel_reports(reported):
    assert kernel_language_info() == reported and set(reported) > {"name", "version", "mimetype"}
    notebooks = sorted((REPO / "release").glob("*/*.ipynb"))
    assert len(notebooks) >= 3
    for path in notebooks:
        info = json.loads(path.read_text())["metadata"]["language_info"]
        version = info.pop("version")
        assert version.split(".")[:2] == reported["version"].split(".")[:2], path  # the course's Python
        assert info == {k: v for k, v in reported.items() if k != "version"}, f"{path}: {info}"


@pytest.mark.slow
def test_the_students_copy_takes_their_own_kernels_version(tmp_path, reported):
    lesson = next((REPO / "release").glob("*/*.ipynb"))
    copy = tmp_path / "lessons" / lesson.parent.name / lesson.name
    copy.parent.mkdir(parents=True)
    shutil.copy(lesson, copy)
    other = dict(reported, version="3.11.99")  # a student's Python, another patch release
    assert stamp(tmp_path / "lessons", other) == [copy]
    assert json.loads(copy.read_text())["metadata"]["language_info"] == other
    before = copy.read_bytes()
    assert stamp(tmp_path / "lessons", other) == [] and copy.read_bytes() == before  # once only
    # nothing else of the notebook moved
    a, b = json.loads(lesson.read_text()), json.loads(before)
    a["metadata"].pop("language_info"), b["metadata"].pop("language_info")
    assert a == b


def test_a_release_built_on_another_patch_release_is_not_stale(tmp_path):
    from utils.authoring.check import _compare_release

    for name, version in (("fresh", "3.11.7"), ("committed", "3.11.9")):
        (tmp_path / name).mkdir()
        nb = json.loads(next((REPO / "release").glob("01_*/*.ipynb")).read_text())
        nb["metadata"]["language_info"]["version"] = version
        (tmp_path / name / "a.ipynb").write_text(json.dumps(nb))
    assert _compare_release("l", tmp_path / "fresh", tmp_path / "committed") == []
    (tmp_path / "committed" / "a.ipynb").write_text("{}")
    assert _compare_release("l", tmp_path / "fresh", tmp_path / "committed")


def test_make_lessons_step_says_nothing_a_student_could_read_as_a_failure(tmp_path, capsys):
    """`make lessons` runs main on the fresh copy: it writes the kernel's language_info in and prints
    nothing (it once printed `language_info of this kernel (3.11.7) in 0 notebook(s) under lessons`)."""
    from utils.grading.steps.language_info import main

    lesson = next((REPO / "release").glob("*/*.ipynb"))
    copy = tmp_path / lesson.parent.name / lesson.name
    copy.parent.mkdir()
    nb = json.loads(lesson.read_text())
    nb["metadata"]["language_info"] = {"name": "python"}
    copy.write_text(json.dumps(nb))
    assert main([str(tmp_path)]) == 0
    assert json.loads(copy.read_text())["metadata"]["language_info"] == kernel_language_info()
    assert main([str(tmp_path)]) == 0  # nothing left to change
    out, err = capsys.readouterr()
    assert out == "" and err == "", (out, err)
