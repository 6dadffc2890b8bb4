"""The calls a kernel never needs are refused inside the sandbox (utils/sandbox/seccomp.py): each
refused call is tried by one probe started under the kernel's own bwrap command line (bwrap, the
mounts, the launcher, this Python), with the filter and, as the control, without it; the same
command line of a grader that is not root (a user namespace) makes no nested user namespace
(`--disable-userns`); and a lesson's work (torch's threads, numpy, matplotlib) still runs in a
sandboxed kernel under the filter."""

from __future__ import annotations

import json
import os

import pytest

from utils.sandbox.command import has_option, kernel_uid
from utils.sandbox.probe import run_sandboxed, unavailable
from utils.sandbox.seccomp import AUDIT_ARCH, program
from sandbox_common import in_kernel

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}"),
              pytest.mark.skipif(program() is None, reason=f"no seccomp filter is written for {os.uname().machine}")]

# each call with arguments the host kernel answers with an error of its own (never EPERM from a root
# grader's kernel uid, but for pivot_root and bpf): nothing is created, mounted or traced
PROBE = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {"unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
      "pivot_root": (155, 41), "ptrace": (101, 117), "keyctl": (250, 219), "add_key": (248, 217),
      "request_key": (249, 218), "bpf": (321, 280), "perf_event_open": (298, 241), "clone": (56, 220),
      "clone3": (435, 435), "ioctl": (16, 29)}
COLUMN = 0 if os.uname().machine == "x86_64" else 1
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name][COLUMN]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
null = os.open("/dev/null", os.O_RDONLY)
c = ctypes.c_char(b"x")
CLONE_FS, NEWNS, NEWUSER = 0x200, 0x20000, 0x10000000
got = {
    "unshare": call("unshare", NEWUSER | 0x1),
    "clone_newuser": call("clone", NEWUSER | CLONE_FS, 0, 0, 0, 0),
    "clone_newns": call("clone", NEWNS | CLONE_FS, 0, 0, 0, 0),
    "clone3": call("clone3", 0, 0),
    "setns": call("setns", -1, NEWUSER),
    "mount": call("mount", b"none", b"/nonexistent-mount-target", b"tmpfs", 0, 0),
    "umount2": call("umount2", b"/nonexistent-mount-target", 0),
    "pivot_root": call("pivot_root", b"/nonexistent-a", b"/nonexistent-b"),
    "ptrace": call("ptrace", 2, 999999999, 0, 0),
    "keyctl": call("keyctl", 9999, 0, 0, 0, 0),
    "add_key": call("add_key", 0, 0, 0, 0, 0),
    "request_key": call("request_key", 0, 0, 0, 0),
    "bpf": call("bpf", 9999, 0, 0),
    "perf_event_open": call("perf_event_open", 0, 0, -1, -1, 0),
    "ioctl_tiocsti": call("ioctl", null, 0x5412, ctypes.byref(c)),
    "ioctl_tioclinux": call("ioctl", null, 0x541C, ctypes.byref(c)),
    "ioctl_fionread": call("ioctl", null, 0x541B, ctypes.byref(ctypes.c_int())),   # allowed
    "user_namespace": call("unshare", NEWUSER),   # the attack itself, last: it changes this process
}
print("PROBE " + json.dumps({k: errno.errorcode.get(v, "OK") for k, v in got.items()}))
"""
REFUSED = {"unshare": "EPERM", "clone_newuser": "EPERM", "clone_newns": "EPERM", "clone3": "ENOSYS",
           "setns": "EPERM", "mount": "EPERM", "umount2": "EPERM", "pivot_root": "EPERM", "ptrace": "EPERM",
           "keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM", "bpf": "EPERM",
           "perf_event_open": "EPERM", "ioctl_tiocsti": "EPERM", "ioctl_tioclinux": "EPERM", "user_namespace": "EPERM"}
# refused to an unprivileged process by the host kernel too (pivot_root before it reads its paths,
# bpf where kernel.unprivileged_bpf_disabled is set): the control cannot tell the filter's answer apart
ALSO_REFUSED_UNPRIVILEGED = {"pivot_root", "bpf"}


def under_bwrap(uid: int, seccomp: bool, disable_userns: bool = True) -> dict[str, str]:
    """PROBE's answers, started by the kernel's own command line (utils.sandbox.probe.run_sandboxed,
    which trial_start uses too) for a kernel of `uid` (-1: a user namespace, as for a grader that is
    not root)."""
    proc = run_sandboxed(PROBE, uid, seccomp=seccomp, disable_userns=disable_userns, name=".probe")
    stdout, stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert "PROBE " in stdout, stdout + stderr
    return json.loads(stdout.split("PROBE ", 1)[1].splitlines()[0])


@pytest.fixture(scope="module")
def answers() -> dict[str, dict[str, str]]:
    """The kernel's command line as this grader builds it (its uid: a kernel uid of its own when
    grading as root), with the filter and without it: two processes."""
    uid = kernel_uid()
    return {"filtered": under_bwrap(uid, True), "control": under_bwrap(uid, False)}


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_each_call_a_kernel_never_needs_is_refused_by_the_filter(answers, call):
    assert answers["filtered"][call] == REFUSED[call], answers
    if call not in ALSO_REFUSED_UNPRIVILEGED:   # the control: without the filter the host kernel answers
        assert answers["control"][call] != REFUSED[call], answers


def test_an_allowed_ioctl_still_reaches_the_host_kernel(answers):
    assert answers["filtered"]["ioctl_fionread"] == answers["control"]["ioctl_fionread"] != "EPERM", answers


def test_the_filter_is_one_program_per_architecture_with_foreign_calls_refused():
    prog = program("x86_64")
    assert len(prog) % 8 == 0 and 40 < len(prog) // 8 < 100
    assert program("aarch64") != prog and program("riscv64") is None
    assert set(AUDIT_ARCH) == {"x86_64", "aarch64"}


@pytest.mark.skipif(not has_option("bwrap", "--disable-userns"), reason="this bwrap has no --disable-userns (before 0.8)")
def test_a_grader_that_is_not_root_gives_its_kernel_no_nested_user_namespace():
    """The user-namespace command line (a grader that is not root), without the filter so that only
    --disable-userns answers: no user namespace inside, and one without it (the control)."""
    assert under_bwrap(-1, False)["user_namespace"] != "OK"
    assert under_bwrap(-1, False, disable_userns=False)["user_namespace"] == "OK"


WORKLOAD = """
import threading, subprocess, numpy as np, torch, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
print("SECCOMP", open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
torch.set_num_threads(2)
a = torch.randn(256, 256)
print("MATMUL", bool(torch.allclose(a @ torch.eye(256), a)), torch.get_num_threads())
print("NUMPY", float(np.linalg.norm(np.ones(4))))
t = threading.Thread(target=print, args=("THREAD ran",)); t.start(); t.join()
print("CHILD", subprocess.run(["/bin/echo", "ok"], capture_output=True, text=True).stdout.strip())
plt.plot([1, 2], [3, 4]); plt.savefig("fig.png"); print("SAVEFIG", __import__("os").path.getsize("fig.png") > 0)
"""


def test_a_lessons_work_runs_in_a_kernel_under_the_filter(tmp_path):
    out, facts = in_kernel(tmp_path, WORKLOAD)
    assert "SECCOMP 2" in out and "MATMUL True 2" in out and "NUMPY 2.0" in out, out
    assert "THREAD ran" in out and "CHILD ok" in out and "SAVEFIG True" in out and "ERROR" not in out, out
    assert any(a.startswith("seccomp:") for a in facts["limits"]), facts
