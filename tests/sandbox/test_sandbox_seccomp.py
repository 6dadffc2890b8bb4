"""The calls a kernel never needs are refused inside the sandbox (utils/sandbox/seccomp.py). One
probe per refused call, each with arguments the host kernel answers harmlessly (nothing is created,
mounted, traced or changed), all run by one program started under the kernel's own bwrap command
line (bwrap, the mounts, the launcher, this Python) twice: with the filter and, as the control,
without it. The probe's call numbers are its own table, taken from the kernel's headers
(asm/unistd_64.h, asm-generic/unistd.h; checked against them below where they are installed), not
libseccomp's, which builds the filter. Also: the lists the filter follows (Flatpak's blocklist,
what Docker's default profile leaves out), the foreign ABIs, a grader that is not root making no
nested user namespace, and a lesson's work (torch's threads, numpy, matplotlib) still running."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from utils.sandbox import seccomp
from utils.sandbox.command import has_option, kernel_uid
from utils.sandbox.probe import run_sandboxed, unavailable
from sandbox_common import in_kernel

MACHINE = os.uname().machine


def sandboxed(test):
    """Marks a test that starts sandboxes: slow, and skipped where bubblewrap cannot run or no
    filter is written for this machine."""
    for mark in (pytest.mark.slow,
                 pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}"),
                 pytest.mark.skipif(MACHINE not in seccomp.ARCHES, reason=f"no seccomp filter is written for {MACHINE}")):
        test = mark(test)
    return test


# call: (x86-64 number, aarch64 number), None where the architecture has no such call
NR = {"unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount": (None, None), "umount2": (166, 39),
      "pivot_root": (155, 41), "chroot": (161, 51), "ptrace": (101, 117), "process_vm_readv": (310, 270),
      "process_vm_writev": (311, 271), "process_madvise": (440, 440), "kcmp": (312, 272), "pidfd_getfd": (438, 438),
      "perf_event_open": (298, 241), "add_key": (248, 217), "keyctl": (250, 219), "request_key": (249, 218),
      "bpf": (321, 280), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
      "userfaultfd": (323, 282), "open_by_handle_at": (304, 265), "fanotify_init": (300, 262),
      "lookup_dcookie": (212, 18), "mbind": (237, 235), "migrate_pages": (256, 238), "move_pages": (279, 239),
      "get_mempolicy": (239, 236), "set_mempolicy": (238, 237), "set_mempolicy_home_node": (450, 450),
      "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106), "kexec_load": (246, 104),
      "kexec_file_load": (320, 294), "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225),
      "syslog": (103, 116), "acct": (163, 89), "quotactl": (179, 60), "quotactl_fd": (443, 443),
      "settimeofday": (164, 170), "clock_settime": (227, 112), "sethostname": (170, 161),
      "setdomainname": (171, 162), "vhangup": (153, 58), "ioperm": (173, None), "iopl": (172, None),
      "modify_ldt": (154, None), "uselib": (134, None), "_sysctl": (156, None), "sysfs": (139, None),
      "ustat": (136, None), "nfsservctl": (180, 42), "create_module": (174, None), "get_kernel_syms": (177, None),
      "query_module": (178, None), "clone3": (435, 435), "open_tree": (428, 428), "move_mount": (429, 429),
      "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
      "mount_setattr": (442, 442), "clone": (56, 220), "ioctl": (16, 29), "personality": (135, 92),
      "socket": (41, 198), "getpid": (39, 172)}

# probe name: (call, its arguments), where a string argument is one of the probe's values below; a
# call whose name is not a probe's is probed once under its own name
BAD = 1   # an address no process maps: the host kernel answers EFAULT where it reads it first
PROBES = {
    "unshare": ("unshare", [0x10000000 | 0x1]), "setns": ("setns", [-1, 0x10000000]),
    "mount": ("mount", ["b:none", "b:/nonexistent-mount-target", "b:tmpfs", 0, 0]),
    "umount2": ("umount2", ["b:/nonexistent-mount-target", 0]),
    "pivot_root": ("pivot_root", ["b:/nonexistent-a", "b:/nonexistent-b"]),
    "chroot": ("chroot", ["b:/nonexistent-root"]),
    "ptrace": ("ptrace", [2, 999999999, 0, 0]),
    "process_vm_readv": ("process_vm_readv", ["pid", 0, 0, 0, 0, 0]),
    "process_vm_writev": ("process_vm_writev", ["pid", 0, 0, 0, 0, 0]),
    "process_madvise": ("process_madvise", [-1, 0, 0, 0, 0]), "kcmp": ("kcmp", ["pid", "pid", 0, 0, 0]),
    "pidfd_getfd": ("pidfd_getfd", [-1, 0, 0]), "perf_event_open": ("perf_event_open", [0, 0, -1, -1, 0]),
    "add_key": ("add_key", [0, 0, 0, 0, 0]), "keyctl": ("keyctl", [9999, 0, 0, 0, 0]),
    "request_key": ("request_key", [0, 0, 0, 0]), "bpf": ("bpf", [9999, 0, 0]),
    "io_uring_setup": ("io_uring_setup", [1, 0]), "io_uring_enter": ("io_uring_enter", [-1, 0, 0, 0, 0, 0]),
    "io_uring_register": ("io_uring_register", [-1, 0, 0, 0]),
    "userfaultfd": ("userfaultfd", [0x1 | 0x100]),   # user mode only (no privilege needed), an unknown flag
    "open_by_handle_at": ("open_by_handle_at", [-1, 0, 0]),
    "fanotify_init": ("fanotify_init", [0x200, 0]),   # FAN_REPORT_FID: allowed unprivileged; closed below
    "lookup_dcookie": ("lookup_dcookie", [0, 0, 0]),
    "mbind": ("mbind", [0, 0, 0, 0, 0, 0]), "migrate_pages": ("migrate_pages", [0, 0, 0, 0]),
    "move_pages": ("move_pages", [0, 0, 0, 0, 0, 0]), "get_mempolicy": ("get_mempolicy", [0, 0, 0, 0, 0]),
    "set_mempolicy": ("set_mempolicy", [0, 0, 0]), "set_mempolicy_home_node": ("set_mempolicy_home_node", [0, 0, 0, 0]),
    "init_module": ("init_module", [0, 0, 0]), "finit_module": ("finit_module", [-1, "b:", 0]),
    "delete_module": ("delete_module", ["b:nonexistent_module", 0]), "kexec_load": ("kexec_load", [0, 0, 0, 0]),
    "kexec_file_load": ("kexec_file_load", [-1, -1, 0, 0, 0]), "reboot": ("reboot", [0, 0, 0, 0]),
    "swapon": ("swapon", ["b:/nonexistent-swap", 0]), "swapoff": ("swapoff", ["b:/nonexistent-swap"]),
    "syslog": ("syslog", [10, 0, 0]),   # the buffer's size
    "acct": ("acct", [0]), "quotactl": ("quotactl", [0, 0, 0, 0]), "quotactl_fd": ("quotactl_fd", [-1, 0, 0, 0]),
    "settimeofday": ("settimeofday", [BAD, 0]), "clock_settime": ("clock_settime", [0, BAD]),
    "sethostname": ("sethostname", [BAD, 1]), "setdomainname": ("setdomainname", [BAD, 1]),
    "vhangup": ("vhangup", []), "ioperm": ("ioperm", [0, 0, 0]), "iopl": ("iopl", [0]),
    "modify_ldt": ("modify_ldt", [0, "buf", 16]),   # read the (empty) local descriptor table
    "uselib": ("uselib", [0]), "_sysctl": ("_sysctl", [0]), "sysfs": ("sysfs", [3]), "ustat": ("ustat", [0, BAD]),
    "nfsservctl": ("nfsservctl", [0, 0, 0]), "create_module": ("create_module", [0, 0]),
    "get_kernel_syms": ("get_kernel_syms", [0]), "query_module": ("query_module", [0, 0, 0, 0, 0]),
    "clone3": ("clone3", [0, 0]), "open_tree": ("open_tree", [-1, "b:/nonexistent", 0]),
    "move_mount": ("move_mount", [-1, "b:", -1, "b:", 0]), "fsopen": ("fsopen", ["b:nonexistent-fs", 0]),
    "fsconfig": ("fsconfig", [-1, 0, 0, 0, 0]), "fsmount": ("fsmount", [-1, 0, 0]),
    "fspick": ("fspick", [-1, "b:", 0]), "mount_setattr": ("mount_setattr", [-1, "b:", 0, 0, 0]),
    # clone with each namespace flag, made invalid by CLONE_SIGHAND without CLONE_VM (nothing starts)
    **{f"clone_{name}": ("clone", [flag | 0x800, 0, 0, 0, 0]) for name, flag in
       (("newns", 0x20000), ("newcgroup", 0x2000000), ("newuts", 0x4000000), ("newipc", 0x8000000),
        ("newuser", 0x10000000), ("newpid", 0x20000000), ("newnet", 0x40000000))},
    "ioctl_tiocsti": ("ioctl", ["null", 0x5412, "buf"]), "ioctl_tioclinux": ("ioctl", ["null", 0x541C, "buf"]),
    "ioctl_tiocsti_high_bits": ("ioctl", ["null", 0x1_0000_5412, "buf"]),   # the kernel reads 32 bits of it
    "personality_query": ("personality", [0xFFFFFFFF]),
    "personality_no_aslr": ("personality", [0x0040000]),   # ADDR_NO_RANDOMIZE; reset to PER_LINUX below
    "socket_alg": ("socket", [38, 5, 0]), "socket_vsock": ("socket", [40, 1, 0]),
    "socket_bluetooth": ("socket", [31, 3, 0]), "socket_key": ("socket", [15, 3, 2]),
    "socket_alg_high_bits": ("socket", [0x1_0000_0026, 5, 0]),   # the kernel reads an int: AF_ALG
}
# answered alike with the filter and without it (FIONREAD: /dev/null answers ENOTTY)
ALLOWED = {"personality_linux": ("personality", [0]), "ioctl_fionread": ("ioctl", ["null", 0x541B, "buf"]),
           "socket_unix": ("socket", [1, 1, 0]), "socket_inet": ("socket", [2, 2, 0]),
           "socket_inet6": ("socket", [10, 2, 0]), "socket_netlink": ("socket", [16, 3, 0])}

PROGRAM = r"""
import ctypes, errno, json, mmap, os, sys
NR, PROBES, COLUMN = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
null, buf = os.open("/dev/null", os.O_RDONLY), ctypes.create_string_buffer(64)
VALUES = {"pid": os.getpid(), "null": null, "buf": buf}
FD_RETURNING = {"socket", "fanotify_init", "userfaultfd", "io_uring_setup", "open_tree", "fsopen", "fspick",
                "fsmount", "pidfd_getfd"}
