"""A class whose every server is a Slurm job: the one command (`bash utils/classroom/setup.sh`, as
tests/classroom/test_hub_classroom.py runs it, with --slurm-partition), a real JupyterHub spawning each
user's server with batchspawner's SlurmSpawner on a real one-node Slurm (tests/slurm_common.py),
and the class's round trip through those servers: release, fetch, submit, collect, grade,
feedback, fetch feedback. The one-server test's helpers (users, hub, servers, the docs' commands)
are reused; its isolation checks are not repeated here, apart from the layout's (private homes,
the exchange's modes), which the Slurm option must leave as they are.

Lean: the tiny rehearsal lesson, two students, no terminal beyond the instructor's. Skips, saying
why, where either the hub test or a one-node Slurm cannot run."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from classroom import test_hub_classroom as one_server
from slurm_common import one_node_slurm, slurm_problem

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
SLURM_ARGS = ["--slurm-partition", "debug", "--slurm-memory", "600M", "--slurm-time", "00:30:00"]


class SlurmClass(one_server.Class):
    """The one-server test's class, set up with the Slurm options."""

    def as_root(self, args, what, env=None):
        if what.startswith("the one command"):
            args = [*args, *SLURM_ARGS]
        return super().as_root(args, what, env)


@pytest.fixture(scope="module")
def slurm():
    reason = one_server._skip_reason() or slurm_problem()
    if reason:
        pytest.skip(reason)
    try:
        import batchspawner  # noqa: F401
    except ImportError as err:
        pytest.skip(f"needs batchspawner (requirements-classroom.txt): {err}")
    # three servers at once on this machine's cores: the node offers more CPUs than it has
    with one_node_slurm(cpus=max(4, os.cpu_count() or 1)) as cluster:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SLURM_CONF", str(cluster.conf))   # the hub's environment, as a site sets it
            # the class's default origins (*.class.localhost), found as a browser finds them
            with one_server._LocalhostNames(one_server.LOCAL_ORIGINS):
                yield cluster


def _jobs_of(cluster) -> dict[str, tuple[str, str]]:
    """{user: (state, job name)} of every job Slurm lists."""
    out = cluster.command("squeue", "-h", "-o", "%u %T %j").stdout
    return {line.split()[0]: tuple(line.split()[1:3]) for line in out.splitlines() if len(line.split()) == 3}


def test_a_class_round_trip_with_every_server_a_slurm_job(slurm):
    timings: dict[str, float] = {}
    t_start = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="hub-slurm-", dir="/tmp"))
    base.chmod(0o755)
    room = SlurmClass(base)
    try:
        t0 = time.monotonic()
        first, again = room.build()
        timings["users, environment, the one command twice"] = time.monotonic() - t0
        if not one_server._can(room.instructor, "bwrap --unshare-all --ro-bind / / --proc /proc --dev /dev true"):
            pytest.skip("bubblewrap cannot start a sandbox as an unprivileged user here (user namespaces)")
        assert "each user's server is a Slurm job (partition debug, 600M, 00:30:00)" in first, first
        assert "changed this run: 0" in again, again
        record = (room.prefix / "classroom.json").read_text()
        assert '"partition": "debug"' in record, record
        one_server._check_layout(room)   # private homes, the exchange's modes: as on one server

        hub = room.hub = one_server.Hub(room)
        names = (room.instructor, room.alice, room.bob)
        t0 = time.monotonic()
        for name in names:
            hub.start_server(name)
        for name in names:
            hub.wait(lambda name=name: hub.ready(name), 300, f"{name}'s server")
        timings["three servers as Slurm jobs, all ready"] = time.monotonic() - t0
        # each server is a running job of its own user, as batchspawner names it
        jobs = _jobs_of(slurm)
        assert all(jobs.get(n) == ("RUNNING", "spawner-jupyterhub") for n in names), jobs
        teacher, alice, bob = (one_server.Server(hub, n) for n in names)
        found = alice.call("GET", "/api/status")
        assert found.status_code == 200, found.text
        seen = alice.call("POST", "/api/contents", json={"type": "file", "ext": ".txt"})
        assert seen.status_code == 201, seen.text

        t0 = time.monotonic()
        docs = room.docs
        cd = docs("instructor", "cd ")
        env_line = teacher.terminal("echo job=$SLURM_JOB_ID user=$(id -un)")[0]
        assert f"user={room.instructor}" in env_line and "job=" in env_line and "job=\r" not in env_line, env_line
        teacher.terminal(cd, docs("instructor", "term roster"), docs("instructor", "term release"))
        alice.nbgrader("fetch")
        r = alice.call("PUT", f"/api/contents/{one_server.LESSON}/{one_server.NB}",
                       json={"type": "notebook", "format": "json", "content": room.answered({})})
        assert r.status_code in (200, 201), r.text
        alice.nbgrader("submit")
        bob.nbgrader("fetch")
        r = bob.call("PUT", f"/api/contents/{one_server.LESSON}/{one_server.NB}",
                     json={"type": "notebook", "format": "json", "content": room.answered({"mul": one_server.ONLY_VISIBLE})})
        assert r.status_code in (200, 201), r.text
        bob.nbgrader("submit")
        collected = teacher.terminal(cd, docs("instructor", "term collect"))[1]
        assert f"2 submission(s) in submitted/: {room.alice}, {room.bob}" in collected, collected
        graded = teacher.terminal(cd, docs("instructor", "utils.grading 0"), timeout=400)[1]
        assert one_server._scores(graded.replace("\r", "")) == {room.alice: "6/6", room.bob: "3/6"}, graded
        teacher.terminal(cd, docs("instructor", "term feedback"))
        alice.nbgrader("fetch_feedback")
        bob.nbgrader("fetch_feedback")
        for who, score in ((room.alice, "Score: 6.0 / 6.0"), (room.bob, "Score: 3.0 / 6.0")):
            fb = sorted(room.home(who).glob(f"{one_server.LESSON}/feedback/*/tiny.html"))
            assert fb and score in fb[-1].read_text() and fb[-1].stat().st_uid == room.users.uid(who), who
        timings["round trip (release to fetched feedback)"] = time.monotonic() - t0
        # the servers stop with their jobs
        t0 = time.monotonic()
        for name in names:
            hub.api("DELETE", f"/users/{name}/server")
        hub.wait(lambda: not any(n in _jobs_of(slurm) for n in names), 120, "the servers' jobs to end")
        timings["three servers stopped, their jobs gone"] = time.monotonic() - t0
    finally:
        if room.hub is not None:
            room.hub.stop()
        problems = room.users.remove_all()
        room.profile.unlink(missing_ok=True)
        one_server._remove_env_later(room, base)
        shutil.rmtree(base, ignore_errors=True)
        timings["whole test"] = time.monotonic() - t_start
        print("timings (s):", {k: round(v, 1) for k, v in timings.items()},
              "load average:", Path("/proc/loadavg").read_text().split()[:3])
        assert not problems, problems
