"""The system calls a kernel never needs, refused inside the sandbox: a seccomp filter that bwrap
loads (`--seccomp FD`) before it starts the launcher, as Flatpak does. The kernel and every process
it starts inherit it; nothing inside can lift it.

The filter is built by libseccomp (through `pyseccomp`, a ctypes binding of the system's
libseccomp.so.2, Debian's libseccomp2) from the names below, and exported as the classic BPF that
bwrap reads. libseccomp holds each architecture's table of call numbers; this module holds only
names. The list is the union of two public default lists: Flatpak's blocklist for its apps, and
the calls Docker's default profile leaves out for a container that was given no capability.
Every call allowed by both still runs (threads, processes, files, memory, the kernel's sockets).

Refused with EPERM unless said:
  - namespaces and the file system's shape: unshare, setns, clone with any namespace flag,
    mount, umount, umount2, pivot_root, chroot; the new mount API (open_tree, move_mount, fsopen,
    fsconfig, fsmount, fspick, mount_setattr) and clone3 answer ENOSYS (clone3's flags sit in memory
    a filter cannot read; the C library then falls back to clone, whose flags it can);
  - reading or steering other processes: ptrace, process_vm_readv/writev, process_madvise, kcmp,
    pidfd_getfd, perf_event_open;
  - the kernel keyring, bpf, io_uring (io_uring_setup, _enter, _register), userfaultfd,
    open_by_handle_at, fanotify_init, lookup_dcookie;
  - NUMA memory placement: mbind, migrate_pages, move_pages, get_mempolicy, set_mempolicy,
    set_mempolicy_home_node;
  - the machine's own settings: modules, kexec, reboot, swap, syslog, acct, quotactl(_fd), the
    clock (settimeofday, clock_settime), host and domain names, vhangup, ioperm, iopl;
  - old or foreign execution modes: modify_ldt, uselib, personality other than PER_LINUX, and the
    obsolete _sysctl, sysfs, ustat, nfsservctl, create_module, get_kernel_syms, query_module;
  - ioctl TIOCSTI and TIOCLINUX (typing into or controlling a terminal), compared on the 32 bits
    the kernel reads;
  - sockets of any family but AF_UNSPEC, AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (AF_ALG,
    AF_VSOCK, AF_PACKET, AF_KEY, Bluetooth...).
A call of another architecture (i386 on x86-64, 32-bit ARM on aarch64) or of the x32 ABI answers
ENOSYS: the filter holds only this machine's architecture, and libseccomp refuses the rest.

Built for x86-64 and aarch64; elsewhere `program()` returns None and the sandbox runs without a
filter (said in the kernel's limits line). Where libseccomp cannot be loaded on those two, starting
a kernel stops with a message naming the package (`unavailable`).
"""

from __future__ import annotations

import errno
import functools
import os
import platform

ARCHES = {"x86_64": "X86_64", "aarch64": "AARCH64"}

