# nbgrader validate's kernels (and the Validate button's) on Unix sockets in the user's runtime
# folder, as jupyter_config.py beside this file says; nbgrader names no connection file of its
# own, so the sockets get an absolute path here (one kernel at a time per process).
import os

from jupyter_core.paths import jupyter_runtime_dir

c = get_config()  # noqa: F821 - provided by the loader
_run = jupyter_runtime_dir()
if os.name != "nt" and len(os.path.join(_run, f"kernel-{os.getpid()}-ipc-99")) < 104:
    os.makedirs(_run, mode=0o700, exist_ok=True)
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(_run, f"kernel-{os.getpid()}")
