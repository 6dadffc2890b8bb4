"""The allowlist: what a kernel sees is what the Python environment needs, nothing of the machine; only
the course package of a checkout is bound, never a hidden folder nor a folder holding it, and
nothing of the grader's environment reaches a process inside."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from utils.lessons import REPO
from utils.sandbox.probe import unavailable
from sandbox_common import TAG, in_kernel


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")]


def test_only_the_course_package_of_a_checkout_named_by_the_environment_is_bound(tmp_path, monkeypatch):
    from utils.sandbox import interpreter

    checkout, other = tmp_path / "checkout", tmp_path / "libs"
    for folder in (checkout / "course", checkout / "source", checkout / "utils", other / "somelib"):
        folder.mkdir(parents=True)
    (checkout / "course" / "__init__.py").write_text("")
    (checkout / "nbgrader_config.py").write_text("")
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    (site_dir / "legacy-editable.pth").write_text(f"{checkout}\n{other}\nimport sys\n")
    (site_dir / "__editable___x_finder.py").write_text(
        f"import sys\nMAPPING: dict[str, str] = {{'course': {str(checkout / 'course')!r}, 'x': '/nowhere'}}\n")
    monkeypatch.setattr(interpreter, "_site_dirs", lambda: [str(site_dir)])

    assert interpreter.course_package_paths() == [str(checkout / "course")]
    bound = interpreter.python_paths(str(REPO))
    assert str(checkout / "course") in bound and str(other) in bound and str(site_dir) in bound
    assert str(checkout) not in bound   # the .pth line naming the checkout is not bound whole
    assert not [p for p in interpreter.python_paths(str(checkout)) if Path(checkout).is_relative_to(p)]


def test_a_hidden_folder_is_never_bound_nor_a_folder_that_holds_it(tmp_path, monkeypatch):
    """SandboxKernelManager.hidden (the course folder a local work folder was copied from, which
    the grader passes on nbgrader's command line): nothing bound for the kernel is it or holds it,
    even where the Python environment lies around it."""
    from traitlets.config import Config

    from utils.sandbox import interpreter
    from utils.sandbox.manager import SandboxKernelManager

    site_dir = tmp_path / "env" / "site-packages"
    course = site_dir / "a-course-folder"
    course.mkdir(parents=True)
    monkeypatch.setattr(interpreter, "_site_dirs", lambda: [str(site_dir)])
    assert str(site_dir) in interpreter.kernel_python()   # the control: the environment is bound
    assert not [p for p in interpreter.kernel_python(str(course)) if course.is_relative_to(p)]
    config = Config()
    config.SandboxKernelManager.hidden = [str(course)]
    assert SandboxKernelManager(config=config).hidden == [str(course)]


SECRET_PLACES = {   # a course's files where real servers keep them, and the one-server class's exchange
    "srv": Path(f"/srv/course-{TAG}"),
    "home": Path(f"/home/instructor-{TAG}/course"),
    "exchange": Path(f"/usr/local/share/nbgrader/exchange-{TAG}/prefill-decode/inbound/alice+01_tiny+1"),
    "var": Path(f"/var/lib/course-{TAG}"),
    "opt": Path(f"/opt/course-{TAG}"),
}


@pytest.fixture
def planted_courses(tmp_path):
    """Course files (source/, gradebook, .grading-cache, a submission) under /srv, /home, /var, /opt,
    the exchange, and a second path to the checkout (a symlink), removed afterwards."""
    import shutil

    made = []
    for place in SECRET_PLACES.values():
        made.append(next(a for a in reversed([place, *place.parents]) if not a.exists()))
        for rel in ("source/01_tiny/tiny.ipynb", "gradebook.db", ".grading-cache/x.json", "tiny.ipynb"):
            (place / rel).parent.mkdir(parents=True, exist_ok=True)
            (place / rel).write_text("SECRET")
    link = tmp_path / "another-path-to-the-checkout"
    link.symlink_to(REPO)
    yield {**{k: str(v) for k, v in SECRET_PLACES.items()}, "link": str(link)}
    for top in made:
        shutil.rmtree(top, ignore_errors=True)


ALLOWLIST_PROBE = """
import os
places = {places!r}
found = []
for name, base in places.items():
    for rel in ('source/01_tiny/tiny.ipynb', 'gradebook.db', '.grading-cache/x.json', 'tiny.ipynb', 'source'):
        if os.path.exists(os.path.join(base, rel)):
            found.append((name, rel))
for top in ('/home', '/srv', '/var', '/opt', '/mnt', '/media', '/root/.ssh', '/usr/local/share', '/etc/passwd',
            '/etc/shadow', {repo!r} + '/source', {repo!r} + '/utils', {repo!r} + '/gradebook.db',
            {repo!r} + '/.grading-cache', {repo!r} + '/nbgrader_config.py'):
    if os.path.exists(top):
        found.append(('visible', top))
walk = []
for root, dirs, files in os.walk('/', topdown=True):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/proc', '/sys', '/dev')]
    walk += [os.path.join(root, f) for f in files if f in ('gradebook.db', 'nbgrader_config.py') or f.endswith('.ipynb')]
print('FOUND', found)
import site, sys   # the packages' own example notebooks and the kernel's own submission are fine
own = (os.getcwd(), '/run/submission', sys.prefix, sys.base_prefix, *site.getsitepackages())
print('NOTEBOOKS', [w for w in walk if not w.startswith(own)])
print('TOP', sorted(os.listdir('/')))
"""


def test_the_kernel_sees_only_what_the_environment_needs(tmp_path, planted_courses):
    work = tmp_path / "work"
    work.mkdir()
    (work / "tiny.ipynb").write_text("{}")
    out, _ = in_kernel(work, ALLOWLIST_PROBE.format(places=planted_courses, repo=str(REPO)) +
                       "import course, numpy, torch, matplotlib\nprint('IMPORTS OK')")
    assert "FOUND []" in out and "NOTEBOOKS []" in out and "IMPORTS OK" in out and "ERROR" not in out, out
    top = set(eval(out.split("TOP ")[1].splitlines()[0]))   # a list literal the kernel printed
    assert not top & {"home", "srv", "var", "opt", "mnt", "media", "boot", "sys"}, top


def test_nothing_of_the_graders_environment_reaches_any_process_inside(tmp_path, monkeypatch):
    token, password = f"hubtoken-{TAG}", f"pw-{TAG}"
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", token)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://grader:{password}@127.0.0.1/gradebook")
    probe = f"""
import os
hits = []
for pid in os.listdir('/proc'):
    for name in ('environ', 'cmdline'):
        try:
            data = open(f'/proc/{{pid}}/{{name}}', 'rb').read()
        except OSError as err:
            continue
        if {token!r}.encode() in data or {password!r}.encode() in data:
            hits.append((pid, name))
print('HITS', hits, sorted(k for k in os.environ if 'TOKEN' in k or 'DATABASE' in k))
print('FDS', sorted(os.listdir('/proc/self/fd')))
"""
    out, _ = in_kernel(tmp_path, probe)
    assert "HITS [] []" in out, out
    for p in psutil.process_iter(["name", "environ"]):   # bwrap itself, seen from outside, started clean
        if p.info["name"] == "bwrap" and p.info["environ"]:
            assert token not in str(p.info["environ"]) and password not in str(p.info["environ"])


def test_the_mounts_are_one_ordered_list_with_a_reason_each(tmp_path):
    from utils.sandbox.interpreter import python_paths
    from utils.sandbox.mounts import mounts

    layout = mounts(str(tmp_path), str(tmp_path / "run"), python_paths(str(REPO)), 1 << 20)
    assert all(args and reason for args, reason in layout)
    shown = [args[-2] for args, _ in layout if args[0] == "--ro-bind"]
    assert not [s for s in shown if s in ("/", "/usr", "/home", "/srv", "/var", "/opt", "/usr/local", str(REPO))]
    assert str(REPO / "course") in shown


LEAN_PROBE = """
import importlib.util, os, sys
print('DEBUGGER', sorted(m for m in sys.modules if m.startswith(('debugpy', 'pydevd', '_pydevd'))))
print('HISTORY', get_ipython().history_manager.enabled, 'sqlite3' in sys.modules)
folder = list(importlib.util.find_spec('debugpy').submodule_search_locations)[0]
print('FOLDER', os.listdir(folder))
try:
    open(os.path.join(folder, 'server.py'), 'w')
except OSError as err:
    print('PLANT', err.strerror)
x = 41
print('INPUTS', In[-1].splitlines()[-1], _i.splitlines()[-1] if _i else None)
"""


def test_a_graded_kernel_starts_without_the_debugger_and_keeps_no_history_database(tmp_path, capfd):
    """debugpy, which ipykernel would import at every start, is an empty read-only folder inside;
    IPython keeps inputs in memory only (In and _i as usual). Control: the same probe in a kernel
    outside the sandbox finds the debugger loaded and the history database on."""
    from jupyter_client.manager import start_new_kernel

    out, _ = in_kernel(tmp_path, LEAN_PROBE)
    assert "DEBUGGER ['debugpy']" in out and "HISTORY False False" in out, out   # the empty folder's namespace package alone
    assert "FOLDER []" in out and "PLANT Read-only file system" in out, out
    assert "INPUTS print('INPUTS'" in out and "ERROR" not in out, out
    assert "Ctrl-C will not work" not in capfd.readouterr().err   # its parent is the sandbox's init

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        found = []
        kc.execute_interactive(LEAN_PROBE.split("folder =")[0], timeout=60,
                               output_hook=lambda m: found.append(m["content"].get("text", "")))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    control = "".join(found)
    assert "'pydevd'" in control and "HISTORY True True" in control, control


def test_an_unused_package_is_emptied_only_where_the_environment_shows_it(tmp_path):
    from utils.sandbox.interpreter import python_paths, unused_packages
    from utils.sandbox.mounts import mounts

    debugpy = unused_packages()
    assert debugpy and all(p.endswith("debugpy") for p in debugpy), debugpy
    elsewhere = tmp_path / "debugpy"
    elsewhere.mkdir()
    layout = mounts(str(tmp_path), str(tmp_path / "run"), python_paths(str(REPO)), 1 << 20, debugpy + (str(elsewhere),))
    emptied = [args[-1] for args, _ in layout if args[0] == "--tmpfs"]
    assert [p for p in emptied if p not in ("/tmp", "/dev/shm", str(tmp_path))] == list(debugpy)
    assert [args for args, _ in layout if args[0] == "--remount-ro"] == [["--remount-ro", p] for p in debugpy]


def test_the_trial_start_sees_the_debugger_emptied_as_a_kernel_does():
    """The trial start (probe.run_sandboxed) builds a kernel's mounts, the emptied folder included:
    where that mount failed, the trial would say so before anyone is graded."""
    from utils.sandbox.command import kernel_uid
    from utils.sandbox.interpreter import unused_packages
    from utils.sandbox.probe import run_sandboxed

    folder = unused_packages()[0]
    proc = run_sandboxed(f"import os; print(os.listdir({folder!r}))", kernel_uid())
    assert proc.returncode == 0 and proc.stdout.strip() == b"[]", proc
