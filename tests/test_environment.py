"""One set of pins (requirements-pins.txt): environment.yml repeats it exactly; the students'
requirements.txt adds only torch's CPU index; the class server's (requirements-classroom.txt), the
Dask cluster's (requirements-instructor.txt) and the tests' files take the pins without that index,
each on top of the one before. Which imports each must name: tests/test_requirements.py."""

from __future__ import annotations

import re

import pytest
import yaml

from utils.lessons import REPO

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")
REQUIRED = {"jupyterlab", "nbgrader", "numpy", "matplotlib", "torch"}


def pins_from_requirements() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements-pins.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = PIN.match(line)
            assert m, f"requirements-pins.txt: {line!r} is not pinned with =="
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
    assert "-r requirements-classroom.txt" in lines_of("requirements-instructor.txt")
    assert "-r requirements-pins.txt" in lines_of("requirements-classroom.txt")


def test_installed_instructor_versions_match_pins():
    from importlib.metadata import PackageNotFoundError, version

    for name, pinned in pins_from("requirements-instructor.txt").items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            pytest.skip(f"{name} is not installed (pip install -r requirements-instructor.txt)")
        assert installed == pinned, f"{name}: installed {installed}, pinned {pinned}"


CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
TEST_HUB_CLUSTER = {"pytest", "pytest-xdist", "playwright", "psycopg2-binary", "jupyterhub",
                    "dask", "distributed", "bokeh"}


def lines_of(name: str) -> list[str]:
    return [l.split("#")[0].strip() for l in (REPO / name).read_text().splitlines()
            if l.split("#")[0].strip()]


def test_students_requirements_take_torchs_cpu_build():
    """pip install -r requirements.txt: the pins, with torch from its CPU index (no CUDA libraries)."""
    assert lines_of("requirements.txt") == [CPU_INDEX, "-r requirements-pins.txt"]
    env_text = (REPO / "environment.yml").read_text()
    assert CPU_INDEX in env_text


def test_no_test_hub_or_cluster_package_for_students():
    students = set(pins_from_requirements()) | set(pins_from_environment())
    assert not students & TEST_HUB_CLUSTER, students & TEST_HUB_CLUSTER
    assert set(pins_from("requirements-dev.txt")) | set(pins_from("requirements-instructor.txt")) \
        | set(pins_from("requirements-classroom.txt")) >= TEST_HUB_CLUSTER
    # the class server's environment: the hub, no Dask (grading imports it only for a scheduler)
    assert "jupyterhub" in pins_from("requirements-classroom.txt")
    assert not set(pins_from("requirements-classroom.txt")) & INSTRUCTOR_ONLY


def test_instructor_and_test_installs_never_reach_torchs_index():
    """They include the pins, not requirements.txt: their install works where only PyPI answers."""
    for name in ("requirements-dev.txt", "requirements-instructor.txt", "requirements-classroom.txt"):
        lines = lines_of(name)
        assert {"-r requirements-pins.txt", "-r requirements-classroom.txt", "-r requirements-instructor.txt"} & set(lines), name
        assert "-r requirements.txt" not in lines, name
        assert not any(l.startswith(("--extra-index-url", "--index-url", "-i ")) for l in lines), name


def test_make_lab_uses_the_students_environment_and_a_copy_of_the_lessons():
    make = (REPO / "Makefile").read_text()
    assert "STUDENT_REQ := $(if $(filter gpu,$(TORCH)),requirements-pins.txt,requirements.txt)" in make
    assert "--notebook-dir=lessons" in make and "cp -rn release lessons" in make
    ignored = lines_of(".gitignore")
    assert "/lessons/" in ignored and ".venv-student/" in ignored


def test_students_lab_turns_off_the_instructors_plugins():
    import json

    page = json.loads((REPO / "utils/classroom/student-lab/labconfig/page_config.json").read_text())
    off = {k for k, v in page["disabledExtensions"].items() if v}
    assert {"@jupyter/nbgrader:menu", "@jupyter/nbgrader:create-assignment",
            "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:course-list"} <= off
    assert "@jupyter/nbgrader:validate-assignment" not in off
    make = (REPO / "Makefile").read_text()
    for ext in ("formgrader", "assignment_list", "course_list"):
        assert f"--ServerApp.jpserver_extensions=nbgrader.server_extensions.{ext}=False" in make
