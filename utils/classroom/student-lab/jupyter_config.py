# Every Jupyter program's kernels on Unix sockets (transport "ipc") in the user's own runtime
# folder, never on loopback TCP, where anyone on the machine can connect to a kernel's ports (and
# ipykernel warns about it on every start). `make lab` reads this folder first; the class server's
# setup copies these files into its environment's etc/jupyter. Not on Windows (no Unix sockets
# there for zmq), nor where the runtime folder's path is too long for a socket (104 bytes on macOS).
import os

from jupyter_core.paths import jupyter_runtime_dir

c = get_config()  # noqa: F821 - provided by the loader
if os.name != "nt" and len(os.path.join(jupyter_runtime_dir(), f"kernel-{'0' * 36}-ipc-99")) < 104:
    c.KernelManager.transport = "ipc"
