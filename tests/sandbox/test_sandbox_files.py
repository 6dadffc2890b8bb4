"""What a sandboxed kernel sees of the course checkout (nothing, by any path, while the lesson's
imports work) and what it leaves in its work folder (nothing of it reaches the grader); kernels
started with `SandboxKernelManager` alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from utils.lessons import REPO
from utils.sandbox.probe import unavailable
from sandbox_common import in_kernel


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")]


def _listing(folder: Path) -> dict[str, tuple]:
    """{relative path: (kind, size, mtime)} of everything under `folder`, links not followed."""
    found = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        found[p.relative_to(folder).as_posix()] = (st.st_mode >> 12, st.st_size, st.st_mtime_ns)
    return found


def _git_state() -> list[str]:
    """The checkout's changed and ignored files, less what other tests write there while this one
    runs beside them in the other test process (the browser tests' screenshots in artifacts/,
    Python's __pycache__ folders)."""
    import subprocess

    lines = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=REPO, capture_output=True,
                           text=True).stdout.splitlines()
    return [line for line in lines if not line[3:].startswith("artifacts/") and "__pycache__/" not in line]


LESSON3 = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"


def test_the_checkout_is_unreadable_by_any_path_and_the_lesson_imports_work(tmp_path):
    course = tmp_path / "course"
    work = course / "autograded" / "student" / "03_timing_prefill_decode"
    work.mkdir(parents=True)
    (course / "source").mkdir()
    secrets_here = [course / "gradebook.db", course / "nbgrader_config.py", course / "source" / "lesson.ipynb"]
    for p in secrets_here:
        p.write_text("SECRET")
    targets = [str(p) for p in secrets_here] + [str(LESSON3), str(REPO / "nbgrader_config.py"),
                                               str(REPO / "gradebook.db"), str(REPO / "utils" / "grading" / "grade_course.py"),
                                               str(REPO / "utils")]
    names = ["source/03_timing_prefill_decode/timing_prefill_decode.ipynb", "nbgrader_config.py",
             "gradebook.db", "utils/grading/grade_course.py", "utils", "source/lesson.ipynb"]
    probe = f"""
import ast, glob, os, re, site, sys
targets, names = {targets!r}, {names!r}
bases = set()
def add(path):   # a folder and all its parents
    path = os.path.abspath(path)
    while path not in bases:
        bases.add(path)
        path = os.path.dirname(path)
for p in sys.path + [sys.prefix, sys.base_prefix, sys.exec_prefix, os.getcwd(), os.environ.get('HOME', '/')]:
    add(p or '.')
for sp in site.getsitepackages():
    for pth in glob.glob(os.path.join(sp, '*.pth')):
        for line in open(pth).read().splitlines():
            if line.strip() and not line.startswith('import'):
                add(os.path.join(sp, line.strip()))
    for finder in glob.glob(os.path.join(sp, '__editable__*finder.py')):
        for folder in re.findall(r"'(/[^']+)'", open(finder).read()):
            add(folder)
for cfg in glob.glob(os.path.join(sys.prefix, 'pyvenv.cfg')):
    for folder in re.findall(r'(/[^\\s]+)', open(cfg).read()):
        add(folder)
for line in open('/proc/self/mountinfo'):
    fields = line.split()
    add(fields[3]); add(fields[4])
procs = [p for p in os.listdir('/proc') if p.isdigit()] + ['self', 'thread-self']
own = {{os.stat(d).st_dev for d in ('/tmp', '.', '/dev/shm')}}
for pid in procs:
    for link in ('cwd', 'root'):
        bases.add(f'/proc/{{pid}}/{{link}}')
        for t in targets:
            bases.add(f'/proc/{{pid}}/{{link}}' + os.path.dirname(t))
    for fd in glob.glob(f'/proc/{{pid}}/fd/*') + glob.glob(f'/proc/{{pid}}/map_files/*'):
        try:
            if os.path.isdir(fd): add(fd)
            elif os.path.isfile(fd) and os.stat(fd).st_dev not in own:   # a file not on the kernel's tmpfs
                print('FD', fd, os.path.realpath(fd))
        except OSError:
            pass
readable = []
candidates = set(targets) | {{os.path.join(b, n) for b in bases for n in names}}
for path in sorted(candidates):
    try:
        if os.path.isdir(path):
            readable.append((path, os.listdir(path)))
        else:
            with open(path, 'rb') as f:
                readable.append((path, f.read(20)))
    except OSError:
        pass
print('BASES', len(bases))
print('READABLE', readable)
root = {str(REPO)!r}
print('UNDER THE CHECKOUT', sorted(os.listdir(root)) if os.path.isdir(root) else [])
import course, course.observe, torch, numpy, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.savefig('plot.png')
print('IMPORTS OK', course.__file__)
try:
    open(course.__file__, 'a')
except OSError as err:
    print('COURSE READ-ONLY', type(err).__name__)
"""
    out, facts = in_kernel(work, probe)
    assert "READABLE []" in out, out
    assert "IMPORTS OK" in out and "COURSE READ-ONLY" in out and "ERROR" not in out, out
    under = eval(out.split("UNDER THE CHECKOUT ")[1].splitlines()[0])   # a list literal the probe printed
    venv = Path(sys.prefix).resolve()
    allowed = {"course"} | ({venv.relative_to(REPO).parts[0]} if venv.is_relative_to(REPO) else set())
    assert set(under) <= allowed, under
    assert int(out.split("BASES ")[1].split()[0]) > 20   # the walk found the environment's paths
    assert "FD " not in out, out   # no file of the grader is open in the kernel


