"""The class server's set-up (utils/classroom/), its checks that need no users (and no root, but for the kernel spec's owner): the
class list, names, who can run what.
The whole setup runs in tests/classroom/test_hub_classroom.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from utils.classroom import course_folder, disk, environment, hub, kernels
from utils.classroom import room as rooms
from utils.errors import ToolError


def test_students_file_plain_or_roster_csv(tmp_path):
    plain = tmp_path / "students.txt"
    plain.write_text("# the class\nalice\n\nbob\nalice\n")
    assert rooms.read_students(plain) == ["alice", "bob"]
    roster = tmp_path / "students.csv"
    roster.write_text("id,first_name,last_name,email\nalice,Alice,A,a@example.org\nbob_2,Bob,B,\n")
    assert rooms.read_students(roster) == ["alice", "bob_2"]


@pytest.mark.parametrize("name", ["Alice", "al+ice", "../x", "1abc", "a b"])
def test_unusable_names_are_named(tmp_path, name):
    f = tmp_path / "students.txt"
    f.write_text(f"alice\n{name}\n")
    with pytest.raises(ToolError, match="not a usable user name") as err:
        rooms.read_students(f)
    assert repr(name) in str(err.value)


def test_runnable_by_everyone_names_the_closed_folder():
    base = Path(tempfile.mkdtemp(prefix="classroom-test-"))   # pytest's own tmp_path is private
    try:
        base.chmod(0o755)
        top = base
        while top != top.parent:
            if not os.stat(top).st_mode & 0o001:
                pytest.skip(f"{top} is closed to other users already")
            top = top.parent
        folder = base / "private" / "bin"
        folder.mkdir(parents=True)
        exe = folder / "python"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        (base / "private").chmod(0o755)
        assert environment.runnable_by_everyone(exe) is None
        (base / "private").chmod(0o700)
        assert environment.runnable_by_everyone(exe) == str(base / "private")
        (base / "private").chmod(0o755)
        exe.chmod(0o700)
        assert environment.runnable_by_everyone(exe) == str(exe)
    finally:
        shutil.rmtree(base)


def test_setup_refuses_without_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ToolError, match="as root"):
        rooms.require_root()


def test_pins_come_from_the_requirements():
    pins = environment.pinned_requirements()
    assert any(p.startswith("nbgrader==") for p in pins) and any(p.startswith("jupyterhub==") for p in pins)


def _tree(folder: Path) -> set[str]:
    """The checkout's files, less what other tests write there while this one runs beside them in
    the other test process (the browser tests' screenshots in artifacts/)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if ".git" not in p.parts and ".venv" not in p.parts and "__pycache__" not in p.parts
            and ".pytest_cache" not in p.parts and p.relative_to(folder).parts[0] != "artifacts"}


@pytest.mark.slow
def test_the_course_package_is_installed_as_a_copy_without_touching_the_checkout(tmp_path):
    """The class's environment holds its own copy of `course` (the checkout may be private,
    moved or deleted afterwards), and building it writes nothing (build/, *.egg-info) here."""
    import subprocess
    import sys
    # the project's own environment: an editable install, which points back here
    assert "outside the environment" in environment.course_copy_state(Path(sys.executable))
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    assert environment.course_copy_state(python) == "not installed"
    before = _tree(rooms.REPO)
    environment.install_course(python)
    assert _tree(rooms.REPO) == before
    assert environment.course_copy_state(python) is None
    installed = Path(subprocess.run([str(python), "-I", "-c", "import importlib.util as u; print(u.find_spec('course').origin)"],
                                    cwd="/", capture_output=True, text=True, check=True).stdout.strip())
    assert installed.is_relative_to(env) and installed.name == "__init__.py"
    # a change in the checkout's package is seen as a stale copy
    (installed.parent / "__init__.py").write_text(installed.read_text() + "\n# changed\n")
    assert "differs" in environment.course_copy_state(python)


