"""Run lesson 3 and the benchmark on the GPU of this machine, and write a dated record under docs/.

    python -m utils.bench.gpu_check            # in any environment that has a CUDA build of torch
    make gpu-check                       # the same in .venv (created, with the pinned torch)
    make gpu-check PY=python3            # the same with that Python: no .venv, nothing installed
    python -m utils.bench.gpu_check --cpu      # a rehearsal on the CPU (slow; the record says CPU)

It installs nothing. Besides torch (2.5 or later, for attention's enable_gqa) it needs numpy, matplotlib,
nbclient, nbformat and ipykernel; when one is missing it names them all and stops before running anything.

1. Lesson 3's source notebook (the reference answers) runs top to bottom on the detected GPU,
   as a student's Run All would (not under nbgrader: full sweeps, torch.compile included); every
   cell's time and printed output is kept, and an error in any cell is reported by number.
2. Lesson 3's timing path (utils/bench/timing_path.py): a small model's decode step and prefill,
   eager and replayed as CUDA graphs, must leave the same logits and cache; both are timed. Then decode
   attention's bandwidth with each attention kernel alone, beside that of the weights' products.
3. python -m utils.bench.model runs (eager, hand-captured CUDA graph and torch.compile decode; eager
   and compiled prefill), with every figure written as JSON.
4. docs/gpu-runs/<date>-<device>.md records the device, driver, CUDA, cuDNN and torch versions
   (and whether torch is a CUDA build), the load, the notebook's cell times and outputs, and
   every line of the benchmark. Each is appended (and flushed to disk) as soon as it exists, so
   a run stopped by a time limit leaves everything it measured until then.

Where there is no usable GPU it says why: no GPU at all, or an NVIDIA driver next to a CPU-only
build of torch (`+cpu`, torch.version.cuda is None; a pip configuration that offers the `+cpu`
wheels makes pip pick one), with the way to get a CUDA build.

Exit status: 0 when everything ran (targets met or not: the record says), 1 when a notebook cell or the
benchmark failed or a replayed pass differed from its eager one, 2 when there is no usable GPU (without
--cpu), 3 when a package it needs is missing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from utils.bench.timing_path import (ATTENTION_HEADING, GRAPH_HEADING, attention_block, attention_check, graph_block,
                                     graph_check)

# torch, nbformat, nbclient and the modules that import torch (course.*, utils.bench.model) are imported
# inside the functions that use them: this module starts in a bare Python and names what it lacks.

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "source" / "03_timing_prefill_decode" / "timing_prefill_decode.ipynb"
RECORDS = REPO / "docs" / "gpu-runs"

# module -> distribution on PyPI, for the message
NEEDED = {"torch": "torch", "numpy": "numpy", "matplotlib": "matplotlib", "nbclient": "nbclient",
          "nbformat": "nbformat", "ipykernel": "ipykernel"}
OLDEST_TORCH = (2, 5)  # scaled_dot_product_attention's enable_gqa, which the toy model passes, is new in 2.5
NO_GPU = ("gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False); "
          "nothing recorded. Run it where a GPU is lent, or pass --cpu to rehearse.")
CUDA_TORCH_HELP = "https://pytorch.org/get-started/locally/"


# --- what this Python has ---------------------------------------------------------------------

def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0])[:2])


def missing_packages(find_spec=None, version_of=None) -> list[str]:
    """What this Python lacks for the check, one phrase each (empty: nothing). Nothing is imported."""
    find_spec = find_spec or importlib.util.find_spec
    version_of = version_of or importlib.metadata.version
    missing = []
    for module, dist in NEEDED.items():
        try:
            found = find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(dist)
        elif module == "torch":
            try:
                version = version_of("torch")
            except importlib.metadata.PackageNotFoundError:
                continue
            if _version_tuple(version) < OLDEST_TORCH:
                missing.append(f"torch >= {'.'.join(map(str, OLDEST_TORCH))} (found {version})")
    return missing


def missing_message(missing: list[str], python: str = sys.executable) -> str:
    plain = [m for m in missing if " " not in m]
    install = f"`{python} -m pip install {' '.join(plain)}`" if plain else "a newer torch"
    return (f"gpu-check: this Python ({python}) lacks {', '.join(missing)}; nothing was run or installed. "
            f"Install them into it ({install}; torch: a CUDA build, see {CUDA_TORCH_HELP}), run it with "
            f"a Python that has them (make gpu-check PY=/path/to/python), or use `make gpu-check`, "
            f"which creates .venv with the course's pinned packages.")


def torch_build(version: str, cuda: str | None) -> str:
    """'CUDA 12.8 build' or 'CPU-only build'."""
    if cuda is None or "+cpu" in version:
        return "CPU-only build"
    return f"CUDA {cuda} build"


def nvidia_driver(smi: str | None = None) -> tuple[str | None, str | None]:
    """(driver version, newest CUDA version the driver supports) of this machine's NVIDIA driver,
    (None, None) where there is none. From nvidia-smi, else /proc/driver/nvidia/version."""
    if smi is None:
        try:
            smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            smi = ""
    driver = re.search(r"Driver Version:\s*([\d.]+)", smi)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", smi)
    if driver:
        return driver.group(1), cuda.group(1) if cuda else None
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None, None
    found = re.search(r"Kernel Module\s+([\d.]+)", text) or re.search(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b", text)
    return (found.group(1) if found else "unknown"), None


def unusable_gpu_advice(version: str, cuda: str | None, driver: str | None, driver_cuda: str | None,
                        python: str = sys.executable) -> str | None:
    """Why an NVIDIA machine's GPU is not usable from this torch, and what to do; None when there is
    no NVIDIA driver (really no GPU)."""
    if driver is None:
        return None
    supports = f", which supports CUDA up to {driver_cuda}" if driver_cuda else ""
    if torch_build(version, cuda) == "CPU-only build":
        base = version.split("+")[0]
        return (f"gpu-check: this machine has an NVIDIA driver ({driver}{supports}) but this Python's torch "
                f"{version} is a CPU-only build (torch.version.cuda is {cuda!r}); a pip configuration that "
                f"offers the +cpu wheels makes pip choose one. Install a CUDA build into it "
                f"(`{python} -m pip install --force-reinstall torch=={base} --index-url "
                f"https://download.pytorch.org/whl/cuXYZ`, cuXYZ a CUDA version the driver supports; see "
                f"{CUDA_TORCH_HELP}), or run the check with a Python that has one: "
                f"make gpu-check PY=/path/to/python.")
    return (f"gpu-check: torch {version} is a CUDA {cuda} build and this machine has an NVIDIA driver "
            f"({driver}{supports}), yet CUDA cannot start: the driver may be older than CUDA {cuda} needs, "
            f"or CUDA_VISIBLE_DEVICES hides the GPU; `nvidia-smi` shows what the driver sees.")


# --- the record, appended as it is measured ---------------------------------------------------

def cudnn_version(raw: int | None) -> str:
    """cuDNN's version number (90100 for 9.1.0, 8902 for 8.9.2) as text."""
    if not raw:
        return "none"
    if raw >= 90000:
        return f"{raw // 10000}.{raw % 10000 // 100}.{raw % 100}"
    return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"


