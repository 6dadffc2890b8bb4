"""Rendering a student's text has a time limit. One Markdown cell far under the size limit (a LaTeX
environment opened many thousand times) keeps nbconvert's math pattern busy for hours; a page
that cannot be rendered in time is replaced, and nobody waits on it.

    c.RenderDeadline.seconds = 30     # nbgrader_config.py: seconds one page may take (0: no limit)

`RenderDeadline` (an exporter preprocessor, set by safe_html.configure_html for every HTML export
the course's config reaches: the feedback and the formgrader's view of a submission) starts the
page's clock. Each Markdown cell is rendered (safe_html.SafeMarkdown) under what is left of it; a
cell that runs out, and every Markdown cell after it, shows a one-line notice instead, and the page
is marked. The feedback's exporter (`TimedHTMLExporter`, GenerateFeedback.exporter_class) renders
the whole page under the limit too, and gives a marked or unfinished page as a plain page saying
so: the grade is recorded as usual. The clock is SIGALRM's: in the main thread of the process that
renders (the grading child, the formgrader's server); elsewhere pages render without it.
"""

from __future__ import annotations

import contextlib
import html
import signal
import threading
import time

from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from traitlets import Float

DEADLINE, TIMED_OUT = "render_deadline", "render_timed_out"   # keys in the export's resources
DEFAULT_SECONDS = 30.0


class RenderTimeout(BaseException):
    """The page's time ran out (a BaseException: no library's `except Exception` keeps it)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise RenderTimeout in the block after `seconds` (None or 0: no limit; off the main thread:
    none either). An enclosing limit still fires at its own time."""
    if not seconds or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:   # the enclosing limit comes first: it alone applies
        yield
        return

    def expired(signum, frame):
        raise RenderTimeout(seconds)

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 0.001))


def notice(seconds: float) -> str:
    return (f"<p><em>This text was not rendered: laying it out took longer than the {seconds:g} s a page "
            f"may take.</em></p>")


def render_markdown(render, resources, source: str) -> str:
    """`render(source)` under what is left of the page's time (`resources` from RenderDeadline);
    a notice, and the page marked, once it has run out."""
    deadline = resources.get(DEADLINE) if hasattr(resources, "get") else None
    if deadline is None:
        return render(source)
    end, seconds = deadline
    left = end - time.monotonic()
    if resources.get(TIMED_OUT) or left <= 0:
        resources[TIMED_OUT] = True
        return notice(seconds)
    try:
        with time_limit(left):
            return render(source)
    except RenderTimeout:
        resources[TIMED_OUT] = True
        return notice(seconds)


class RenderDeadline(Preprocessor):
    """Starts the page's clock: what the exporter's Markdown rendering may spend."""

    seconds = Float(DEFAULT_SECONDS, help="Seconds one page of a student's notebook may take to render to "
                                          "HTML (feedback, formgrader); 0: no limit").tag(config=True)

    def preprocess(self, nb, resources):
        if self.seconds > 0:
            resources[DEADLINE] = (time.monotonic() + self.seconds, self.seconds)
        return nb, resources


def plain_page(seconds: float) -> str:
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Feedback</title></head><body>\n"
            f"<p>{html.escape(f'This page could not be rendered within {seconds:g} s: the notebook holds text that takes too long to lay out.')}</p>\n"
            "<p>The notebook was graded and its score recorded as usual; ask your instructor for its graded copy.</p>\n"
            "</body></html>\n")


class TimedHTMLExporter(HTMLExporter):
    """nbconvert's HTMLExporter whose page, when it cannot be rendered within RenderDeadline's
    seconds, is a plain page saying so."""

    def from_notebook_node(self, nb, resources=None, **kw):
        seconds = RenderDeadline(parent=self).seconds
        try:
            with time_limit(seconds + 1 if seconds > 0 else None):   # the Markdown's own clock comes first
                output, resources = super().from_notebook_node(nb, resources, **kw)
        except RenderTimeout:
            self.log.warning("a page was not rendered within %g s; a plain page stands in for it", seconds)
            return plain_page(seconds), resources if resources is not None else {}
        if resources.get(TIMED_OUT):
            self.log.warning("a page's text was not rendered within %g s; a plain page stands in for it", seconds)
            return plain_page(seconds), resources
        return output, resources
