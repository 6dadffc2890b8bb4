"""Student-controlled text reaches the instructor's terminal and logs only escaped
(utils/escaping.py): each door is fed a line that would erase the line before it and print a
forged one, and nothing it prints holds a raw control character. The last test finds the doors: in
the modules that print what students sent, every print, log call and write to stderr passes its
text through the helper, or is listed here with the reason its text is the instructor's own."""

from __future__ import annotations

import ast
import io
import logging
import os
import zipfile
from pathlib import Path

import pytest

from helpers import zip_of

from utils.escaping import escaped, has_control

FORGED = "\r\x1b[2K\x1b[1A FORGED: all 40 submissions graded\u202e\u2028\x85\x7f"   # no NUL: no file name holds one
LESSON, NB = "01_tiny", "tiny.ipynb"
REPO = Path(__file__).resolve().parents[1]


def _clean(text: str, what: str) -> None:
    bad = sorted({repr(c) for c in text if not c.isprintable() and c != "\n"})
    assert not bad, f"{what} let {', '.join(bad)} through: {text!r}"
    assert "FORGED" in text or not text, f"{what} printed nothing of the student's text: {text!r}"


def test_the_helper_escapes_every_kind_of_control_and_is_idempotent():
    for c in ("\r", "\x1b", "\x07", "\x00", "\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u200f", "\u2028",
              "\u2029", "\t", "\ufeff", "\ud800"):
        assert not has_control(escaped(f"a{c}b")), repr(c)
    once = escaped(FORGED)
    assert escaped(once) == once and "\n" not in escaped("a\nb")
    assert escaped("a\r\nb", keep_newlines=True) == "a\\r\nb"


def test_the_kernels_own_output_is_forwarded_escaped(capsys):
    """What the kernel writes to its own stdout, forwarded to the grader's stderr behind a mark."""
    from utils.sandbox.kernel_processes import KERNEL_LINE, forward_output
    r, w = os.pipe()
    data = f"ok\n{FORGED}\nla\u00e9st".encode()
    os.write(w, data[:-2])   # a character split between two reads
    os.write(w, data[-2:])
    os.close(w)
    forward_output(io.open(r, "rb"), 10_000)
    err = capsys.readouterr().err
    _clean(err, "forward_output")
    assert all(line.startswith(KERNEL_LINE) for line in err.splitlines()) and "la\u00e9st" in err


def test_collects_refused_lines_are_escaped(tmp_path):
    """An inbound folder whose unchecked part (after the timestamp) and whose files are named to
    forge lines: collect's log, its refused/LESSON.txt and what `collect` prints."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from utils.classroom.collect import OwnerCheckedCollect, print_refused
    root = tmp_path / "course"
    (root / "release" / LESSON).mkdir(parents=True)
    (root / "release" / LESSON / NB).write_text("{}")
    inbound = tmp_path / "inbound"
    name = f"alice+{LESSON}+2026-12-01 10:00:00.000000 UTC+{FORGED}"
    sub = inbound / name
    sub.mkdir(parents=True)
    (sub / NB).write_text("{}")
    (sub / f"notes{FORGED}.py").write_text("")
    os.symlink("/etc/passwd", sub / f"link{FORGED}")
    cfg = Config()
    cfg.OwnerCheckedCollect.check_owner = False
    coursedir = CourseDirectory(root=str(root), course_id="c", assignment_id=LESSON, config=cfg)
    c = OwnerCheckedCollect(coursedir=coursedir, config=cfg)
    c.inbound_path = str(inbound)
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    c.log.addHandler(handler)
    try:
        c._record(str(inbound / f"x+{LESSON}{FORGED}"))   # a name that is not a submission's
        c.src_records = [{"username": "alice", "filename": name, "timestamp": None}]
        c.copy_files()
    finally:
        c.log.removeHandler(handler)
    log = "\n".join(lines)
    assert log.count("REFUSED") >= 2, log
    for line in lines:
        _clean(line, "collect's log")
    _clean((root / "refused" / f"{LESSON}.txt").read_text(), "refused/LESSON.txt")
    out = io.StringIO()
    from contextlib import redirect_stdout
    with redirect_stdout(out):
        print_refused(f"[CollectApp | WARNING] REFUSED {name}: {FORGED}\n")
    _clean(out.getvalue(), "collect's printed lines")


def test_the_lms_import_prints_entry_names_escaped(tmp_path, capsys):
    from utils.classroom.lms_import import zip_collect
    root = tmp_path / "course"
    (root / "release" / LESSON).mkdir(parents=True)
    (root / "release" / LESSON / NB).write_text("{}")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(f"{FORGED}.ipynb", "{}")
        z.writestr(f"../{FORGED}", "")
    lms = tmp_path / "submissions.zip"
    with zipfile.ZipFile(lms, "w") as z:
        z.writestr(f"{FORGED}.ipynb", "{}")                               # matches no pattern
        z.writestr(f"x{FORGED}_1_2_tiny.ipynb", "{}")                     # an id refused
        z.writestr("mallory_1_2_upload.zip", inner.getvalue())            # a student refused
        z.writestr("carol_1_2_upload.zip", zip_of({NB: "{}", f"{FORGED}.txt": ""}))   # left out
    assert zip_collect(root, LESSON, [lms]) == ["carol"]
    out = capsys.readouterr().out
    assert "refused mallory" in out and "did not match" in out and "left out" in out, out
    _clean(out, "zip-collect")
    _clean((root / "refused" / f"{LESSON}.txt").read_text(), "refused/LESSON.txt")



def test_the_sandbox_launcher_names_what_it_left_out_quoted(tmp_path):
    """The launcher (inside the sandbox, standard library only) names the submission's files it
    did not copy; its line reaches the grader through forward_output, and is quoted on its own."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("launch", REPO / "utils" / "sandbox" / "launch.py")
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    os.symlink("/etc/passwd", src / FORGED)
    copier = launch.Copier(str(src), 1 << 20, 1 << 20)
    copier.tree(str(src), str(dest))
    _clean(", ".join(copier.left), "the launcher's list of what it left out")