def device_facts(gpu: bool) -> dict:
    """What the record starts with: device, capability, driver, CUDA, cuDNN, torch, load, date."""
    import torch

    from utils.bench.model import load_average

    facts = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "torch": torch.__version__,
             "torch_build": torch_build(torch.__version__, torch.version.cuda), "cuda": torch.version.cuda,
             "python": sys.version.split()[0], "load_average": load_average()}
    try:
        facts["cudnn"] = cudnn_version(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none"
    except Exception as err:  # noqa: BLE001 - a record with a note beats no record
        facts["cudnn"] = f"unknown ({type(err).__name__})"
    if gpu:
        facts["device"] = torch.cuda.get_device_name(0)
        facts["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        driver, driver_cuda = nvidia_driver()
        facts["driver"] = driver or "unknown (nvidia-smi did not run)"
        if driver_cuda:
            facts["driver_cuda"] = driver_cuda
    else:
        from course.detect import cpu_name
        facts["device"] = f"CPU: {cpu_name()} (rehearsal, no GPU)"
    return facts


FACT_KEYS = ("device", "compute_capability", "driver", "driver_cuda", "cuda", "cudnn", "torch", "torch_build",
             "python", "load_average")


def header(facts: dict) -> str:
    lines = [f"# Lesson 3 and the benchmark on {facts['device']}, {facts['date']}", "",
             "Written by `make gpu-check` (`python -m utils.bench.gpu_check`), each part as soon as it was "
             "measured.", "", "| | |", "|---|---|"]
    for key in FACT_KEYS:
        if key in facts:
            lines.append(f"| {key.replace('_', ' ')} | {facts[key]} |")
    return "\n".join(lines) + "\n\n"


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


NOTEBOOK_HEADING = "## Lesson 3, run top to bottom with the reference answers\n\n"


def cell_block(c: dict) -> str:
    if not c["text"] and not c["error"]:
        return ""
    seconds = "?" if c["seconds"] is None else f"{c['seconds']:.1f} s"
    body = (c["text"] or "") + ("\n" + c["error"] if c["error"] else "")
    return f"### cell {c['cell']} ({seconds})\n\n{_indented(body.strip())}\n"


def cells_summary(cells: list[dict]) -> str:
    failed = [c for c in cells if c["error"]]
    total = sum(c["seconds"] or 0 for c in cells)
    return (f"{len(cells)} code cells in {total:,.0f} s; "
            + (f"**{len(failed)} failed**: " + ", ".join(f"cell {c['cell']} ({c['error']})" for c in failed)
               if failed else "every cell ran.") + "\n\n")


BENCH_HEADING = "## `python -m utils.bench.model`\n\n"


def bench_end(rc: int, figures: dict | None) -> str:
    text = f"\nexit status {rc}\n\n"
    if figures:
        text += "Every figure (`--json`):\n\n```json\n" + json.dumps(figures, indent=1) + "\n```\n\n"
    return text


def render(facts: dict, cells: list[dict], bench_rc: int, bench_text: str, figures: dict | None) -> str:
    """The whole record at once, as markdown (what the run appends piece by piece)."""
    return (header(facts) + NOTEBOOK_HEADING + "".join(cell_block(c) for c in cells) + cells_summary(cells)
            + BENCH_HEADING + _indented(bench_text.strip()) + bench_end(bench_rc, figures))


class Record:
    """The record file, appended to and flushed to disk piece by piece."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def write(self, text: str) -> None:
        if not text:
            return
        self._file.write(text)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def record_path(facts: dict, when: time.struct_time | None = None) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", facts["device"].lower()).strip("-")[:40]
    return RECORDS / f"{time.strftime('%Y-%m-%d-%H%M', when or time.localtime())}-{slug}.md"


# --- running ----------------------------------------------------------------------------------

def _cell_result(number: int, cell) -> dict:
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
    return {"cell": number, "seconds": seconds, "text": shown, "error": error}


def run_notebook(path: Path, timeout_s: int, on_cell=None) -> list[dict]:
    """Execute the notebook in memory; one dict per code cell (number, seconds, text, error),
    each also handed to `on_cell` as soon as its cell has run."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    cells: list[dict] = []

    def executed(cell, cell_index, **_):
        if cell.cell_type == "code":
            cells.append(_cell_result(cell_index, cell))
            if on_cell is not None:
                on_cell(cells[-1])

    env_before = os.environ.pop("NBGRADER_EXECUTION", None)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(REPO)}}, record_timing=True,
                            on_cell_executed=executed)
    # The client runs on a thread of its own: on the main thread it would take SIGTERM for itself
    # (shut its kernel down and fail with an error of its own); here SIGTERM stays ours (_stop).
    failed: list[BaseException] = []

    def execute():
        try:
            client.execute()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            failed.append(err)

    worker = threading.Thread(target=execute, name="notebook", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except BaseException:
        _kill_kernel(client)   # the client then sees a dead kernel and ends
        worker.join(30)
        raise
    finally:
        if env_before is not None:
            os.environ["NBGRADER_EXECUTION"] = env_before
    if failed:
        raise failed[0]
    return cells


def _kill_kernel(client) -> None:
    process = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
    if process is not None:
        try:
            process.kill()
        except OSError:
            pass


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731 - a one-line parser used just below
    return (parse(end) - parse(start)).total_seconds()


def run_bench(gpu: bool, json_path: Path, on_line=None) -> tuple[int, str]:
    """Run utils.bench.model; every line it prints goes to `on_line` as soon as it is printed."""
    cmd = [sys.executable, "-m", "utils.bench.model", "--json", str(json_path)] + ([] if gpu else ["--device", "cpu"])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    lines = []
    with subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as proc:
        try:
            for line in proc.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            raise
    return rc, "".join(lines)


class Stopped(Exception):
    """The run received SIGTERM (a time limit)."""


_STOPPED_BY: list[str] = []


def _stop(signum, frame):
    """SIGTERM: stop where we are and write what happened. `timeout` sends it twice (to the
    process and to its group): only the first counts; SIGKILL (`timeout -k`) still ends at once."""
    if _STOPPED_BY:
        return
    _STOPPED_BY.append(signal.Signals(signum).name)
    raise Stopped(_STOPPED_BY[0])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="rehearse on the CPU when there is no GPU")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per notebook cell")
    parser.add_argument("--skip-notebook", action="store_true", help="only the benchmark")
    return parser.parse_args(argv)