@pytest.mark.slow
def test_the_setup_starts_with_the_standard_library_alone(tmp_path):
    """On a bare server the set-up runs in an empty environment, before nbformat is there."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['nbformat'] = None; import utils.classroom.server_admin, utils.classroom.room as c; "
            "print(c.ToolError.__name__, c.REPO)")
    res = subprocess.run([sys.executable, "-c", code], cwd=rooms.REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["ToolError", str(rooms.REPO)]


def _room(**kw) -> rooms.Classroom:
    return rooms.Classroom("teacher", ["alice"], prefix="/nonexistent", **kw)


def test_the_hub_stays_on_loopback_unless_served_over_tls(tmp_path):
    hub.check_bind(_room())                                   # the default: loopback
    hub.check_bind(_room(bind_url="http://127.0.0.1:9000"))
    hub.check_bind(_room(bind_url="http://localhost:9000", behind_proxy=True))
    with pytest.raises(ToolError, match="plain HTTP"):               # the control: a public address refused
        hub.check_bind(_room(bind_url="http://0.0.0.0:8000"))
    with pytest.raises(ToolError, match="plain HTTP"):
        hub.check_bind(_room(bind_url="http://203.0.113.7:443"))
    with pytest.raises(ToolError, match="keeps the hub on loopback"):
        hub.check_bind(_room(bind_url="http://0.0.0.0:8000", behind_proxy=True))
    with pytest.raises(ToolError, match="both"):
        hub.check_bind(_room(bind_url="http://0.0.0.0:8000", ssl_cert=str(tmp_path / "c")))
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("cert")
    key.write_text("key")
    room = _room(bind_url="http://0.0.0.0:443", ssl_cert=str(cert), ssl_key=str(key))
    hub.check_bind(room)
    assert room.bind_url == "https://0.0.0.0:443"


def test_the_private_submit_closes_what_nbgrader_opens(tmp_path):
    """nbgrader's submit leaves the folder 0777; PrivateSubmit's last step closes it (0750: the
    owner and the course's group alone enter it) and leaves what is inside readable through it."""
    from utils.classroom.exchange import make_private
    sub = tmp_path / "alice+01_tiny+ts+rnd"
    (sub / "sub").mkdir(parents=True)
    (sub / "tiny.ipynb").write_text("{}")
    (sub / "sub" / "data.txt").write_text("x")
    (sub / "link").symlink_to("/etc/hostname")
    os.chmod(sub, 0o777)
    os.chmod(sub / "tiny.ipynb", 0o600)
    os.chmod(sub / "sub", 0o700)
    make_private(str(sub))
    assert stat_mode(sub) == 0o750 and stat_mode(sub / "sub") == 0o755
    assert stat_mode(sub / "tiny.ipynb") == 0o644 and stat_mode(sub / "sub" / "data.txt") == 0o644
    assert (sub / "link").is_symlink()


def stat_mode(path: Path) -> int:
    return path.lstat().st_mode & 0o7777


def test_the_mount_of_a_path():
    point, fstype, opts = disk.mount_of(Path("/proc/self"))
    assert point == "/proc" and fstype == "proc" and opts
    assert disk.mount_of(Path("/"))[0] == "/"


@pytest.mark.slow
def test_the_one_command_without_a_class_installs_nothing():
    """`bash utils/classroom/setup.sh` without --instructor stops before installing anything;
    --help prints the usage (the script's and the setup's options)."""
    import subprocess
    script = str(rooms.REPO / "utils" / "classroom" / "setup.sh")
    res = subprocess.run(["bash", script, "--prefix", "/nonexistent/prefix"], capture_output=True, text=True)
    assert res.returncode == 2 and "usage:" in res.stderr
    assert not Path("/nonexistent/prefix").exists()
    res = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, cwd="/")
    assert res.returncode == 0 and "--instructor" in res.stdout and "--behind-proxy" in res.stdout, res.stderr


def test_the_hubs_ports_are_ones_only_root_may_take(monkeypatch):
    """The public port, the hub's own and the proxy's API below the first unprivileged port, and
    distinct; the control: an unprivileged port (the hub's usual 8000, 8081, 8001) is refused."""
    hub.check_ports(_room())
    hub.check_ports(_room(bind_url="https://0.0.0.0:443", hub_port=700, proxy_api_port=701))
    for kw in ({"bind_url": "http://127.0.0.1:8000"}, {"hub_port": 8081}, {"proxy_api_port": 8001}):
        with pytest.raises(ToolError, match="any user may listen on"):
            hub.check_ports(_room(**kw))
    with pytest.raises(ToolError, match="must differ"):
        hub.check_ports(_room(hub_port=880))
    # where the system lets everyone take low ports (a container's default), the setup says so
    monkeypatch.setattr(hub, "unprivileged_port_start", lambda: 0)
    with pytest.raises(ToolError, match="ip_unprivileged_port_start=1024"):
        hub.check_ports(_room())