@pytest.mark.parametrize("cli", ["term", "grading"])
def test_the_tools_error_and_problem_lines_are_escaped(cli, monkeypatch, capsys):
    """A ToolError quoting a log (nbgrader's, with a kernel's text in it) and grading's problem
    lines, as the command-line tools print them."""
    from utils.errors import ToolError
    from utils.processes import log_tail
    if cli == "term":
        from utils.classroom import term
        monkeypatch.setattr(term, "release", lambda *a: (_ for _ in ()).throw(ToolError(f"log:\n{FORGED}")))
        assert term.main(["release", LESSON]) == 1
    else:
        from utils.grading import cli as grading_cli
        monkeypatch.setattr(grading_cli, "grade", lambda *a, **k: ("table", [f"{LESSON}: {FORGED}"]))
        assert grading_cli.main([LESSON]) == 1
        monkeypatch.setattr(grading_cli, "grade", lambda *a, **k: (_ for _ in ()).throw(ToolError(FORGED)))
        assert grading_cli.main([LESSON]) == 1
    captured = capsys.readouterr()
    _clean(captured.out + captured.err, f"{cli}'s command line")
    _clean(log_tail(f"one\n{FORGED}\n"), "log_tail")


# --- the doors, found -----------------------------------------------------------------------------
# Modules that print or log what a student sent (names of uploads, files and folders, a kernel's
# output, logs that quote them). Every print(), .write() to a stream, and log call in them passes
# its text through escaped()/shown(), or is a constant, or is listed below with why its text is not
# a student's.
DOORS = ["utils/classroom/collect.py", "utils/classroom/lms_import.py", "utils/classroom/term.py",
         "utils/sandbox/kernel_processes.py", "utils/grading/cli.py", "utils/processes.py"]
INSTRUCTORS_OWN = {   # (module, the call's first words): why it needs no escaping
    ("utils/classroom/term.py", 'print(f"imported {len(ids)} student(s) from'): "a count and the roster file the instructor named",
    ("utils/classroom/term.py", 'print(f"released'): "the lesson the instructor named and its release/ notebooks",
    ("utils/classroom/term.py", 'print(f"{args.lesson}: {len(files)}'): "a count and the instructor's lesson",
    ("utils/classroom/term.py", 'print(f"rehearsal course in'): "the folder the instructor named",
    ("utils/classroom/term.py", "print(f\"{args.lesson}: {len(students)}"): "ids passed through shown()",
    ("utils/grading/cli.py", "print(table)"): "score_table writes every name with shown()",
}
SAFE_CALLS = {"escaped", "shown"}


def _printing(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id == "print"
    if isinstance(f, ast.Attribute):
        if f.attr == "write" and isinstance(f.value, ast.Attribute) and f.value.attr in ("stderr", "stdout"):
            return True
        return f.attr in ("warning", "info", "error", "debug", "critical") and "log" in ast.unparse(f.value)
    return False


def _safe(arg: ast.expr) -> bool:
    if isinstance(arg, ast.Constant):
        return True
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in SAFE_CALLS:
        return True
    return False


def test_every_door_passes_student_text_through_the_helper():
    unsafe = []
    for rel in DOORS:
        source = (REPO / rel).read_text()
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.Call) and _printing(node)):
                continue
            text = ast.get_source_segment(source, node)
            if any(rel == m and text.startswith(words) for m, words in INSTRUCTORS_OWN):
                continue
            if node.args and not all(_safe(a) for a in node.args[:1]):
                unsafe.append(f"{rel}:{node.lineno}: {text.splitlines()[0]}")
            # the marked kernel line is built from escaped() text just before it is written
            if rel == "utils/sandbox/kernel_processes.py" and text.startswith("sys.stderr.write(marked)"):
                unsafe.remove(f"{rel}:{node.lineno}: {text.splitlines()[0]}")
    assert not unsafe, "printed or logged without utils.escaping:\n" + "\n".join(unsafe)
