"""Rendering a student's text has a time limit (utils/grading/steps/render_limit.py): a Markdown
cell that keeps nbconvert's math pattern busy for hours costs its page a few seconds, no more."""

from __future__ import annotations

import time

import nbformat
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from utils.grading.steps.render_limit import TimedHTMLExporter, plain_page
from utils.grading.steps.safe_html import configure_html

# far under the per-cell size limit (well_formed.MAX_TEXT); rendering it takes hours
SLOW_MARKDOWN = "\\begin{x}" * 60_000


def _config(seconds: float) -> Config:
    c = Config()
    configure_html(c)
    c.RenderDeadline.seconds = seconds
    return c


def _notebook(*markdown: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(m) for m in markdown]
    return nb


def test_a_page_that_cannot_be_rendered_in_time_is_a_plain_page_saying_so():
    start = time.monotonic()
    page, _ = TimedHTMLExporter(config=_config(1.0)).from_notebook_node(_notebook("# Fair heading", SLOW_MARKDOWN))
    assert time.monotonic() - start < 15
    assert page == plain_page(1.0)
    assert "could not be rendered within 1 s" in page


def test_a_fair_page_renders_as_before_under_the_limit():
    page, _ = TimedHTMLExporter(config=_config(30.0)).from_notebook_node(_notebook("# Fair heading", "$x^2$"))
    assert ">Fair heading<" in page and "could not be rendered" not in page and "not rendered" not in page


def test_any_html_export_of_the_course_shows_a_notice_for_text_past_the_limit():
    """The formgrader's exporter (plain HTMLExporter with the course's config): the slow cell, and
    any Markdown after it, is a one-line notice; the cell before it is rendered."""
    start = time.monotonic()
    page, resources = HTMLExporter(config=_config(1.0)).from_notebook_node(
        _notebook("# Fair heading", SLOW_MARKDOWN, "## After"))
    assert time.monotonic() - start < 15
    assert ">Fair heading<" in page
    assert page.count("This text was not rendered") == 2
    assert resources["render_timed_out"] is True
