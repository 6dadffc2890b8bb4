"""The HTML cleaner of feedback pages: nothing that runs, text, tables, links and images kept
(tests/steps_common.py says how these tests are built)."""

from __future__ import annotations

import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from utils.grading.steps.safe_html import SafeMarkdown, configure_html, safe_html


# A tag not allowed is dropped: a script or style with its content, any other keeping its text (which
# is escaped, so markup inside a <noscript> or <textarea> is shown, never parsed).
@pytest.mark.parametrize("hostile, left", [
    ("<script>alert(1)</script>", ""),
    ("<style>body{display:none}</style>", ""),
    ("<img src=x onerror=\"alert(1)\">", "<img>"),
    ("<img src=\"https://x.org/a.png\" onload=\"y()\">", "<img src=\"https://x.org/a.png\">"),
    ("<p onclick=\"alert(1)\" style=\"position:fixed\">x</p>", "<p>x</p>"),
    ("<a href=\"javascript:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\" JaVaScRiPt:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\"java&#x09;script:alert(1)\">x</a>", "<a>x</a>"),
    ("<a href=\"data:text/html,<script>\">x</a>", "<a>x</a>"),
    ("<img src=\"data:image/svg+xml;base64,PHN2Zz4=\">", "<img>"),
    ("<iframe src=\"https://example.org\"></iframe>", ""),
    ("<svg onload=\"alert(1)\"></svg>", ""),
    ("<svg><script>alert(1)</script></svg>", ""),
    ("<form action=\"https://example.org\"><input></form>", ""),
    ("<marquee onstart=\"alert(1)\">moving <b>text</b></marquee>", "moving <b>text</b>"),
    ("<noscript><p>hi</p></noscript>", "&lt;p&gt;hi&lt;/p&gt;"),
    ("<textarea><script>x</script></textarea>", "&lt;script&gt;x&lt;/script&gt;"),
    ("<!-- <script>x</script> -->", ""),
    (b"<script>x</script>", ""),
    ("a < b and c > d", "a &lt; b and c &gt; d"),
])
def test_safe_html_leaves_nothing_that_runs(hostile, left):
    assert safe_html(hostile) == left


@pytest.mark.parametrize("kept", [
    "<h1 id=\"t\">Title</h1>", "<p class=\"note\" title=\"t\"><strong>b</strong> <em>i</em> <code>c</code></p>",
    "<a href=\"https://example.org/x\">l</a>", "<a href=\"mailto:a@b.org\">m</a>", "<a href=\"#section\">s</a>",
    "<img alt=\"fig\" src=\"data:image/png;base64,iVBORw0KGgo=\">",
    "<table><tbody><tr><td align=\"right\" colspan=\"2\">1</td></tr></tbody></table>",
    "<details><summary>more</summary>text</details>",
])
def test_safe_html_keeps_text_tables_links_and_images(kept):
    assert safe_html(kept) == kept


def test_the_markdown_filter_renders_then_cleans():
    html = SafeMarkdown(HTMLExporter())({}, "# Title\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1))")
    assert "<strong>bold</strong>" in html and "<h1" in html
    assert "<script" not in html and "javascript:" not in html


def test_configure_html_sanitises_and_replaces_both_filters():
    c = Config()
    configure_html(c)
    assert c.HTMLExporter.sanitize_html is True
    assert c.HTMLExporter.filters == {"markdown2html": "utils.grading.steps.safe_html.SafeMarkdown2HTML",
                                      "clean_html": "utils.grading.steps.safe_html.safe_html"}


def test_a_reference_to_an_attachment_the_cell_lacks_is_a_dead_link_and_the_others_are_kept():
    from utils.grading.steps.safe_html import without_missing_attachments

    source = "![a](attachment:kept.png) ![b](attachment:gone.svg) an attachment: in prose [c]: attachment:gone2.png"
    assert without_missing_attachments(source, {"kept.png": {}}) == (
        "![a](attachment:kept.png) ![b](missing-attachment:gone.svg) an attachment: in prose "
        "[c]: missing-attachment:gone2.png")


@pytest.mark.parametrize("template", ["feedback", "formgrade"])
def test_a_pasted_png_jpeg_or_svg_gives_a_whole_page_with_no_script(template):
    """nbgrader's two templates through the course's HTML configuration, on a notebook WellFormed
    kept: the PNG and the JPEG shown, the SVG (onload and <script> in it) dropped, its alt text shown."""
    import os

    import nbgrader.server_extensions.formgrader.handlers as formgrader
    from nbformat.notebooknode import from_dict

    from steps_common import JPEG, PNG, SVG
    from utils.grading.steps.well_formed import well_formed

    nb = well_formed(from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{
        "cell_type": "markdown", "metadata": {},
        "source": "![png](attachment:image.png) ![jpeg](attachment:photo.jpg) ![svg drawing](attachment:drawing.svg)",
        "attachments": {"image.png": {"image/png": PNG}, "photo.jpg": {"image/jpeg": JPEG},
                        "drawing.svg": {"image/svg+xml": SVG}}}]}))
    c = Config()
    configure_html(c)
    c.HTMLExporter.template_name = template
    c.HTMLExporter.extra_template_basedirs = [os.path.dirname(formgrader.__file__) + "/templates"]
    # as nbgrader's GenerateFeedback sets it: the page inlines bootstrap's CSS
    c.HTMLExporter.extra_template_paths = [os.path.dirname(formgrader.__file__) + "/static/node_modules/bootstrap/dist/css"]
    html, _ = HTMLExporter(config=c).from_notebook_node(nb, resources={
        "base_url": "", "index": 0, "total": 1,   # what the formgrader gives, then what GenerateFeedback does
        "nbgrader": {"notebook": "tiny", "score": 0, "max_score": 0, "late_penalty": 0}})
    assert f"data:image/png;base64,{PNG}" in html and f"data:image/jpeg;base64,{JPEG}" in html
    assert SVG not in html and "alert(" not in html and 'alt="svg drawing"' in html
