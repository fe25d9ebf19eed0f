"""Notes about a submission, each tied to one notebook or to the whole submission.

A notebook's feedback page shows its own notes and the submission-wide ones; nothing is matched
by searching the text.
"""
import unicodedata
from typing import NamedTuple

from w1d1_format import OWN_KEY


class Note(NamedTuple):
    notebook: str | None  # None: about the whole submission
    text: str


def about_notebook(notebook, texts):
    """Notes about `notebook` from plain texts."""
    return [Note(notebook, t) for t in texts]


def for_page(notes, notebook):
    """The texts a notebook's feedback page shows: its own notes, then those about the whole submission."""
    return [n.text for n in notes if n.notebook == notebook] + [n.text for n in notes if n.notebook is None]


def texts(notes):
    return [n.text for n in notes]


def from_data(items):
    """Notes read back from state.json; a bare string (older state) is about the whole submission."""
    out = []
    for item in items or ():
        if isinstance(item, str):
            out.append(Note(None, item))
        elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], str):
            out.append(Note(item[0] if isinstance(item[0], str) else None, item[1]))
    return out


def _unsafe(ch):
    return 0xDC80 <= ord(ch) <= 0xDCFF or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


def is_printable(text, keep=""):
    """Already safe for a note, a log line, a CSV cell (what `printable` makes): escaping it again would
    only double its backslashes."""
    return not any(_unsafe(ch) and ch not in keep for ch in text)


def printable(name, keep=""):
    """A name from a student's folder as safe text for notes, logs and CSV files: bytes that are not
    UTF-8 and control or formatting characters as \\xNN (\\uNNNN), a backslash doubled. `keep`: control
    characters left as they are (newline and tab, for code shown in a <pre>)."""
    out = []
    for ch in name:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (the file system's surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif _unsafe(ch) and ch not in keep:
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def quoted(text, limit=80):
    """Student text in a note (a file or folder name, a metadata key) between backticks it cannot close:
    made printable, its own backticks written \\x60, cut at `limit` characters. A page shows it as code."""
    safe = (text if is_printable(text) else printable(text)).replace("`", "\\x60")
    return f"`{safe[:limit]}{'…' if len(safe) > limit else ''}`"


def stored_in(nb):
    """The notes nbgrader's chain stored in a graded notebook's metadata (autograder/chain/intake_chain.py)."""
    own = nb.get("metadata", {}).get(OWN_KEY)
    notes = own.get("notes") if isinstance(own, dict) else None
    if not isinstance(notes, list):
        return []
    return [n if is_printable(n) else printable(n) for n in notes if isinstance(n, str)]


class PrintableLog:
    """A logging filter for nbgrader's own log (nbgrader_config.py): student text it logs (a file name,
    say) cannot forge a line or send terminal escapes. Arguments become printable; in a message, every
    character but the line break is escaped and continuation lines are indented."""

    def filter(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(printable(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str) and not is_printable(record.msg):
            lines = [printable(line) for line in record.msg.split("\n")]
            record.msg = "\n    ".join(lines)
        return True
