"""prefill-decode: the instructor's tools under one command (pyproject.toml's console script,
started by prefill_decode.py at the top of the checkout).

    prefill-decode TOOL [ARGS ...]      each TOOL's own options: prefill-decode TOOL --help

Each tool is its module's main(), as `python -m MODULE ARGS ...` runs it; this only picks the
module by name and imports it then, so `prefill-decode --help` needs none of their packages (the
benchmark's torch, the class server's nbgrader). The README's table of tools names the same tools
(tests/test_commands.py holds the two to each other).
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, what it does)
TOOLS = {
    "build": ("utils.authoring.build", "regenerate release/ from source/ with nbgrader"),
    "check": ("utils.authoring.check", "each lesson: the solution earns full marks, the release zero, nothing leaks"),
    "demo": ("utils.authoring.demo", "build, grade three sample students in a scratch course, print the scores"),
    "grade": ("utils.grading", "autograde submitted/ in the sandbox, feedback HTML and grades.csv"),
    "report": ("utils.grading.report", "the class report: per graded cell, mean score, hardest first"),
    "term": ("utils.classroom.term", "roster, release, collect, zip-collect, feedback, rehearsal"),
    "classroom": ("utils.classroom", "as root: a class on one server (setup, add-student, teardown)"),
    "bench": ("utils.bench.model", "lesson 3's benchmark: decode bandwidth and prefill MFU on this device"),
    "bench-grading": ("utils.bench.grading", "grading throughput: submissions per minute at 1 and 2 workers"),
    "bench-cluster": ("utils.bench.cluster", "grading throughput on loopback Dask clusters of each size"),
    "gpu-check": ("utils.bench.gpu_check", "on a GPU machine: lesson 3 with the reference answers, then the benchmark"),
}
PROG = "prefill-decode"
# where a package's `python -m` runs its main (its __main__.py calls this module's)
MAIN_OF = {"utils.grading": "utils.grading.cli", "utils.classroom": "utils.classroom.server_admin"}


def usage() -> str:
    width = max(map(len, TOOLS))
    lines = [f"usage: {PROG} TOOL [ARGS ...]   ({PROG} TOOL --help for its options)", "", "tools:"]
    lines += [f"  {name:<{width}}  {what}  (python -m {module})" for name, (module, what) in TOOLS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in TOOLS:
        print(f"{PROG}: no tool {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = TOOLS[name][0]
    tool = importlib.import_module(MAIN_OF.get(module, module))
    sys.argv[0] = f"{PROG} {name}"   # argparse's usage line names the tool as it was called
    try:   # a tool's `command` where it has one: its entry as a process of its own
        return getattr(tool, "command", tool.main)(rest)
    except SystemExit as done:       # argparse's --help and usage errors
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 2)


if __name__ == "__main__":
    sys.exit(main())
