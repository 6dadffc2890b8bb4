"""A student's `raise NotImplementedError()` stub, said in one line that names the function to
write: what ``course.checks.checking`` reports for a stub inside a check, and what the notebook's
own NotImplementedError (``Stub``, put in its namespace by name_stubs when course.checks is
imported) shows anywhere else. No IPython handler or hook is installed, and library code keeps the
builtin."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from course.formatting import short_lines


def not_written_message(function: str | None, title: str | None = None) -> str:
    """What a `raise NotImplementedError()` stub says: which function to write, first."""
    where = f"[{title}] " if title else ""
    if function is None:  # the stub sits at the top level of the cell that ran: an answer cell
        return (f"this cell is not answered yet: write your answer here"
                f"\n{where}in place of `raise NotImplementedError()`, then run this cell")
    return (f"`{function}` is not written yet"
            f"\n{where}write it in its cell above, in place of `raise NotImplementedError()`, "
            f"then run that cell and this one")


class Stub(NotImplementedError):
    """What `raise NotImplementedError()` raises in a lesson's own cells: name_stubs() puts this
    name in the notebook's namespace (and nowhere else: the library code keeps the builtin, and
    no IPython handler or hook is installed). A stub left in a student's function is shown as one
    line naming the function to write, wherever the function is called from; any other
    NotImplementedError (one with a message, or raised in a library) keeps its usual traceback."""

    @property
    def _render_traceback_(self):
        tb = self.__traceback__
        if not is_stub(self, tb):
            raise AttributeError("_render_traceback_")  # IPython then formats the usual traceback
        first = not_written_message(raising_function(tb)).split("\n")[0]
        return lambda: short_lines(f"NotImplementedError: {first}")


Stub.__name__ = "NotImplementedError"  # as the cell's error and the grader name it (pickle keeps the qualname, Stub)


def name_stubs(shell: Any = None) -> bool:
    """Give the running notebook (IPython's user namespace) Stub as NotImplementedError; False
    outside IPython. Called once when this module is imported (every lesson's setup cell)."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    shell.user_ns.setdefault("NotImplementedError", Stub)
    return True


_LIBRARY_PATHS = ("site-packages", "dist-packages", str(Path(__file__).parent))


def is_stub(err: BaseException, tb) -> bool:
    """A student's `raise NotImplementedError()` stub: no message, raised in the student's own
    code, not in a library (torch raises NotImplementedError, with a message, for an operation a
    backend lacks) nor in this package."""
    if not isinstance(err, NotImplementedError) or str(err):
        return False
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename if tb is not None else ""
    return not any(part in filename for part in _LIBRARY_PATHS)


def raising_function(tb) -> str | None:
    """Name of the function that raised, if it is a function (not a cell's top level)."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    name = tb.tb_frame.f_code.co_name if tb is not None else None
    return name if name and not name.startswith("<") else None
