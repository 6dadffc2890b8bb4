"""One set of pins: environment.yml must repeat requirements.txt exactly."""

from __future__ import annotations

import re

import pytest
import yaml

from utils.coursedir import REPO

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")
REQUIRED = {"jupyterlab", "nbgrader", "numpy", "matplotlib", "torch"}


def pins_from_requirements() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = PIN.match(line)
            assert m, f"requirements.txt: {line!r} is not pinned with =="
            pins[m.group(1).lower()] = m.group(2)
    return pins


def pins_from_environment() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pins = {}
    for entry in pip_section:
        m = PIN.match(entry.strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_required_packages_are_pinned():
    assert REQUIRED <= set(pins_from_requirements())


def test_environment_yml_matches_requirements():
    assert pins_from_environment() == pins_from_requirements()


def test_environment_yml_uses_python_311_and_installs_course():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip_section


def test_installed_versions_match_pins():
    from importlib.metadata import version

    for name, pinned in pins_from_requirements().items():
        installed = version(name).split("+")[0]  # torch reports 2.13.0+cpu
        assert installed == pinned, f"{name}: installed {installed}, pinned {pinned}"


INSTRUCTOR_ONLY = {"dask", "distributed"}


def pins_from(name: str) -> dict[str, str]:
    """Pins of a requirements file, its `-r` includes left out; every other line must be pinned."""
    pins = {}
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-r "):
            m = PIN.match(line)
            assert m, f"{name}: {line!r} is not pinned with =="
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_instructor_requirements_are_pinned_and_not_the_students():
    """Dask (grading on a cluster) is pinned for the instructor and the tests, never for students."""
    instructor = pins_from("requirements-instructor.txt")
    assert INSTRUCTOR_ONLY <= set(instructor)
    students = set(pins_from_requirements()) | set(pins_from_environment())
    assert not set(instructor) & students, set(instructor) & students
    env_text = (REPO / "environment.yml").read_text().lower()
    assert not any(name in env_text for name in INSTRUCTOR_ONLY)
    dev = [l.strip() for l in (REPO / "requirements-dev.txt").read_text().splitlines()]
    assert "-r requirements-instructor.txt" in dev


def test_installed_instructor_versions_match_pins():
    from importlib.metadata import PackageNotFoundError, version

    for name, pinned in pins_from("requirements-instructor.txt").items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            pytest.skip(f"{name} is not installed (pip install -r requirements-instructor.txt)")
        assert installed == pinned, f"{name}: installed {installed}, pinned {pinned}"