def arg(a):
    if isinstance(a, str):
        return a[2:].encode() if a.startswith("b:") else (VALUES[a] if a == "buf" else ctypes.c_long(VALUES[a]))
    return ctypes.c_ulong(a) if a >= 0 else ctypes.c_long(a)
def call(name, args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name][COLUMN]), *[arg(a) for a in args])
    if r >= 0 and name in FD_RETURNING:
        os.close(r)
    return "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
got = {probe: call(name, args) for probe, (name, args) in PROBES.items() if NR[name][COLUMN] is not None}
if "personality_no_aslr" in got:
    call("personality", [0])
if os.uname().machine == "x86_64":
    # the other ABIs' getpid: x32 (the x32 bit on the 64-bit call) and i386 (int 0x80, eax 20)
    r = libc.syscall(ctypes.c_long(0x40000000 | NR["getpid"][0]))
    got["abi_x32"] = "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno())
    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    code.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))   # mov eax, 20; int 0x80; ret
    r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(code)))()
    got["abi_i386"] = "OK" if r >= 0 else errno.errorcode.get(-r)
got["user_namespace"] = call("unshare", [0x10000000])   # the attack itself, last: it changes this process
print("PROBE " + json.dumps(got))
"""

EXPECTED = {**{p: "ENOSYS" if name in seccomp.ENOSYS_CALLS else "EPERM" for p, (name, _) in PROBES.items()},
            "abi_x32": "ENOSYS", "abi_i386": "ENOSYS", "user_namespace": "EPERM"}


def host_refuses_too() -> set[str]:
    """Probes the host kernel itself answers as the filter does, for a process without capabilities
    (each checks the capability before its arguments) or by this host's settings: there the control
    cannot tell the filter's answer apart."""
    def sysctl(name: str) -> int:
        try:
            return int(Path("/proc/sys/kernel", name).read_text())
        except (OSError, ValueError):
            return 0
    same = {"pivot_root", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
            "reboot", "swapon", "swapoff", "acct", "open_by_handle_at", "sethostname", "setdomainname", "vhangup",
            "lookup_dcookie",   # before Linux 6.8, which removed it
            "abi_x32"}          # most kernels are built without the x32 ABI
    if sysctl("unprivileged_bpf_disabled"):
        same.add("bpf")
    if sysctl("dmesg_restrict"):
        same.add("syslog")
    if sysctl("io_uring_disabled") == 2:
        same.add("io_uring_setup")
    return same