def test_the_checkout_is_closed_to_other_users(tmp_path):
    checkout = tmp_path / "clone"
    checkout.mkdir(mode=0o755)
    checkout.chmod(0o755)
    room = _room()
    course_folder.close_checkout(room, checkout)
    assert stat_mode(checkout) == 0o700 and "hidden tests" in room.actions[0]
    course_folder.close_checkout(room, checkout)   # the control: a closed one is left as it is
    assert len(room.actions) == 1


def test_kernels_use_unix_sockets_in_the_users_runtime_folder(tmp_path, monkeypatch):
    """The configuration the setup copies into the environment (and `make lab` reads): the ipc
    transport, and for nbgrader validate (no connection file of its own) sockets at an absolute
    path in the runtime folder. Where that folder's path is too long for a Unix socket, TCP."""
    import tempfile
    from jupyter_client import KernelManager
    from traitlets.config.loader import PyFileConfigLoader
    short = Path(tempfile.mkdtemp(prefix="kr", dir="/tmp"))
    try:
        for run, transport in ((short / "run", "ipc"), (tmp_path / ("x" * 60) / "run", "tcp")):
            monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(run))
            for name, text in kernels.KERNEL_CONFIG.items():
                (tmp_path / name).write_text(text)
                cfg = PyFileConfigLoader(name, path=str(tmp_path)).load_config()
                km = KernelManager(config=cfg)
                assert km.transport == transport, (name, run)
                if name != "jupyter_config.py" and transport == "ipc":
                    assert km.ip.startswith(str(run) + os.sep), km.ip
                    assert stat_mode(run) == 0o700
        assert KernelManager().transport == "tcp"   # jupyter_client's own default
    finally:
        shutil.rmtree(short)


def test_an_origin_per_user_needs_https():
    hub.check_bind(_room(subdomain_host="https://class.example.org"))
    hub.check_bind(_room(subdomain_host="http://localhost:880"))   # a browser on this server
    with pytest.raises(ToolError, match="use https"):                      # the control
        hub.check_bind(_room(subdomain_host="http://class.example.org"))
    with pytest.raises(ToolError, match="such as"):
        hub.check_bind(_room(subdomain_host="class.example.org/path"))


def test_a_class_on_loopback_gets_an_origin_per_user_by_default(tmp_path):
    """setup's default (the hub on loopback): each user's server on NAME.class.localhost, an origin
    of its own that needs no DNS; --one-origin, TLS or a reverse proxy (names that need wildcard
    DNS) leave one origin unless --subdomain-host is given."""
    from utils.classroom.server_admin import parse_args, setup_command
    import utils.classroom.server_admin as cli
    made = []
    students = tmp_path / "students.txt"
    students.write_text("sam\n")
    cli_setup = cli.setup
    cli.setup = lambda room, python, create, homes=None: made.append(room) or room
    try:
        for extra in ([], ["--address", "127.0.0.1:443"], ["--one-origin"], ["--behind-proxy"]):
            setup_command(parse_args(["setup", "--instructor", "ines", "--students", str(students), *extra]))
    finally:
        cli.setup = cli_setup
    assert [r.subdomain_host for r in made] == ["http://class.localhost:880", "http://class.localhost:443", "", ""]
    for r in made[:2]:
        hub.check_bind(r)



@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the kernel spec is made root's (chown)")
def test_the_kernel_spec_turns_the_debugger_off_without_writing_through_a_link(tmp_path):
    spec = tmp_path / "env" / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    spec.parent.mkdir(parents=True)
    shared = tmp_path / "other-env-kernel.json"   # the file another environment holds, hard-linked
    shared.write_text('{"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], '
                      '"display_name": "Python 3 (ipykernel)", "language": "python", '
                      '"metadata": {"debugger": true, "supported_encryption": ["curve"]}}')
    os.link(shared, spec)
    room = rooms.Classroom("teacher", ["alice"], prefix=str(tmp_path), env=str(tmp_path / "env"))
    kernels.kernel_spec(room)
    import json
    got = json.loads(spec.read_text())
    assert got["metadata"] == {"debugger": False, "supported_encryption": ["curve"]}, got
    assert got["argv"][-1] == "{connection_file}" and (spec.stat().st_mode & 0o7777) == 0o644
    assert json.loads(shared.read_text())["metadata"]["debugger"] is True   # the other environment's untouched
    done = len(room.actions)
    kernels.kernel_spec(room)
    assert len(room.actions) == done   # a second run changes nothing
