"""What the sandbox tests share (tests/test_sandbox_*.py, one file per area): the scratch course's
lesson and names, the cheats' sources, a submission written to its folder, and `in_kernel`, one
sandboxed kernel started with `SandboxKernelManager` alone.

The areas: test_sandbox_grading.py grades one scratch course of hostile submissions with `python -m
utils.grading`; test_sandbox_nbgrader.py the same protection for plain nbgrader, interrupts and a
process bomb; test_sandbox_files.py what a kernel can read of the course checkout and what it leaves
in its work folder; test_sandbox_limits.py its memory, process and CPU limits;
test_sandbox_allowlist.py what is bound into the sandbox and what of the grader's environment
reaches it; test_sandbox_grader_side.py the grader's side of the kernel's sockets and output."""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
from pathlib import Path

import nbformat

from utils.lessons import REPO


LESSON, NB, QUIZ = "01_tiny", "tiny.ipynb", "03_quiz"

TAG = secrets.token_hex(6)

PLANTED = [REPO / f"planted-by-a-student-{TAG}.txt", REPO / "course" / f"planted_{TAG}.py",
           Path(f"/tmp/planted-by-a-student-{TAG}")]

ADD = "def add(a, b):\n    return a + b\n"


def run_async(coroutine_function):
    """Run a coroutine to its end on a thread of its own: the browser tests' Playwright keeps an
    event loop running on the main thread for the whole session, where asyncio.run() refuses."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(coroutine_function())).result()

def cheats(course: Path, port: int) -> dict[str, str]:
    """{student: source of the `add` cell}; the rest of each notebook is the untouched release."""
    find_secrets = f"""
import glob, json, os
bases = [os.environ.get('COURSE_TOOLS', ''), {str(course)!r}, {str(REPO)!r}, '../../..', '/tmp'] + glob.glob('/tmp/*')
found = []
for b in bases:
    found += glob.glob(os.path.join(b, 'source', '01_tiny', '*.ipynb')) + glob.glob(os.path.join(b, 'gradebook.db'))
print('FOUND', found)
for path in found:
    if path.endswith('.ipynb'):
        for cell in json.load(open(path))['cells']:
            if 'BEGIN SOLUTION' in ''.join(cell['source']):
                exec(''.join(cell['source']), globals())
"""
    return {
        "input_transformer": "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])",
        "ast_transformer": ("import ast\nclass Nothing(ast.NodeTransformer):\n"
                            "    def visit_Module(self, node):\n"
                            "        return ast.Module(body=[ast.Pass()], type_ignores=[])\n"
                            "get_ipython().ast_transformers.append(Nothing())"),
        "exception_handler": "get_ipython().set_custom_exc((BaseException,), lambda *args, **kw: None)",
        "print_keeps_quiet": ("import builtins\nclass Quiet:\n    def __call__(self, *a, **k): pass\n"
                              "builtins.print = Quiet()\nget_ipython().set_custom_exc((Exception,), lambda *a, **k: None)"),
        "secret_reader": find_secrets,
    }


def _write(folder: Path, nb) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "timestamp.txt").write_text("2030-01-01 10:00:00.000000 UTC")
    if nb is not None:
        nbformat.write(nb, str(folder / NB))


def in_kernel(cwd: Path, code: str, timeout: float = 120, after=None, **traits) -> tuple[str, dict]:
    """Run `code` in one sandboxed kernel working in `cwd`: (its printed output and error names, facts
    about the kernel: whether it was alive after the code, the limits applied, its sandbox's rundir,
    and what `after(km)` returned, called with the kernel still running, under "after")."""
    from utils.sandbox.manager import SandboxKernelManager

    async def run():
        km = SandboxKernelManager(**traits)
        await km.start_kernel(cwd=str(cwd))
        kc = km.client()
        kc.start_channels()
        out: list[str] = []
        facts = {"limits": list(km.limits_applied), "rundir": km._rundir, "groups": list(km._cgroups)}

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append(f"ERROR {msg['content']['ename']}\n")
        try:
            await kc.wait_for_ready(timeout=60)
            task = asyncio.ensure_future(kc.execute_interactive(code, timeout=timeout, output_hook=hook))
            while not task.done() and await km.is_alive():   # a killed kernel never replies
                await asyncio.sleep(0.25)
            if task.done() and isinstance(task.exception(), TimeoutError):
                out.append("TIMEOUT\n")
            elif not task.done():
                await asyncio.sleep(1)   # the output that was on its way
                task.cancel()
            facts["alive"] = await km.is_alive()
            if after is not None:
                facts["after"] = after(km)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        return "".join(out), facts

    return run_async(run)


BOMBS = {
    "fork": ("import os, time\nn = 0\ntry:\n    for _ in range(1000):\n        if os.fork() == 0:\n"
             "            os.execv('/bin/sleep', ['sleep', '60.41'])\n        n += 1\nexcept OSError as err:\n"
             "    print(type(err).__name__)\nprint('STARTED', n)\n"),
    "threads": ("import threading, time\nn = 0\ntry:\n    for _ in range(1000):\n"
                "        threading.Thread(target=time.sleep, args=(60.41,), daemon=True).start()\n        n += 1\n"
                "except RuntimeError as err:\n    print(type(err).__name__)\nprint('STARTED', n)\n"),
}
