# The course's commands. Each creates the environment (.venv) when it is missing.
#   make demo   build the release, grade three sample submissions end to end, print the scores
#   make test-fast  the fast layer: every test that starts no process and reaches no network (under a minute)
#   make lint   ruff over the code and tests (the first step of both test targets)
#   make test   the test suite (what CI runs), then its 20 slowest tests
#   make classroom INSTRUCTOR=NAME STUDENTS=FILE   as root on a bare Debian/Ubuntu server: a class
#               (utils/classroom/setup.sh; CLASSROOM_ARGS=... passes more options, e.g. --create-users)
# Both install the Debian packages they need where they can (root with apt-get): the demo only
# bubblewrap (the autograding sandbox), the tests everything in utils/system-packages.txt.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# JupyterLab refuses to start as root (containers often run as root) unless told it may.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: classroom env system-deps demo-deps demo lint test test-fast build check grade bench bench-grading gpu-check lab validate lab-instructor clean

# The class server's packages (requirements-classroom.txt) are also kept as files in $(WHEELS), where
# tests/classroom/test_hub_classroom.py has pip find them when it builds a class's environment as the setup
# does (pip install -r requirements-classroom.txt, no index): chosen for the Python that
# environment is made from (utils/classroom/setup.sh takes /usr/bin/python3 where there is one),
# whose patch release may be older than this one's (some packages' newest releases refuse it).
WHEELS := $(VENV)/wheels
CLASS_PYTHON := $(firstword $(wildcard /usr/bin/python3) $(PYTHON))
$(STAMP): requirements.txt requirements-pins.txt requirements-classroom.txt requirements-instructor.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# The wheels are fetched while the environment installs (on a fresh clone: 20 s beside 43 s,
	@# both mostly waiting on files), each pip run with its own log; either failing stops here.
	$(PY) -m pip download --quiet --disable-pip-version-check -d $(WHEELS) -r requirements-classroom.txt \
		--only-binary=:all: --python-version $$($(CLASS_PYTHON) -c 'import platform; print(platform.python_version())') \
		> $(VENV)/wheels.log 2>&1 & fetch=$$!; \
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt -e .; installed=$$?; \
	wait $$fetch || { cat $(VENV)/wheels.log >&2; echo "pip download of requirements-classroom.txt into $(WHEELS) failed" >&2; exit 1; }; \
	exit $$installed
	@# Byte-compiled here, on every core at once (pip compiles one file at a time): the sandboxed
	@# kernels cannot write __pycache__ into the environment. As with pip, a file this Python cannot
	@# compile (torch ships one written for 3.12) is left as it is.
	@$(PY) -m compileall -q -j0 $(VENV)/lib >/dev/null || true
	touch $(STAMP)

env: $(STAMP)

# A class on this server (no .venv: the class gets its own environment, /opt/prefill-decode/env).
INSTRUCTOR ?=
STUDENTS ?=
CLASSROOM_ARGS ?=
classroom:
	@test -n "$(INSTRUCTOR)" -a -n "$(STUDENTS)" || { echo "usage: make classroom INSTRUCTOR=NAME STUDENTS=FILE [CLASSROOM_ARGS=...]"; exit 2; }
	bash utils/classroom/setup.sh --instructor "$(INSTRUCTOR)" --students "$(STUDENTS)" $(CLASSROOM_ARGS)

demo: $(STAMP) demo-deps
	$(PY) -m utils.authoring.demo

system-deps:
	@bash utils/system_deps.sh

# The sandbox needs bubblewrap and libseccomp2 (its seccomp filter). Where bubblewrap cannot be installed or cannot run, the demo still grades its own samples and
# says, at the top and in its summary, that it did so without the sandbox.
demo-deps:
	@bash utils/system_deps.sh bubblewrap libseccomp2

# Errors that are bugs (pyflakes, bugbear, blind excepts, unused noqa: pyproject.toml's [tool.ruff]),
# in a second or two; the first step of make test and make test-fast.
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The fast layer: every test marked neither slow nor browser, in this one process. Such a test
# starts no kernel or other process and reaches no network (tests/conftest.py fails one that does),
# so it needs no Debian package either.
test-fast: $(STAMP) lint
	$(PY) -m pytest -m "not slow and not browser" -q -rs --durations=5

# Three test processes on 2 cores, each test file whole in one of them (TEST_PROCESSES=0: all in this
# one): pip installs, environment builds and waits for a lesson's shared grading leave a process idle,
# which a third fills (fresh clone, .ci/run: 12 min 50 s with two, 11 min 9 s with three);
# each lesson is still graded once per run (tests/grading_runs.py).
TEST_PROCESSES ?= 3
test: $(STAMP) lint system-deps
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder -rs --durations=20

build: $(STAMP)
	$(PY) -m utils.authoring.build

check: $(STAMP)
	$(PY) -m utils.authoring.check

grade: $(STAMP)
	$(PY) -m utils.grading

# The toy model's decode and prefill against bounds measured in the same run, afresh each time.
# BENCH_ARGS=--reuse reuses the CPU figures of an earlier run; BENCH_ARGS=--strict fails on a miss.
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m utils.bench.model $(BENCH_ARGS)