EPERM_CALLS = (
    # namespaces and the file system's shape
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    "perf_event_open",
    # kernel interfaces a lesson never uses, each a frequent source of kernel bugs
    "add_key", "keyctl", "request_key", "bpf", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "userfaultfd", "open_by_handle_at", "fanotify_init", "lookup_dcookie",
    # NUMA memory placement
    "mbind", "migrate_pages", "move_pages", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node",
    # the machine's own settings
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "settimeofday", "clock_settime",
    "sethostname", "setdomainname", "vhangup", "ioperm", "iopl",
    # old execution modes and obsolete calls
    "modify_ldt", "uselib", "_sysctl", "sysfs", "ustat", "nfsservctl", "create_module",
    "get_kernel_syms", "query_module",
)
ENOSYS_CALLS = ("clone3", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: clone's first argument on both arches
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PER_LINUX = 0
# AF_UNSPEC, AF_UNIX, AF_INET, AF_INET6, AF_NETLINK: every other family is refused
SOCKET_FAMILIES = (0, 1, 2, 10, 16)

PACKAGE = ("pyseccomp (requirements-classroom.txt) over the system's libseccomp "
           "(Debian/Ubuntu: apt-get install libseccomp2; Fedora: dnf install libseccomp)")


def _binding():
    import pyseccomp   # loads libseccomp.so.2 when imported

    return pyseccomp


@functools.lru_cache(maxsize=None)
def unavailable(machine: str | None = None) -> str | None:
    """None where the filter can be built here (or none is written for this machine), else why not."""
    if (machine or platform.machine()) not in ARCHES:
        return None
    try:
        _binding()
    except (ImportError, OSError, RuntimeError) as err:
        return f"the seccomp filter cannot be built: {err}; it needs {PACKAGE}"
    return None


def _rules(sc, arch: int):
    """(action, call name, argument comparisons) for every refusal, names this architecture lacks
    left out (modify_ldt, iopl and the like exist on x86 only)."""
    def exists(name: str) -> bool:
        return sc.resolve_syscall(arch, name) >= 0
    for names, err in ((EPERM_CALLS, errno.EPERM), (ENOSYS_CALLS, errno.ENOSYS)):
        for name in names:
            if exists(name):
                yield sc.ERRNO(err), name, ()
    for flag in NAMESPACE_FLAGS:
        yield sc.ERRNO(errno.EPERM), "clone", (sc.Arg(0, sc.MASKED_EQ, flag, flag),)
    for request in (TIOCSTI, TIOCLINUX):
        yield sc.ERRNO(errno.EPERM), "ioctl", (sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request),)
    yield sc.ERRNO(errno.EPERM), "personality", (sc.Arg(0, sc.NE, PER_LINUX),)
    # the families between the allowed ones, one by one, then every number past the last (compared
    # on all 64 bits: a family with high bits set, which the kernel would cut to a refused one, is refused)
    allowed = sorted(SOCKET_FAMILIES)
    for family in range(allowed[-1]):
        if family not in allowed:
            yield sc.ERRNO(errno.EPERM), "socket", (sc.Arg(0, sc.EQ, family),)
    yield sc.ERRNO(errno.EPERM), "socket", (sc.Arg(0, sc.GE, allowed[-1] + 1),)


def unknown_calls(machine: str | None = None) -> list[str]:
    """Names of the lists that this libseccomp knows on no architecture (an older libseccomp than
    the call): those calls go unfiltered."""
    sc = _binding()
    arch = getattr(sc.Arch, ARCHES[machine or platform.machine()])
    return [n for n in EPERM_CALLS + ENOSYS_CALLS
            if all(sc.resolve_syscall(a, n) == -1 for a in (arch, sc.Arch.X86_64, sc.Arch.AARCH64))]


@functools.lru_cache(maxsize=None)
def program(machine: str | None = None) -> bytes | None:
    """The filter for `machine`'s architecture (default: this one) as a struct sock_filter array,
    as bwrap's --seccomp reads it, or None where none is written for it."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        return None
    sc = _binding()
    arch = getattr(sc.Arch, ARCHES[machine])
    flt = sc.SyscallFilter(sc.ALLOW)
    flt.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.ENOSYS))
    if arch != sc.system_arch():   # built for another machine (its tests): that architecture alone
        flt.add_arch(arch)
        flt.remove_arch(sc.Arch.NATIVE)
    for action, name, args in _rules(sc, arch):
        if args and name == "socket":   # exactly as given: libseccomp would rewrite socket rules
            flt.add_rule_exactly(action, name, *args)   # for arches that multiplex socketcall
        else:
            flt.add_rule(action, name, *args)
    with os.fdopen(os.memfd_create("seccomp-export"), "w+b") as out:
        flt.export_bpf(out)
        out.seek(0)
        return out.read()


def program_fd() -> int | None:
    """A file descriptor holding `program()` from its start (a memfd, closed on exec unless passed
    on), for bwrap's --seccomp; None where there is no program for this machine."""
    prog = program()
    if prog is None:
        return None
    fd = os.memfd_create("kernel-seccomp")
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def filter_in_words(machine: str | None = None) -> str:
    """What the filter refuses, for the grader's log (sandbox limits)."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        return f"no seccomp filter: none is written for {machine} (x86_64 and aarch64 only)"
    missing = unknown_calls(machine)
    return (f"seccomp: {len(EPERM_CALLS) + len(ENOSYS_CALLS)} calls refused (namespaces, mounts, ptrace, keyring, "
            f"bpf, io_uring, NUMA, perf, personality, TIOCSTI) and sockets but unix/inet/inet6/netlink"
            + (f"; unknown to this libseccomp, so allowed: {', '.join(missing)}" if missing else ""))
