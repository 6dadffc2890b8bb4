# The course's commands. Each creates the environment (.venv) when it is missing.
#   make demo   build the release, grade three sample submissions end to end, print the scores
#   make test   the test suite (what CI runs)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# JupyterLab refuses to start as root (containers often run as root) unless told it may.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: env system-deps demo test build check grade bench lab lab-instructor clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -e .
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(PY) -m utils.demo

system-deps:
	@bash utils/system_deps.sh

test: $(STAMP) system-deps
	$(PY) -m pytest -rs

build: $(STAMP)
	$(PY) -m utils.build

check: $(STAMP)
	$(PY) -m utils.check

grade: $(STAMP)
	$(PY) -m utils.grade

bench: $(STAMP)
	$(PY) -m utils.bench

# Students: the released lessons in JupyterLab.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=release $(ALLOW_ROOT)

# Instructors: the course directory, with the formgrader and Create Assignment toolbar.
lab-instructor: $(STAMP)
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT)

clean:
	rm -rf autograded/*/ feedback submitted gradebook.db grades.csv .pytest_cache