# Grading throughput: a scratch class (every lesson, 17 students by default) graded with 1 and 2
# workers; submissions per minute, per lesson. BENCH_GRADING_ARGS="--students 6 --workers 1 2 4".
BENCH_GRADING_ARGS ?=
bench-grading: $(STAMP)
	$(PY) -m utils.bench.grading $(BENCH_GRADING_ARGS)

# On a GPU machine: lesson 3 top to bottom with the reference answers, then the benchmark; writes a
# dated record (device, driver, CUDA, cuDNN, torch, every figure as it is measured) to
# docs/gpu-runs/. Exits 2 where there is no GPU. `make gpu-check PY=python3` runs it with a Python
# that already has a CUDA build of torch: no .venv, nothing installed (missing packages are named).
gpu-check: $(if $(filter command line,$(origin PY)),,$(STAMP))
	$(PY) -m utils.bench.gpu_check

# Students: their own environment (.venv-student: requirements.txt, torch's CPU build, no test,
# hub or cluster package; TORCH=gpu takes PyPI's default build instead) and their own copy of the
# lessons (lessons/, ignored by git: copied from release/ once, never overwritten), in a Lab
# without the instructor's nbgrader extensions (Formgrader, Create Assignment, Assignment List).
STUDENT_VENV := .venv-student
TORCH ?= cpu
STUDENT_REQ := $(if $(filter gpu,$(TORCH)),requirements-pins.txt,requirements.txt)
# torch's CPU index (requirements.txt's unless given, e.g. a mirror) is asked once, with a short
# timeout and no retry; where it does not answer, PyPI's torch is installed instead, and one line
# says so (utils/classroom/student-lab/install.py).
TORCH_INDEX ?=
# The Lab's own switches: nbgrader's instructor server extensions off on the command line; from
# utils/classroom/student-lab (a config directory added in front of the usual ones; nothing installed is
# removed), its lab plugins off (labconfig/page_config.json) and kernels on Unix sockets in a private
# folder (jupyter_config.py, nbgrader_config.py, jupyter_nbconvert_config.py: the class server copies
# the same files). The Validate button stays, and `make validate` runs the same check with the same files.
STUDENT_CONFIG := JUPYTER_CONFIG_PATH=$(CURDIR)/utils/classroom/student-lab
STUDENT_LAB_FLAGS := --ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=False \
	--ServerApp.jpserver_extensions=nbgrader.server_extensions.assignment_list=False \
	--ServerApp.jpserver_extensions=nbgrader.server_extensions.course_list=False
$(STUDENT_VENV)/.installed: requirements.txt requirements-pins.txt pyproject.toml
	@echo "Installing your environment in $(STUDENT_VENV) (first run only; JupyterLab, nbgrader, numpy, matplotlib, torch)"
	@test -x $(STUDENT_VENV)/bin/python || $(PYTHON) -m venv $(STUDENT_VENV)
	@$(STUDENT_VENV)/bin/python utils/classroom/student-lab/install.py $(STUDENT_REQ) $(if $(TORCH_INDEX),--index $(TORCH_INDEX))
	@touch $@

# Copied once, with the language_info of the student's own kernel written in (utils/grading/steps/language_info.py),
# so a lesson opens in the Lab unmodified.
lessons: | $(STUDENT_VENV)/.installed
	@cp -rn release lessons
	@$(STUDENT_VENV)/bin/python -m utils.grading.steps.language_info lessons
	@echo "lessons/ holds your own copy of the lessons: your answers go there (git ignores it; make lab never overwrites it)"

# The Lab opens on the first lesson (lessons/01_two_phases/two_phases.ipynb), the others beside it;
# the addresses it prints are that lesson's, the last one for a browser on another machine to copy.
FIRST_LESSON := $(patsubst release/%,%,$(firstword $(sort $(wildcard release/*/*.ipynb))))
lab: $(STUDENT_VENV)/.installed lessons
	@$(STUDENT_CONFIG) $(STUDENT_VENV)/bin/jupyter lab --notebook-dir=lessons $(STUDENT_LAB_FLAGS) --LabApp.default_url=/lab/tree/$(FIRST_LESSON) $(ALLOW_ROOT)

# What the Validate button does, from a terminal: make validate LESSON=01_two_phases
LESSON ?=
validate: $(STUDENT_VENV)/.installed lessons
	@test -n "$(LESSON)" -a -d "lessons/$(LESSON)" || { echo "usage: make validate LESSON=NAME, NAME one of:" $$(ls lessons); exit 2; }
	@# nbgrader validate exits 0 even where a test failed; this runs it and exits 1 then
	@$(STUDENT_CONFIG) $(STUDENT_VENV)/bin/python utils/classroom/student-lab/validate_lesson.py lessons/$(LESSON)/*.ipynb

# Instructors: the course directory, with the formgrader and Create Assignment toolbar.
lab-instructor: $(STAMP)
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT)

clean:
	rm -rf autograded/*/ feedback submitted gradebook.db grades.csv .pytest_cache
