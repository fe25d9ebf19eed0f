"""Feedback pages that carry no live student markup and stay small.

Three layers (configured in nbgrader_config.py):
1. `SafeOutputs` shows only the test cells' outputs (the verdicts; what student code printed while
   graded stays off the page), only inert output types (text, images, HTML/markdown), and caps what a
   notebook's cells may put on the page, so a page stays under `MAX_PAGE_BYTES`;
2. nbconvert's own sanitising (`HTMLExporter.sanitize_html`) and `SafeHTMLExporter` clean every
   rendered markdown cell and HTML output with `clean_html` below (bleach with an allow-list: no scripts, no event handlers,
   no style, images only from data: URLs);
3. `finish_page` (called by the exporter itself, on every path, once per page) gives every page its
   notes banner and a Content-Security-Policy that forbids scripts (so MathJax does not run either:
   formulas show as TeX source) and any request off the page.
"""
import html
import json
import re
from collections import OrderedDict

import bleach
import nbformat
from bleach.css_sanitizer import CSSSanitizer
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool, Dict, Integer

from autograder.notes import stored_in
from autograder.page_policy import CSP_META

MAX_PAGE_BYTES = 2_000_000
REMEMBERED_CHARS = 50_000_000  # sources and renders an exporter keeps for its later pages
INERT_MIME = {"text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg"}
TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "samp",
        "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
        "u", "ul", "var"}
def _image_attribute(tag, name, value):
    """An image keeps its size and alt text, and its source only when the picture is in the page."""
    return name in ("alt", "width", "height") or (name == "src" and value.strip().lower().startswith("data:image/"))


# the classes nbconvert's markdown renderer gives (pygments' short token names, code blocks, heading anchors):
# the page's stylesheet has positioned classes (a modal backdrop, a fixed navbar) a student must not borrow
# to lay a forged banner over the page; ids the stylesheet styles are the page's own
RENDERER_CLASS = re.compile(r"[a-z][a-z0-9]{0,2}|highlight|hl-[a-z0-9]+|anchor-link")
PAGE_IDS = {"notebook", "notebook-container"}


def _any_attribute(tag, name, value):
    if name == "class":
        return all(RENDERER_CLASS.fullmatch(token) for token in value.split())
    if name == "id":
        return value not in PAGE_IDS
    return name == "title"


LINK_SCHEMES = {"http", "https", "mailto"}


def _link_attribute(tag, name, value):
    """A link goes to a page (http, https, mailto, or one of this page's anchors): read as a browser reads it
    (entities decoded, tabs, newlines and control characters dropped), never to data:, javascript: or the like."""
    if name != "href":
        return _any_attribute(tag, name, value)
    url = re.sub(r"[\x00-\x20\x7f]", "", html.unescape(value)).lower()
    scheme = re.match(r"([a-z][a-z0-9+.\-]*):", url)
    return scheme is None or scheme.group(1) in LINK_SCHEMES


ATTRIBUTES = {"*": _any_attribute, "a": _link_attribute, "img": _image_attribute,
              "td": ["align", "colspan", "rowspan"], "th": ["align", "colspan", "rowspan"]}
_cleaner = bleach.Cleaner(tags=TAGS, attributes=ATTRIBUTES, protocols={"http", "https", "mailto", "data"},
                          strip=False, strip_comments=True, css_sanitizer=CSSSanitizer(allowed_css_properties=[]))


def clean_html(element):
    """nbconvert's `clean_html` filter with this course's allow-list (markdown tables, headings, images)."""
    text = element.decode() if isinstance(element, bytes) else str(element)
    return _cleaner.clean(text)


class SafeHTMLExporter(HTMLExporter):
    """HTML export whose rendered markdown is always cleaned: nbgrader's feedback template renders
    graded (written-answer) cells with `markdown2html` alone, outside nbconvert's sanitising. Every
    page it writes is finished here: the notes the chain stored in the notebook and the grading
    command's own, the CSP, the size cap."""

    more_notes = Dict(help="{notebook: notes} the grading command found outside the notebook (its folder, the "
                      "other notebooks), shown after the chain's own; plain nbgrader has none.").tag(config=True)

    def __init__(self, **kw):
        super().__init__(**kw)
        self._made, self._made_chars = OrderedDict(), 0  # _remembered's calls and their size

    def from_notebook_node(self, nb, resources=None, **kw):
        name = ((resources or {}).get("metadata") or {}).get("name")
        # HTMLExporter's own, less its last step: a BeautifulSoup pass (half the export's time) that marks
        # JupyterLab-template cells focusable (nbgrader's template has none) and gives images a stock alt text
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        self.register_filter("highlight_code", self.filters.get("highlight_code", self._remembered(
            Highlight2HTML(pygments_lexer=lexer, parent=self), lexer)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self,
                                                                      resources=resources))
        output, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        chain = stored_in(nb)
        return finish_page(output, chain + [n for n in self.more_notes.get(name, ()) if n not in chain]), resources

    @pass_context
    def markdown2html(self, context, source):
        if context.get("cell", {}).get("attachments"):  # its images are the cell's own
            return clean_html(super().markdown2html(context, source))
        # the notebook's folder matters only where images are read from it (embed_images)
        path = context.get("resources", {}).get("metadata", {}).get("path", "") if self.embed_images else ""
        return self._remembered(lambda text: clean_html(super(SafeHTMLExporter, self).markdown2html(context, text)),
                                "markdown", path)(source)

    def _remembered(self, render, *key):
        """`render(source, ...)`, remembered for the exporter's later pages (the calls last used, up to
        REMEMBERED_CHARS of source and result): a class's pages share most of their cells (the release's), and
        highlighting and markdown took half of a page's time."""
        def remembered(source, *args, **kw):
            call = (*key, source, *args, json.dumps(kw, sort_keys=True, default=str))
            if call in self._made:
                self._made.move_to_end(call)
                return self._made[call][0]
            result = render(source, *args, **kw)
            self._made[call] = result, len(source) + len(result)
            self._made_chars += len(source) + len(result)
            while self._made_chars > REMEMBERED_CHARS:
                self._made_chars -= self._made.popitem(last=False)[1][1]
            return result
        return remembered


