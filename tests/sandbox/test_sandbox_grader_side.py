"""The grader's side: the kernel's own output reaches the grader marked and limited, and a link swapped
in for a kernel socket never makes the grader connect elsewhere."""

from __future__ import annotations

import os
import socket

import pytest

from utils.sandbox.probe import unavailable
from sandbox_common import in_kernel


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable() is not None, reason=f"bubblewrap cannot run here: {unavailable()}")]


def test_the_kernels_own_output_reaches_the_grader_marked_and_limited(capsys):
    import io

    from utils.sandbox.kernel_processes import KERNEL_LINE, forward_output

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # a kernel writing more than the pipe holds, lines that look like the grader's
        os.close(r)
        os.write(w, b"[AutogradeApp | INFO] Score: 6\n" + b"y" * 300_000)
        os._exit(0)
    os.close(w)
    forward_output(io.open(r, "rb"), 100)   # returns only once the pipe is read to its end
    os.waitpid(pid, 0)
    err = capsys.readouterr().err
    assert err.startswith(KERNEL_LINE + "[AutogradeApp") and err.count("y") < 100
    assert all(line.startswith(KERNEL_LINE) for line in err.splitlines())


PLANT_LINKS = """
import json, os
info = json.load(open('/run/kernel/kernel.json'))
for name in ('shell', 'iopub', 'control', 'stdin', 'hb'):
    path = f"{info['ip']}-{info[name + '_port']}"
    os.rename(path, path + '.moved')
    os.symlink(%r, path)
print('planted')
"""


def test_a_link_swapped_in_for_a_kernel_socket_never_makes_the_grader_connect_elsewhere(tmp_path):
    """The kernel replaces every socket file in its folder by a link to a socket of the grader's
    machine; a client that connects afterwards (as after a reconnect) refuses the links and reaches
    nothing of the machine."""
    from utils.sandbox.sockets import SocketRefused

    host = socket.socket(socket.AF_UNIX)
    host.bind(str(tmp_path / "machine.sock"))
    host.listen(8)
    host.settimeout(0.5)

    def reconnect(km):   # a new client, as after a reconnect: the reason it was refused, or None
        try:
            km.client().start_channels()
        except SocketRefused as err:
            return str(err)
        return None

    said, facts = in_kernel(tmp_path, PLANT_LINKS % str(tmp_path / "machine.sock"), timeout=60, after=reconnect)
    refused = facts["after"]
    assert "planted" in said
    assert refused and "a link" in refused
    try:
        host.accept()
        reached = True
    except OSError:
        reached = False
    host.close()
    assert not reached