def notebook_part(timeout_s: int, record: Record, cells: list[dict]) -> None:
    """Lesson 3 top to bottom; each cell's time printed and its block written as soon as it has
    run, and kept in `cells`."""
    print("running lesson 3 top to bottom with the reference answers ...", flush=True)
    record.write(NOTEBOOK_HEADING)

    def on_cell(c):
        cells.append(c)
        record.write(cell_block(c))
        print(f"  cell {c['cell']:3d}: {c['seconds'] or 0:7.1f} s" + (f"  FAILED {c['error']}" if c["error"] else ""),
              flush=True)

    run_notebook(NOTEBOOK, timeout_s, on_cell)
    record.write(cells_summary(cells))


def graph_part(gpu: bool, record: Record) -> bool:
    """Lesson 3's timing path, printed and written, then decode attention's bandwidth with each
    attention kernel beside matrix-vector products over as many bytes; True when a replayed pass
    differed from its eager one."""
    print("checking lesson 3's timing path (CUDA graphs) ...", flush=True)
    graphs = graph_check(None if gpu else "cpu")
    record.write(GRAPH_HEADING + graph_block(graphs))
    print(graph_block(graphs), end="", flush=True)
    print("decode attention's bandwidth, kernel by kernel ...", flush=True)
    attention = attention_check(None if gpu else "cpu")
    record.write(ATTENTION_HEADING + attention_block(attention))
    print(attention_block(attention), end="", flush=True)
    return not all(graphs["same"].values())


