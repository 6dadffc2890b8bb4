"""Load a lesson's sample answers (utils/authoring/samples/<lesson>.py) and turn them into submissions."""

from __future__ import annotations

import importlib
from pathlib import Path

import nbformat

from utils.lessons import REPO, source_notebook
from utils.notebooks import submission_from


def load_samples(lesson: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(MISTAKES, VARIANTS) of a lesson; empty when it has no samples file."""
    if not (REPO / "utils" / "authoring" / "samples" / f"{lesson}.py").exists():
        return {}, {}
    module = importlib.import_module(f"utils.authoring.samples.{lesson}")
    return dict(getattr(module, "MISTAKES", {})), dict(getattr(module, "VARIANTS", {}))


def sample_submission(root: Path, lesson: str, overrides: dict[str, str]):
    """The release notebook with the reference solution in every cell except `overrides`."""
    src = source_notebook(root, lesson)
    release = Path(root) / "release" / lesson / src.name
    reference_nb = nbformat.read(str(src), as_version=4)
    release_nb = nbformat.read(str(release), as_version=4)
    return submission_from(release_nb, reference_nb, overrides)
