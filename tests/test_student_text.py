"""Text a student controls (metadata keys and values, ids, the nbformat field, sources, outputs, file
names) reaches notes, logs, CSV files and feedback pages only printable and encodable: lone
surrogates, newlines and control characters, fuzzed with hypothesis through the chain's reading and
repair, the feedback exporter and the CSV writer. The same payloads go through the real grader on
both entry points in tests/test_one_pipeline.py."""
import csv
import io
import json
import unicodedata

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from traitlets.config import Config

from autograder import page_policy
from autograder.chain import feedback_page
from autograder.notes import printable, stored_in
from autograder.report import grade_tables
from tests import grading_class as gc
from tests.entry_points import through_chain

pytestmark = pytest.mark.filterwarnings("ignore::nbformat.warnings.DuplicateCellId", "ignore::UserWarning")
NASTY = st.sampled_from(["\ud800", "\udfff", "\n", "\r\n", "\x00", "\x1b[31m", "\u2028", "\u202e", "honest6,100,0,0,100,",
                         "<script>alert(1)</script>", "=HYPERLINK(1)", "é", "\\"])
TEXT = st.lists(st.one_of(NASTY, st.text(max_size=4)), min_size=1, max_size=4).map("".join)
PLACES = ["nbgrader_key", "nbgrader_value", "grade_id", "cell_id", "notebook_key", "nbformat", "source",
          "output", "attachment", "points"]


def clean(text):
    """Encodable as UTF-8 and free of line breaks and control characters."""
    text.encode("utf-8")
    return not any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp") for ch in text)


@st.composite
def student_text(draw):
    nb = json.loads(nbformat.writes(gc.solved()))
    graded = [c for c in nb["cells"] if "nbgrader" in c["metadata"]]
    for _ in range(draw(st.integers(1, 4))):
        place, text, cell = draw(st.sampled_from(PLACES)), draw(TEXT), draw(st.sampled_from(graded))
        meta = cell["metadata"]["nbgrader"]
        if place == "nbgrader_key":
            meta[text] = draw(st.sampled_from([1, "x", True]))
        elif place in ("nbgrader_value", "grade_id", "points"):
            meta[{"nbgrader_value": "checksum", "grade_id": "grade_id", "points": "points"}[place]] = text
        elif place == "cell_id":
            cell["id"] = text
        elif place == "notebook_key":
            nb["metadata"][text] = text
        elif place == "nbformat":
            nb["nbformat"] = text
        elif place == "source":
            cell["source"] = text
        elif place == "output" and cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}]
        elif place == "attachment" and cell["cell_type"] == "markdown":
            cell["attachments"] = {text: {"image/svg+xml": text}}
            cell["source"] = f"![x](attachment:{text})"
    return json.dumps(nb)


def feedback_html(nb):
    cfg = Config({"HTMLExporter": {"sanitize_html": True}})
    feedback_page.SafeOutputs().preprocess(nb, {})
    page, _ = feedback_page.SafeHTMLExporter(config=cfg).from_notebook_node(nb)
    return page


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=student_text(), name=TEXT)
def test_student_text_leaves_the_chain_printable_and_encodable(tmp_path_factory, text, name):
    path = tmp_path_factory.mktemp("t") / f"{gc.NB}.ipynb"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")  # the lone surrogate as the file has it
    nb = through_chain(path)
    notes = stored_in(nb)
    assert all(clean(n) for n in notes), notes
    nbformat.writes(nb).encode("utf-8")                                 # nbgrader can write it back
    page = feedback_html(nb)
    page.encode("utf-8")
    assert page_policy.CSP_META in page and "<script>alert" not in page
    row = [grade_tables.csv_safe(printable(name)), "1", "0", "0", "1", "1", "0", grade_tables.csv_safe(" ".join(notes))]
    rendered = grade_tables.render(grade_tables.TOTALS_HEADER, [row])
    rendered.encode("utf-8")
    assert len(rendered.splitlines()) == 2                               # one line per student, nothing forged
    cell = list(csv.reader(io.StringIO(rendered)))[1][0]
    assert cell in (printable(name), "'" + printable(name))  # the name, with at most the one apostrophe csv_safe adds


def test_a_lone_surrogate_in_a_key_and_the_nbformat_field_is_a_note(tmp_path):
    base = json.loads(nbformat.writes(gc.solved()))
    key = json.loads(json.dumps(base))
    next(c for c in key["cells"] if "nbgrader" in c["metadata"])["metadata"]["nbgrader"]["\ud800x\n"] = 1
    field = dict(base, nbformat="\ud800")
    for label, data in (("key", key), ("field", field)):
        path = tmp_path / label / f"{gc.NB}.ipynb"
        path.parent.mkdir()
        path.write_text(json.dumps(data), encoding="ascii")  # plain ASCII, as the file
        notes = stored_in(through_chain(path))
        assert notes and all(clean(n) for n in notes), notes
    assert any("\\ufffd" in n or "\ufffd" in n for n in stored_in(through_chain(tmp_path / "key" / f"{gc.NB}.ipynb")))