def under_bwrap(uid: int, seccomp_on: bool, disable_userns: bool = True) -> dict[str, str]:
    """The probes' answers, from one program started by the kernel's own command line
    (utils.sandbox.probe.run_sandboxed, which trial_start uses too) for a kernel of `uid` (-1: a user
    namespace, as for a grader that is not root)."""
    column = 0 if MACHINE == "x86_64" else 1
    table = json.dumps([NR, {**PROBES, **ALLOWED}, column])
    program = f"import sys; sys.argv[1:] = [{table!r}]\n" + PROGRAM
    proc = run_sandboxed(program, uid, seccomp=seccomp_on, disable_userns=disable_userns, name=".probe")
    stdout, stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert "PROBE " in stdout, stdout + stderr
    return json.loads(stdout.split("PROBE ", 1)[1].splitlines()[0])


@pytest.fixture(scope="module")
def answers() -> dict[str, dict[str, str]]:
    """The kernel's command line as this grader builds it (its uid: a kernel uid of its own when
    grading as root), with the filter and without it: two sandbox starts for every probe."""
    uid = kernel_uid()
    return {"filtered": under_bwrap(uid, True), "control": under_bwrap(uid, False)}


@sandboxed
@pytest.mark.parametrize("probe", sorted(EXPECTED))
def test_each_call_a_kernel_never_needs_is_refused_by_the_filter(answers, probe):
    if probe not in answers["filtered"]:
        pytest.skip(f"{probe}: no such call on {MACHINE}")
    assert answers["filtered"][probe] == EXPECTED[probe], (probe, answers["filtered"][probe], answers["control"][probe])
    if probe not in host_refuses_too():   # the control: without the filter the host kernel answers otherwise
        assert answers["control"][probe] != EXPECTED[probe], (probe, answers["control"][probe])


