"""Student Markdown and outputs never run in the instructor's (or a student's) browser.

nbgrader renders a submission to HTML in two places, both through nbconvert's HTMLExporter with the
course's config: the feedback (GenerateFeedback, template 'feedback') and the formgrader's view of a
submission (template 'formgrade'). nbconvert's `sanitize_html` option cleans outputs (text/html,
SVG, Markdown outputs; JavaScript and widget outputs are not rendered at all), but nbgrader's two
templates render Markdown cells with a block of their own that ignores it, so a `<script>` in a
student's Markdown cell ran in the formgrader with the instructor's session.

`configure_html(c)` (called by `utils.grading.pipeline.install`) turns `sanitize_html` on and replaces two of
the exporter's Jinja filters, in every template: `markdown2html` (nbconvert's rendering, then
`safe_html`, each page under a time limit: render_limit.py) and `clean_html` (`safe_html` instead of nbconvert's, which escapes even <p> and <h1>).
`safe_html` keeps an allowlist of tags for text, tables and images; attributes `class`, `id`,
`title`, `alt`, `align`, and `href`/`src` with http(s), mailto or in-page links (images also
`data:image/...` of PNG, JPEG or GIF). No script, style, iframe, form, event handler, `style`
attribute, SVG or javascript:/data: link survives: a tag not allowed is dropped (a script or
style with its content; any other keeps its text), an attribute not allowed is dropped (nh3, the
Rust ammonia cleaner).

nbgrader's formgrade template also prints the names it is given (the student id, the student's
names, the notebook's path, inside a `data-link` attribute too) without escaping them. The course's
doors refuse an id that is not plain (utils/grading/student_id.py); as a second guard, `EscapedNames`
(an exporter preprocessor, also set by `configure_html`) HTML-escapes those names in the resources
before any template renders them, so that a name reaching the gradebook some other way (plain
`nbgrader autograde`, a hand-made gradebook) shows as text.
"""

from __future__ import annotations

import re

import nh3

from utils.grading.steps.render_limit import render_markdown

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p", "pre", "q",
    "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot",
    "th", "thead", "tr", "u", "ul", "var",
})
COMMON = ("class", "id", "title")
_LINK = re.compile(r"(https?:|mailto:|#)", re.IGNORECASE)
_IMAGE = re.compile(r"(https?:|data:image/(png|jpeg|gif);base64,)", re.IGNORECASE)


def _attribute(tag: str, name: str, value: str) -> bool:
    if name in COMMON:
        return True
    if tag == "a" and name == "href":
        return bool(_LINK.match(value.strip()))
    if tag == "img" and name == "src":
        return bool(_IMAGE.match(value.strip()))
    if tag == "img" and name in ("alt", "width", "height"):
        return True
    return tag in ("td", "th") and name in ("align", "colspan", "rowspan")


# every attribute _attribute may keep, by tag ("*": any allowed tag); _attribute then judges its value
ATTRIBUTES = {"*": set(COMMON), "a": {"href"}, "img": {"src", "alt", "width", "height"},
              "td": {"align", "colspan", "rowspan"}, "th": {"align", "colspan", "rowspan"}}
DROPPED_WITH_CONTENT = {"script", "style"}   # their text is code, not prose: nothing of them is shown


def _kept_value(tag: str, name: str, value: str) -> str | None:
    return value if _attribute(tag, name, value) else None


def safe_html(html) -> str:
    """`html` with only the allowed tags and attributes: any other tag is dropped (a script or
    style with its content, the others keeping their text), so nothing of it runs."""
    text = html.decode() if isinstance(html, bytes) else str(html)
    return nh3.clean(text, tags=set(TAGS), clean_content_tags=DROPPED_WITH_CONTENT, attributes=ATTRIBUTES,
                     attribute_filter=_kept_value, url_schemes={"http", "https", "mailto", "data"},
                     strip_comments=True, link_rel=None)


_ATTACHMENT = re.compile(r"(?<![\w-])attachment:([^\s)\"'>]+)")
MISSING = "missing-attachment:"   # no scheme the cleaner keeps: the image's alt text is shown


def without_missing_attachments(source: str, attachments) -> str:
    """`source` with every reference to an attachment the cell does not hold made a dead link:
    nbconvert stops the whole page at one (`missing attachment`), and WellFormed drops the
    attachments that are not images it keeps."""
    names = attachments if isinstance(attachments, dict) else {}
    return _ATTACHMENT.sub(lambda m: m.group(0) if m.group(1) in names else MISSING + m.group(1), source)


class SafeMarkdown:
    """The exporter's markdown2html filter (attachments, anchors, math as nbconvert renders them),
    its HTML then cleaned by `safe_html`; a reference to an attachment the cell does not hold shows
    the image's alt text."""

    def __init__(self, exporter):
        self.exporter = exporter

    def __call__(self, context, source):
        resources = context.get("resources", {}) if hasattr(context, "get") else {}
        return render_markdown(lambda text: self._render(context, text), resources, source)

    def _render(self, context, source):
        from nbconvert.exporters import HTMLExporter
        from nbconvert.filters.markdown_mistune import InvalidNotebook

        exporter = self.exporter if isinstance(self.exporter, HTMLExporter) else HTMLExporter()
        cell = context.get("cell", {}) if hasattr(context, "get") else {}
        source = without_missing_attachments(source, cell.get("attachments") if hasattr(cell, "get") else None)
        try:
            return safe_html(HTMLExporter.markdown2html(exporter, context, source))
        except InvalidNotebook:   # an attachment named in a way the rewrite missed: no attachment at all
            return safe_html(HTMLExporter.markdown2html(exporter, context, source.replace("attachment:", MISSING)))


def _context_filter():
    """A Jinja filter class given the exporter (nbconvert constructs configurable filters with
    parent=exporter) and the template's context."""
    from jinja2 import pass_context
    from traitlets.config import LoggingConfigurable

    class SafeMarkdown2HTML(LoggingConfigurable):
        # Jinja reads this on the filter object itself: the template's context comes first
        jinja_pass_arg = pass_context(lambda: None).jinja_pass_arg

        def __call__(self, context, source):
            return SafeMarkdown(self.parent)(context, source)

    return SafeMarkdown2HTML


def _escaped_names():
    from markupsafe import escape
    from nbconvert.preprocessors import Preprocessor

    class EscapedNames(Preprocessor):
        """The names nbgrader's formgrader puts in an export's resources, HTML-escaped: its
        template prints them as they are."""

        names = ("student", "first_name", "last_name", "notebook_path", "notebook_id", "assignment_id")

        def preprocess(self, nb, resources):
            for key in self.names:
                if isinstance(resources.get(key), str):
                    resources[key] = str(escape(resources[key]))
            return nb, resources

    return EscapedNames


def configure_html(c) -> None:
    """Sanitised HTML, and escaped names, in every nbconvert HTML export the course's config reaches."""
    c.HTMLExporter.sanitize_html = True
    c.HTMLExporter.preprocessors = ["utils.grading.steps.safe_html.EscapedNames",
                                    "utils.grading.steps.render_limit.RenderDeadline"]
    # each page of a student's notebook renders under a time limit (render_limit.py)
    c.GenerateFeedback.exporter_class = "utils.grading.steps.render_limit.TimedHTMLExporter"
    c.HTMLExporter.filters = {"markdown2html": "utils.grading.steps.safe_html.SafeMarkdown2HTML",
                              "clean_html": "utils.grading.steps.safe_html.safe_html"}


SafeMarkdown2HTML = _context_filter()
EscapedNames = _escaped_names()
