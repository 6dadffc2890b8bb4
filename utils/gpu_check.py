"""Run lesson 3 and the benchmark on the GPU of this machine, and write a dated record under docs/.

    python -m utils.gpu_check            # make gpu-check
    python -m utils.gpu_check --cpu      # a rehearsal on the CPU (slow; the record says CPU)

1. Lesson 3's source notebook (the reference answers) runs top to bottom on the detected GPU,
   as a student's Run All would (not under nbgrader: full sweeps, torch.compile included); every
   cell's time and printed output is kept, and an error in any cell is reported by number.
2. python -m utils.bench runs (eager, hand-captured CUDA graph and torch.compile decode; eager
   and compiled prefill), with every figure written as JSON.
3. docs/gpu-runs/<date>-<device>.md records the device, driver, CUDA and torch versions, the
   load, the notebook's cell times and outputs, and every line of the benchmark.

Exit status: 0 when everything ran (targets met or not: the record says), 1 when a notebook cell
or the benchmark failed, 2 when there is no GPU (without --cpu).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from utils.bench import load_average

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
RECORDS = REPO / "docs" / "gpu-runs"


def device_facts(gpu: bool) -> dict:
    """What the record starts with: device, capability, driver, CUDA, torch, load, date."""
    import torch

    facts = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "torch": torch.__version__,
             "cuda": torch.version.cuda, "python": sys.version.split()[0], "load_average": load_average()}
    if gpu:
        facts["device"] = torch.cuda.get_device_name(0)
        facts["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        try:
            facts["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                             capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            facts["driver"] = "unknown (nvidia-smi did not run)"
    else:
        from course.device import cpu_name
        facts["device"] = f"CPU: {cpu_name()} (rehearsal, no GPU)"
    return facts


def run_notebook(path: Path, timeout_s: int) -> list[dict]:
    """Execute the notebook in a scratch copy; one dict per code cell: number, seconds, text, error."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    env_before = os.environ.pop("NBGRADER_EXECUTION", None)
    try:
        client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(REPO)}}, record_timing=True)
        client.execute()
    finally:
        if env_before is not None:
            os.environ["NBGRADER_EXECUTION"] = env_before
    cells = []
    for number, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        timing = cell.metadata.get("execution", {})
        seconds = _seconds(timing.get("iopub.execute_input"), timing.get("shell.execute_reply"))
        text, error = [], None
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                text.append(out.text)
            elif out.output_type == "error":
                error = f"{out.ename}: {out.evalue}"
            elif "text/markdown" in out.get("data", {}):
                text.append(out["data"]["text/markdown"] + "\n")
        # a progress bar redraws in place: keep what was on screen at the end of each line
        shown = "\n".join(line.split("\r")[-1] for line in "".join(text).split("\n")).strip()
        cells.append({"cell": number, "seconds": seconds, "text": shown, "error": error})
    return cells


def _seconds(start: str | None, end: str | None) -> float | None:
    from datetime import datetime

    if not start or not end:
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def run_bench(gpu: bool, json_path: Path) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "utils.bench", "--json", str(json_path)] + ([] if gpu else ["--device", "cpu"])
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def render(facts: dict, cells: list[dict], bench_rc: int, bench_text: str, figures: dict | None) -> str:
    """The record, as markdown."""
    lines = [f"# Lesson 3 and the benchmark on {facts['device']}, {facts['date']}", "",
             "Written by `make gpu-check` (`python -m utils.gpu_check`).", "",
             "| | |", "|---|---|"]
    for key in ("device", "compute_capability", "driver", "cuda", "torch", "python", "load_average", "load_average_after"):
        if key in facts:
            lines.append(f"| {key.replace('_', ' ')} | {facts[key]} |")
    failed = [c for c in cells if c["error"]]
    total = sum(c["seconds"] or 0 for c in cells)
    lines += ["", "## Lesson 3, run top to bottom with the reference answers", "",
              f"{len(cells)} code cells in {total:,.0f} s; "
              + (f"**{len(failed)} failed**: " + ", ".join(f"cell {c['cell']} ({c['error']})" for c in failed)
                 if failed else "every cell ran."), ""]
    for c in cells:
        if not c["text"] and not c["error"]:
            continue
        seconds = "?" if c["seconds"] is None else f"{c['seconds']:.1f} s"
        lines += [f"### cell {c['cell']} ({seconds})", "", "```", c["text"] or "", *( [c["error"]] if c["error"] else []),
                  "```", ""]
    lines += ["## `python -m utils.bench`", "", f"exit status {bench_rc}", "", "```", bench_text.strip(), "```", ""]
    if figures:
        lines += ["Every figure (`--json`):", "", "```json", json.dumps(figures, indent=1), "```", ""]
    return "\n".join(lines)


def record_path(facts: dict, when: time.struct_time | None = None) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", facts["device"].lower()).strip("-")[:40]
    return RECORDS / f"{time.strftime('%Y-%m-%d-%H%M', when or time.localtime())}-{slug}.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="rehearse on the CPU when there is no GPU")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per notebook cell")
    parser.add_argument("--skip-notebook", action="store_true", help="only the benchmark")
    args = parser.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available()
    if not gpu and not args.cpu:
        print("gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False); "
              "nothing recorded. Run it where a GPU is lent, or pass --cpu to rehearse.", file=sys.stderr)
        return 2
    facts = device_facts(gpu)
    print(f"gpu-check on {facts['device']} (torch {facts['torch']}, CUDA {facts['cuda']}, load {facts['load_average']})",
          flush=True)
    cells = []
    if not args.skip_notebook:
        print("running lesson 3 top to bottom with the reference answers ...", flush=True)
        cells = run_notebook(NOTEBOOK, args.timeout)
        for c in cells:
            print(f"  cell {c['cell']:3d}: {c['seconds'] or 0:7.1f} s" + (f"  FAILED {c['error']}" if c["error"] else ""))
    print("running the benchmark ...", flush=True)
    json_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu-check-{os.getpid()}.json"
    bench_rc, bench_text = run_bench(gpu, json_path)
    print(bench_text)
    figures = json.loads(json_path.read_text()) if json_path.exists() else None
    facts["load_average_after"] = load_average()
    path = record_path(facts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(facts, cells, bench_rc, bench_text, figures))
    print(f"record written: {path.relative_to(REPO)}")
    return 1 if (bench_rc != 0 or any(c["error"] for c in cells)) else 0


if __name__ == "__main__":
    sys.exit(main())