LITTER = f"""
import os, stat, sys
made = []
def attempt(what, fn):
    try:
        fn(); made.append(what)
    except OSError as err:
        print('refused', what, type(err).__name__)
attempt('link', lambda: os.symlink({str(REPO / 'nbgrader_config.py')!r}, 'tiny.ipynb.link'))
attempt('link over the notebook', lambda: (os.remove('tiny.ipynb'), os.symlink({str(LESSON3)!r}, 'tiny.ipynb')))
attempt('pipe', lambda: os.mkfifo('pipe'))
attempt('device', lambda: os.mknod('device', 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
attempt('sparse', lambda: os.truncate(open('sparse', 'wb').name, 2 * 2**30))
def fill(path):
    with open(path, 'wb') as f:
        for _ in range(4096):
            f.write(b'x' * 2**20)
attempt('huge', lambda: fill('huge'))
attempt('huge in /tmp', lambda: fill('/tmp/huge'))
attempt('huge in /dev/shm', lambda: fill('/dev/shm/huge'))
for path in ['/run/submission/planted', '/run/kernel/planted', os.path.expanduser('~/../../run/planted'),
             {str(REPO / 'planted')!r}, '/var/planted', '/home/planted', '/planted']:
    attempt('write ' + path, lambda: open(path, 'w').write('owned'))
print('MADE', sorted(made))
print('SEES', sorted(os.listdir('.')))
"""


def test_what_a_kernel_leaves_in_its_work_folder_never_reaches_the_grader(tmp_path):
    first, second = tmp_path / "autograded" / "a" / "01_tiny", tmp_path / "autograded" / "b" / "01_tiny"
    for folder in (first, second):
        folder.mkdir(parents=True)
        (folder / "tiny.ipynb").write_text("{}")
        (folder / "data.csv").write_text(f"{folder.parent.name},1\n")
    os.mkfifo(first / "their_pipe")
    (first / "their_link").symlink_to(REPO / "nbgrader_config.py")
    with open(first / "their_sparse", "wb") as f:
        f.truncate(2 * 2**30)
    (first / "their_big").write_bytes(b"y" * (2 * 2**20))
    before = {f: _listing(f) for f in (first, second)}
    git_before = _git_state()

    out, facts = in_kernel(first, "import os\nprint('COPIED', sorted(os.listdir('.')))\n" + LITTER,
                           work_size_mb=64, copy_limit_mb=1)
    copied = eval(out.split("COPIED ")[1].splitlines()[0])   # a list literal the kernel printed
    assert copied == ["data.csv", "tiny.ipynb"], out   # regular files under the size limit only
    made = eval(out.split("MADE ")[1].splitlines()[0])   # a list literal the kernel printed
    assert {"pipe", "link", "sparse"} <= set(made), out   # it did make them, inside
    # every write outside its own tmpfs was refused; a checkout under /tmp (CI clones there) lies in
    # the kernel's private /tmp tmpfs, where a write may succeed without reaching the grader's
    # file system (asserted below: REPO / "planted" does not exist)
    private = {"write " + str(REPO / "planted")} if str(REPO).startswith("/tmp/") else set()
    assert not [m for m in made if m.startswith("write ") and m not in private], out
    assert "refused huge OSError" in out and "refused huge in /tmp OSError" in out, out   # the tmpfs is full
    assert facts["alive"], out
    assert _listing(first) == before[first] and _listing(second) == before[second]
    assert not Path(facts["rundir"]).exists()
    assert _git_state() == git_before
    assert not (REPO / "planted").exists()

    # the next student, graded after it, sees only their own files
    out, _ = in_kernel(second, "import os\nprint('SEES', sorted(os.listdir('.')), open('data.csv').read())")
    assert "SEES ['data.csv', 'tiny.ipynb'] b,1" in out, out