@sandboxed
@pytest.mark.parametrize("probe", sorted(ALLOWED))
def test_calls_a_kernel_needs_still_reach_the_host_kernel(answers, probe):
    assert answers["filtered"][probe] == answers["control"][probe] not in ("EPERM", "EAFNOSUPPORT"), (probe, answers)


def test_every_refused_call_has_its_own_probe():
    """A call added to the filter's lists without a probe here, or named nowhere in the probe's
    table, fails: the filter and its tests cannot drift apart."""
    probed = {name for name, _ in PROBES.values()}
    for name in seccomp.EPERM_CALLS + seccomp.ENOSYS_CALLS:
        assert name in NR, f"{name}: not in the probe's table of numbers"
        assert name in probed or NR[name] == (None, None), f"{name}: refused by the filter, probed by nothing"


# The public lists the filter follows (facts, as of their current versions): Flatpak's blocklist for
# its apps (not in devel mode, not multiarch), and the calls Docker's default profile allows a
# container only with a capability it does not grant by default, or never
FLATPAK = {"syslog", "uselib", "acct", "quotactl", "add_key", "keyctl", "request_key", "move_pages", "mbind",
           "get_mempolicy", "set_mempolicy", "migrate_pages", "unshare", "setns", "mount", "umount", "umount2",
           "pivot_root", "chroot", "clone3", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
           "mount_setattr", "perf_event_open", "ptrace", "modify_ldt"}