def _size(node):
    return len(json.dumps(node, default=str))


def _note(text):
    return NotebookNode(output_type="stream", name="stdout", text=text)


class SafeOutputs(Preprocessor):
    """Only inert output types reach the page, and the cells' outputs and sources fit a budget."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled
    output_budget = Integer(1_200_000, help="Bytes of outputs one page may show.").tag(config=True)
    source_limit = Integer(100_000, help="Characters shown of one cell's source.").tag(config=True)

    def preprocess(self, nb, resources):
        used = 0
        for cell in nb.cells:
            if not isinstance(cell.get("source"), str):
                cell.source = ""
            if len(cell.source) > self.source_limit:
                cell.source = cell.source[:self.source_limit] + "\n…（单元格太长，反馈里只显示开头）"
            if cell.cell_type != "code":
                _inert_attachments(cell)
                continue
            if not cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                cell.outputs = []  # what student code printed while graded (a hidden case's inputs, say) stays off the page
                continue
            kept = []
            for out in cell.get("outputs", []):
                if "data" in out:
                    out.data = {k: v for k, v in out.data.items() if k in INERT_MIME}
                    out.metadata = {}
                    if not out.data:
                        continue
                size = _size(out)
                if used + size > self.output_budget:
                    kept.append(_note("…（输出太大，反馈里省略了其余部分）\n"))
                    used = self.output_budget
                    break
                used += size
                kept.append(out)
            cell.outputs = kept
        return nb, resources


ATTACHMENT_REF = re.compile(r"attachment:([^)\s\"'>]*)")


def _inert_attachments(cell):
    """A text cell keeps its PNG and JPEG attachments (shown from the page itself); a reference to any
    other or a missing one points nowhere (nbconvert would stop on it: "missing attachment")."""
    found = cell.get("attachments")
    kept = {}
    for name, data in (found.items() if isinstance(found, dict) else ()):
        images = {k: v for k, v in data.items() if k in ("image/png", "image/jpeg") and isinstance(v, str)} \
            if isinstance(data, dict) else {}
        if images and isinstance(name, str):
            kept[name] = images
    cell.pop("attachments", None)
    if kept:
        cell.attachments = nbformat.from_dict(kept)
    cell.source = ATTACHMENT_REF.sub(lambda m: m.group(0) if m.group(1) in kept else "#", cell.source)


QUOTE = re.compile(r"`([^`]*)`")


def _as_code(text):
    """A name a note quotes (notes.quoted) shown as code, apart from the note's own words."""
    return QUOTE.sub(r"<code>\1</code>", text)


def banner(notes, shown=40):
    notes = list(notes)
    more = [f"……还有 {len(notes) - shown} 条说明"] if len(notes) > shown else []
    items = "".join(f"<li>{_as_code(html.escape(n[:500]))}</li>" for n in notes[:shown] + more)
    return (f'<div style="border:2px solid #c60;padding:8px;margin:8px;background:#fff4e5">'
            f"<b>评分说明</b><ul>{items}</ul></div>")


def plain_page(title, notes):
    """A page for a notebook that has no rendered feedback (unreadable, or grading failed)."""
    return finish_page(f"<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
                       f"<body><h1>{html.escape(title)}</h1></body></html>", notes)


def finish_page(text, notes=()):
    """Add the notes banner and the CSP; a page that is still too large is replaced by its notes."""
    if notes:
        text = text.replace("<body>", "<body>" + banner(notes), 1) if "<body>" in text else banner(notes) + text
    if CSP_META in text:
        pass
    elif "<head>" in text:
        text = text.replace("<head>", "<head>\n" + CSP_META, 1)
    else:
        text = f"<!DOCTYPE html><html><head>{CSP_META}</head><body>{text}</body></html>"
    if len(text.encode("utf-8")) > MAX_PAGE_BYTES:
        return plain_page("反馈页面过大", [*notes, "这本笔记本的输出太大，反馈页面超过了大小上限，只显示评分说明；"
                                               "分数见成绩表。"])
    return text
