"""The Slurm options without a Slurm (the fast layer; tests/grading/test_slurm_grading.py and
tests/classroom/test_hub_classroom.py run them on a real one): what `--slurm` becomes, the set-aside of a
grading killed with its worker's job, the class's `--slurm-*` options in the record, and the hub's
configuration they turn into batchspawner's SlurmSpawner."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest
from traitlets.config import Config

from utils.lessons import REPO


def test_the_slurm_options_become_a_spec_and_exclude_a_scheduler(capsys):
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (requirements-instructor.txt)")
    from utils.grading import cli
    from utils.grading.dask.slurm import SlurmSpec

    args = cli.parser().parse_args(["--slurm", "3", "--slurm-cores", "2", "--slurm-memory", "8GB", "--slurm-partition",
                                    "gpu", "--slurm-gres", "gpu:1", "--slurm-directive=--constraint=a100"])
    spec = SlurmSpec(**cli.slurm_spec(args))
    assert (spec.jobs, spec.cores, spec.memory, spec.partition, spec.gres) == (3, 2, "8GB", "gpu", "gpu:1")
    assert spec.directives() == ["--gres=gpu:1", "--constraint=a100"] and spec.problem() is None
    assert cli.slurm_spec(cli.parser().parse_args([])) is None
    assert cli.main(["--slurm", "2", "--scheduler", "tcp://h:8786"]) == 2
    assert "give --slurm or --scheduler, not both" in capsys.readouterr().err
    spec.memory = "lots"
    assert "--slurm-memory 'lots' is not an amount of memory" in spec.problem()


def _runner(monkeypatch, scripted: list, workers: set[str]):
    """A SlurmRunner whose DaskRunner.run yields the scripted WorkDone lists in turn, and whose
    scheduler lists `workers`."""
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (requirements-instructor.txt)")
    from types import SimpleNamespace

    from utils.grading.dask import cluster_runner, slurm

    calls = []

    def run(self, lesson, students):
        calls.append(list(students))
        yield from scripted.pop(0)

    monkeypatch.setattr(cluster_runner.DaskRunner, "run", run)
    monkeypatch.setattr(slurm, "LEAVE_WAIT", 1.0)
    client = SimpleNamespace(scheduler_info=lambda: {"workers": {w: {} for w in workers}}, status="running")
    runner = slurm.SlurmRunner("tls://127.0.0.1:1", lambda *a: None, client)
    runner.retried = []
    return runner, calls


def _done(student: str, *, rc: int = 0, address: str = "tls://10.0.0.1:1", graded: bool = False):
    from utils.grading.work import WorkDone

    done = WorkDone("00_x", [student], rc=rc, worker=f"w ({address})", address=address)
    if graded:
        done.results[student] = {"verdicts": {}, "notes": [], "score": 1.0, "max_score": 1.0, "reason": ""}
        done.notebooks[student] = {"x.ipynb": b"{}"}
    return done


def test_a_grading_killed_with_its_workers_job_is_set_aside_and_graded_again(monkeypatch):
    from types import SimpleNamespace

    lesson = SimpleNamespace(name="00_x")
    killed = _done("bo", rc=-15, address="tls://10.0.0.1:1")
    runner, calls = _runner(monkeypatch, [[_done("al", graded=True, address="tls://10.0.0.2:1"), killed],
                                          [_done("bo", graded=True, address="tls://10.0.0.2:1")]],
                            workers={"tls://10.0.0.2:1"})
    out = list(runner.run(lesson, ["al", "bo"]))
    assert calls == [["al", "bo"], ["bo"]]
    assert [d.students[0] for d in out] == ["al", "bo"] and all(d.graded(d.students[0]) for d in out)
    assert runner.retried == ["00_x/bo"]
    assert out[1].results["bo"]["notes"] == [
        "its grading on w (tls://10.0.0.1:1) was lost (its Slurm job ended); graded again on w (tls://10.0.0.2:1)"]


@pytest.mark.parametrize("rc, workers", [(-15, {"tls://10.0.0.1:1"}), (1, set())])
def test_a_failed_grading_whose_worker_stays_or_that_no_signal_ended_is_recorded(monkeypatch, rc, workers):
    """The controls: a grading killed by SIGTERM whose worker stays, and one that failed on its
    own (exit 1) with its worker gone, are what they are: recorded as failed, not graded again."""
    from types import SimpleNamespace

    failed = _done("bo", rc=rc, address="tls://10.0.0.1:1")
    runner, calls = _runner(monkeypatch, [[failed]], workers=workers)
    out = list(runner.run(SimpleNamespace(name="00_x"), ["bo"]))
    assert calls == [["bo"]] and out == [failed] and runner.retried == []


def _hub_config(tmp_path: Path, monkeypatch, **extra) -> Config:
    state = tmp_path / "hub"
    state.mkdir()
    (state / "proxy_token").write_text("t")
    record = {"instructor": "teach", "students": ["al"], "env": "/opt/c/env", "prefix": "/opt/c",
              "hub_state": str(state), **extra}
    (tmp_path / "classroom.json").write_text(json.dumps(record))
    monkeypatch.setenv("CLASSROOM_RECORD", str(tmp_path / "classroom.json"))
    c = Config()
    runpy.run_path(str(REPO / "utils" / "classroom" / "jupyterhub_config.py"), {"get_config": lambda: c})
    return c


def test_the_hub_spawns_slurm_jobs_where_the_record_says(tmp_path, monkeypatch):
    (tmp_path / "one").mkdir()
    (tmp_path / "slurm").mkdir()
    local = _hub_config(tmp_path / "one", monkeypatch)
    assert local.JupyterHub.spawner_class == "localprocess"
    c = _hub_config(tmp_path / "slurm", monkeypatch,
                    slurm={"partition": "gpu", "memory": "8G", "time": "02:00:00", "gres": "gpu:1"})
    assert c.JupyterHub.spawner_class == "batchspawner.SlurmSpawner"
    assert c.Spawner.cmd == ["/opt/c/env/bin/jupyterhub-singleuser"]   # batchspawner puts its wrapper before it
    assert c.BatchSpawnerBase.batchspawner_singleuser_cmd == "/opt/c/env/bin/batchspawner-singleuser"
    assert c.BatchSpawnerBase.exec_prefix.endswith("runuser -u {username} --")
    assert (c.BatchSpawnerBase.req_partition, c.BatchSpawnerBase.req_memory, c.BatchSpawnerBase.req_runtime,
            c.SlurmSpawner.req_gres) == ("gpu", "8G", "02:00:00", "gpu:1")
    assert "SLURM_CONF" in c.Spawner.env_keep
    # what the one-server class keeps: the hub and the proxy's API on loopback, the runtime folder
    assert c.JupyterHub.hub_bind_url.startswith("http://127.0.0.1:")
    assert c.Spawner.environment["PATH"].startswith("/opt/c/env/bin")


def test_the_class_options_record_the_slurm_jobs_and_the_shared_file_system(monkeypatch, tmp_path):
    from utils.classroom import server_admin as cli

    seen = {}
    monkeypatch.setattr(cli, "setup", lambda room, python, create, home_base=None: seen.update(
        room=room, home_base=home_base) or room)
    students = tmp_path / "students.txt"
    students.write_text("al\n")
    cli.setup_command(cli.parse_args(["setup", "--instructor", "teach", "--students", str(students),
                                      "--slurm-partition", "gpu", "--slurm-gres", "gpu:1",
                                      "--shared-dir", str(tmp_path / "shared")]))
    room = seen["room"]
    assert room.slurm == {"partition": "gpu", "memory": "4G", "time": "04:00:00", "gres": "gpu:1"}
    assert room.exchange == str(tmp_path / "shared" / "exchange") and seen["home_base"] == tmp_path / "shared" / "home"
    assert room.state()["slurm"]["partition"] == "gpu"
    cli.setup_command(cli.parse_args(["setup", "--instructor", "teach", "--students", str(students)]))
    assert seen["room"].slurm == {} and seen["home_base"] is None
    assert os.path.basename(seen["room"].exchange) == "exchange"


def test_the_hub_api_leaves_loopback_only_with_hub_address_and_then_only_over_tls(tmp_path, monkeypatch):
    pytest.importorskip("batchspawner", reason="batchspawner is not installed (requirements-classroom.txt)")
    from batchspawner import SlurmSpawner

    slurm = {"partition": "gpu", "memory": "8G", "time": "02:00:00", "gres": ""}
    for name in ("loopback", "cluster", "v6"):
        (tmp_path / name).mkdir()
    # without the address (the default): no TLS inside, the hub's API on loopback
    c = _hub_config(tmp_path / "loopback", monkeypatch, slurm=slurm)
    assert "internal_ssl" not in c.JupyterHub and c.JupyterHub.hub_bind_url.startswith("http://127.0.0.1:")
    assert c.JupyterHub.spawner_class == "batchspawner.SlurmSpawner" and "hub_connect_url" not in c.JupyterHub
    c = _hub_config(tmp_path / "cluster", monkeypatch, slurm=slurm, hub_address="10.1.2.3", hub_port=701,
                    proxy_api_port=702)
    assert c.JupyterHub.internal_ssl is True
    assert c.JupyterHub.internal_certs_location == str(tmp_path / "cluster" / "hub" / "internal-ssl")
    assert c.JupyterHub.hub_bind_url == c.JupyterHub.hub_connect_url == "https://10.1.2.3:701"
    assert c.JupyterHub.trusted_alt_names == ["IP:10.1.2.3"]
    assert c.ConfigurableHTTPProxy.api_url == "https://127.0.0.1:702"   # the proxy's API stays on loopback
    assert issubclass(c.JupyterHub.spawner_class, SlurmSpawner) and "NodeAddr" in c.BatchSpawnerBase.req_prologue
    assert callable(c.Spawner.ssl_alt_names)
    c = _hub_config(tmp_path / "v6", monkeypatch, slurm=slurm, hub_address="fd00::7")
    assert c.JupyterHub.hub_bind_url == "https://[fd00::7]:881" and c.JupyterHub.trusted_alt_names == ["IP:fd00::7"]
    # an address without Slurm: the one-server hub is untouched by it
    (tmp_path / "plain").mkdir()
    assert "internal_ssl" not in _hub_config(tmp_path / "plain", monkeypatch, hub_address="10.1.2.3").JupyterHub


def test_hub_address_is_one_address_off_loopback_and_needs_slurm():
    from utils.classroom.hub import check_hub_address
    from utils.classroom.room import Classroom, ToolError

    slurm = {"partition": "p", "memory": "4G", "time": "01:00:00", "gres": ""}
    for ok in ("", "10.77.0.1", "fd00::2", "login1.cluster.example.org"):
        check_hub_address(Classroom("t", ["a"], slurm=slurm, hub_address=ok))
    for bad, said in (("127.0.0.1", "not loopback"), ("::1", "not loopback"), ("0.0.0.0", "nor every address"),
                      ("localhost", "not loopback"), ("a b;rm", "an IP address or a host name"),
                      ("-x", "an IP address or a host name")):
        with pytest.raises(ToolError, match=said):
            check_hub_address(Classroom("t", ["a"], slurm=slurm, hub_address=bad))
    with pytest.raises(ToolError, match="with --slurm-partition"):
        check_hub_address(Classroom("t", ["a"], hub_address="10.77.0.1"))


def test_a_servers_certificates_go_to_its_users_runtime_folder_past_any_link(tmp_path, monkeypatch):
    """move_certs (the hub, as root, writing into a folder its user owns): the key, certificate and
    CA bundle copied in 0600, a link the user planted under the key's name replaced, not followed;
    the hub's copies of the key and certificate removed; a folder not the user's refused."""
    pytest.importorskip("batchspawner", reason="batchspawner is not installed (requirements-classroom.txt)")
    import asyncio
    import pwd
    from types import SimpleNamespace

    me = pwd.getpwuid(os.getuid())
    prefix = tmp_path / "prefix"
    run = prefix / "run" / str(me.pw_uid)
    run.mkdir(parents=True)
    run.chmod(0o700)
    (tmp_path / "c").mkdir()
    c = _hub_config(tmp_path / "c", monkeypatch, prefix=str(prefix), hub_address="10.1.2.3",
                    slurm={"partition": "p", "memory": "", "time": "", "gres": ""})
    store = tmp_path / "store"
    store.mkdir()
    paths = {}
    for kind, name in (("keyfile", "user-x.key"), ("certfile", "user-x.crt"), ("cafile", "notebooks-ca_trust.crt")):
        (store / name).write_text(f"{kind} data")
        paths[kind] = str(store / name)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not to be overwritten")
    (run / "jupyterhub-user-x.key").symlink_to(elsewhere)
    spawner = SimpleNamespace(user=SimpleNamespace(name=me.pw_name))
    moved = asyncio.run(c.JupyterHub.spawner_class.move_certs(spawner, paths))
    assert moved == {k: str(run / ("jupyterhub-" + Path(p).name)) for k, p in paths.items()}
    for kind, path in moved.items():
        p = Path(path)
        assert not p.is_symlink() and p.read_text() == f"{kind} data" and p.stat().st_mode & 0o777 == 0o600
    assert elsewhere.read_text() == "not to be overwritten"
    assert sorted(p.name for p in store.iterdir()) == ["notebooks-ca_trust.crt"]   # the hub keeps the CA alone
    if os.geteuid() == 0:   # a folder that is not the user's: nothing written into it
        os.chown(run, me.pw_uid + 4242, -1)
        with pytest.raises(RuntimeError, match="is not"):
            asyncio.run(c.JupyterHub.spawner_class.move_certs(spawner, dict(paths, keyfile=paths["cafile"])))