DOCKER = {"bpf", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick", "lookup_dcookie", "mount",
          "mount_setattr", "move_mount", "open_tree", "perf_event_open", "quotactl", "quotactl_fd", "setdomainname",
          "sethostname", "setns", "syslog", "umount", "umount2", "unshare", "reboot", "delete_module",
          "init_module", "finit_module", "acct", "kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv",
          "process_vm_writev", "ptrace", "iopl", "ioperm", "settimeofday", "clock_settime", "vhangup",
          "get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "open_by_handle_at",
          "io_uring_setup", "io_uring_enter", "io_uring_register", "add_key", "keyctl", "request_key",
          "kexec_load", "kexec_file_load", "userfaultfd", "swapon", "swapoff", "uselib", "ustat", "sysfs",
          "_sysctl", "nfsservctl", "create_module", "get_kernel_syms", "query_module", "migrate_pages",
          "move_pages", "pivot_root"}


def test_the_filter_refuses_every_call_of_flatpaks_and_dockers_default_lists():
    refused = set(seccomp.EPERM_CALLS) | set(seccomp.ENOSYS_CALLS)
    assert FLATPAK - refused == set() and DOCKER - refused == set(), (FLATPAK | DOCKER) - refused


@pytest.mark.parametrize("machine, header", [("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
                                             ("aarch64", "/usr/include/asm-generic/unistd.h")])
def test_the_probes_numbers_are_the_kernel_headers(machine, header):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed (Debian: linux-libc-dev)")
    defined = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", Path(header).read_text())}
    column = 0 if machine == "x86_64" else 1
    assert {n: v[column] for n, v in NR.items()} == {n: defined.get(n) for n in NR}


@pytest.mark.slow   # loading libseccomp runs ldconfig (ctypes.util.find_library)
def test_the_filter_is_built_for_each_architecture_with_this_ones_numbers():
    """x86-64 and aarch64 each get their own program (their own numbers, their own AUDIT_ARCH);
    elsewhere none."""
    import struct

    def constants(machine):
        prog = seccomp.program(machine)
        return {struct.unpack("=HBBI", prog[i:i + 8])[3] for i in range(0, len(prog), 8)}
    x86, arm = constants("x86_64"), constants("aarch64")
    assert 0xC000003E in x86 and 0xC00000B7 not in x86 and 0xC00000B7 in arm
    assert NR["io_uring_setup"][0] in x86 and NR["personality"][0] in x86 and NR["modify_ldt"][0] in x86
    assert NR["personality"][1] in arm and NR["mbind"][1] in arm
    assert seccomp.program("riscv64") is None and seccomp.unknown_calls() == []


@sandboxed
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


@sandboxed
def test_a_lessons_work_runs_in_a_kernel_under_the_filter(tmp_path):
    out, facts = in_kernel(tmp_path, WORKLOAD)
    assert "SECCOMP 2" in out and "MATMUL True 2" in out and "NUMPY 2.0" in out, out
    assert "THREAD ran" in out and "CHILD ok" in out and "SAVEFIG True" in out and "ERROR" not in out, out
    assert any(a.startswith("seccomp:") for a in facts["limits"]), facts


def test_without_libseccomp_no_kernel_starts_and_the_message_names_the_package(monkeypatch):
    """Where the binding or the library cannot be loaded, the sandbox refuses to start a kernel
    without its filter (SandboxKernelManager._check_sandbox asks `unavailable` first)."""
    def missing():
        raise RuntimeError("Unable to find libseccomp")
    monkeypatch.setattr(seccomp, "_binding", missing)
    seccomp.unavailable.cache_clear()
    try:
        said = seccomp.unavailable("x86_64")
        assert "Unable to find libseccomp" in said and "libseccomp2" in said and "pyseccomp" in said
        assert seccomp.unavailable("riscv64") is None   # no filter is written there: nothing to build
    finally:
        seccomp.unavailable.cache_clear()