def bench_part(gpu: bool, record: Record) -> int:
    """The benchmark, each line printed and written as it comes, then its figures and the load
    average; its exit status."""
    from utils.bench.model import load_average

    print("running the benchmark ...", flush=True)
    record.write(BENCH_HEADING)
    json_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu-check-{os.getpid()}.json"

    def on_line(line):
        print(line, end="", flush=True)
        record.write(_indented(line))

    bench_rc, _ = run_bench(gpu, json_path, on_line)
    figures = json.loads(json_path.read_text()) if json_path.exists() else None
    json_path.unlink(missing_ok=True)
    record.write(bench_end(bench_rc, figures))
    record.write(f"Load average after the run: {load_average()}.\n")
    return bench_rc


def main(argv: list[str] | None = None) -> int:
    """The check (module docstring); exit status 0, 1 (a failure or a stop), 2 (no usable GPU) or 3
    (a package missing)."""
    args = parse_args(argv)
    missing = missing_packages()
    if missing:
        print(missing_message(missing), file=sys.stderr)
        return 3
    import torch

    gpu = torch.cuda.is_available()
    if not gpu and not args.cpu:
        print(NO_GPU, file=sys.stderr)
        advice = unusable_gpu_advice(torch.__version__, torch.version.cuda, *nvidia_driver())
        if advice:
            print(advice, file=sys.stderr)
        return 2
    facts = device_facts(gpu)
    print(f"gpu-check on {facts['device']} (torch {facts['torch']}, {facts['torch_build']}, cuDNN {facts['cudnn']}, "
          f"load {facts['load_average']})", flush=True)
    record = Record(record_path(facts))
    record.write(header(facts))
    print(f"record (written as it is measured): {_shown(record.path)}", flush=True)
    try:
        previous = signal.signal(signal.SIGTERM, _stop)
    except ValueError:   # not the main thread: a time limit's SIGTERM ends the run as it would anyway
        previous = None
    cells: list[dict] = []
    try:
        if not args.skip_notebook:
            notebook_part(args.timeout, record, cells)
        graph_failed = graph_part(gpu, record)
        bench_rc = bench_part(gpu, record)
    except BaseException as err:
        if not (_STOPPED_BY or isinstance(err, (Stopped, KeyboardInterrupt))):
            record.write(f"\n\n**The run failed before its end** ({type(err).__name__}: {err}); everything above "
                         f"was measured before that.\n")
            raise
        why = _STOPPED_BY[0] if _STOPPED_BY else (str(err) or type(err).__name__)
        _STOPPED_BY.clear()
        record.write(f"\n\n**The run was stopped ({why}) before its end**; everything above "
                     f"was measured before that.\n")
        print(f"gpu-check stopped; what was measured is in {_shown(record.path)}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        record.close()
    print(f"record written: {_shown(record.path)}")
    return 1 if (bench_rc != 0 or graph_failed or any(c["error"] for c in cells)) else 0


if __name__ == "__main__":
    sys.exit(main())
