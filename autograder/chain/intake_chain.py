"""Intake inside nbgrader's own chain (nbgrader_config.py), so every path grades the same notebook.

`python -m autograder grade`, `nbgrader autograde` and formgrader's button all read a submitted
notebook with `SubmissionReader` and repair it with `RepairSubmission` before any other nbgrader step:

- `SubmissionReader` (the Autograde exporter) reads a regular file only (no link, device or
  oversized file; a notebook over 20 MB without its saved outputs, in bounded memory, and says so), as UTF-8
  JSON with every string made encodable, within a cell limit; a notebook it cannot read is replaced by the
  released one (it scores 0) and says why;
- `RepairSubmission` runs autograder/chain/repair.py and stores the notes in the notebook's metadata
  (`OWN_KEY`), where the feedback exporter shows them.
"""
import datetime
import functools
import json
import os
import stat
import uuid

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.preprocessors import NbGraderPreprocessor
from w1d1_format import OWN_KEY
from w1d1_student.lean_notebook import TooBig, size_text, without_outputs

from autograder.chain import repair
from autograder.course import ASSIGNMENT, RELEASE_DIR, SOURCE_DIR
from autograder.notes import is_printable, printable, quoted

MAX_FILE_BYTES = 20 * 2**20        # one submitted file; a notebook over it is read without its outputs
MAX_NOTEBOOK_BYTES = 256 * 2**20   # a notebook file read at all (outputs dropped as it is read, in bounded memory)
MAX_CELLS = 2000                   # the released notebooks have about a hundred
NOTES = "w1d1_notes"               # resources key: notes gathered while reading
REFUSED = {"symlink": "是符号链接", "special": "不是普通文件（设备、FIFO 或套接字）",
           "big": f"超过 {MAX_FILE_BYTES // 2**20} MB",
           "huge": f"超过 {MAX_NOTEBOOK_BYTES // 2**20} MB（这么大的笔记本不读取：清除输出后再交）"}


class Unreadable(Exception):
    pass


def file_kind(st, notebook=False):
    """"file", or why a file is refused: "symlink", "special", "big" (a notebook: "huge")."""
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    if not stat.S_ISREG(st.st_mode):
        return "special"
    if notebook:
        return "huge" if st.st_size > MAX_NOTEBOOK_BYTES else "file"
    return "big" if st.st_size > MAX_FILE_BYTES else "file"


def open_regular(path):
    """A regular file opened for reading, refusing links and special files even if swapped in after a check."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise OSError("不是普通文件")
    return fh


def copy_regular(path, target, limit=MAX_NOTEBOOK_BYTES):
    """Copy a regular file (as open_regular reads it) of at most `limit` bytes to `target`, in chunks."""
    with open_regular(path) as src, open(target, "wb") as dst:
        copied = 0
        while chunk := src.read(2**20):
            copied += len(chunk)
            if copied > limit:
                raise OSError(f"超过 {limit // 2**20} MB")
            dst.write(chunk)


def notebook_bytes(path):
    """(a notebook file's bytes, None), or over MAX_FILE_BYTES (its bytes without outputs, a note saying so), read
    in bounded memory (w1d1_student.lean_notebook); raises TooBig where even that is too big."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= MAX_FILE_BYTES:
            data = fh.read(MAX_FILE_BYTES + 1)
            if len(data) <= MAX_FILE_BYTES:
                return data, None
            size, data = len(data), None
            fh.seek(0)
        try:
            lean = without_outputs(fh, MAX_FILE_BYTES, MAX_NOTEBOOK_BYTES)
        except TooBig as exc:
            raise TooBig(f"文件有 {size_text(size)}，超过 {MAX_FILE_BYTES // 2**20} MB 的上限，{exc}") from None
    note = (f"{quoted(os.path.basename(path))} 有 {size_text(size)}，超过 {MAX_FILE_BYTES // 2**20} MB 的上限："
            "评分时删掉了保存的输出（评分不看输出），其余照常评分。")
    return lean, note


# what each cell and output type may hold (nbformat 4.5); anything else Jupyter opens but the schema refuses
CELL_KEYS = {"code": {"id", "cell_type", "metadata", "source", "outputs", "execution_count"},
             "markdown": {"id", "cell_type", "metadata", "source", "attachments"},
             "raw": {"id", "cell_type", "metadata", "source", "attachments"}}
OUTPUT_KEYS = {"stream": {"output_type", "name", "text"}, "error": {"output_type", "ename", "evalue", "traceback"},
               "display_data": {"output_type", "data", "metadata"},
               "execute_result": {"output_type", "data", "metadata", "execution_count"}}


OUTPUT_DEFAULTS = {"stream": {"name": "stdout", "text": ""}, "error": {"ename": "", "evalue": "", "traceback": []},
                   "display_data": {"data": {}, "metadata": {}},
                   "execute_result": {"data": {}, "metadata": {}, "execution_count": None}}


def _as_jupyter_reads(raw):
    """A v4 notebook's JSON as Jupyter reads it: what it ignores but the schema refuses is dropped (an
    `outputs` list on a markdown cell, `transient` on an output, an unknown output type), what it fills
    in is filled in (a missing `outputs`, `metadata` or stream name), a malformed cell id is replaced,
    and ids in a 4.4 notebook make it 4.5. Anything that is not a v4 notebook is left to the validator."""
    if not isinstance(raw, dict) or raw.get("nbformat") != 4 or not isinstance(raw.get("cells"), list):
        return raw
    if not isinstance(raw.get("metadata"), dict):
        raw["metadata"] = {}
    if raw["metadata"].get("kernelspec", {}) is None:
        del raw["metadata"]["kernelspec"]
    cells = [c for c in raw["cells"] if isinstance(c, dict) and c.get("cell_type") in CELL_KEYS]
    if any("id" in c for c in cells) and isinstance(raw.get("nbformat_minor"), int) and raw["nbformat_minor"] < 5:
        raw["nbformat_minor"] = 5
    for cell in cells:
        for key in set(cell) - CELL_KEYS[cell["cell_type"]]:
            del cell[key]
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = {}
        if "id" in cell and not (isinstance(cell["id"], str) and repair.CELL_ID.match(cell["id"])):
            cell["id"] = uuid.uuid4().hex[:16]
        elif "id" not in cell and raw.get("nbformat_minor", 0) >= 5:
            cell["id"] = uuid.uuid4().hex[:16]
        if not isinstance(cell.get("source", ""), (str, list)):
            cell["source"] = ""
        if cell["cell_type"] != "code":
            continue
        if not isinstance(cell.get("execution_count"), int) or isinstance(cell.get("execution_count"), bool):
            cell["execution_count"] = None
        outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        cell["outputs"] = [o for o in outputs if isinstance(o, dict) and o.get("output_type") in OUTPUT_KEYS]
        for out in cell["outputs"]:
            for key in set(out) - OUTPUT_KEYS[out["output_type"]]:
                del out[key]
            for key, value in OUTPUT_DEFAULTS[out["output_type"]].items():
                out.setdefault(key, value)
    raw["cells"] = cells
    return raw


def parse_notebook(data):
    """A v4 notebook from a file's bytes, every string encodable; raises Unreadable saying why."""
    try:
        raw = _as_jupyter_reads(repair.encodable(json.loads(data.decode("utf-8"))))
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # bad JSON, bad UTF-8, too deep, wrong schema …
        raise Unreadable(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if len(nb.cells) > MAX_CELLS:
        raise Unreadable(f"有 {len(nb.cells)} 个单元格，超过上限 {MAX_CELLS}")
    return nb


def read_notebook(path, notes=None):
    """(notebook, None) or (None, why it cannot be graded) for the file at `path`; a note on how it was read (a
    notebook over MAX_FILE_BYTES is read without its outputs) goes to `notes`."""
    try:
        kind = file_kind(os.lstat(path), notebook=True)
        if kind != "file":
            return None, REFUSED[kind]
        data, note = notebook_bytes(path)
        nb = parse_notebook(data)
    except TooBig as exc:
        return None, str(exc)
    except Unreadable as exc:
        return None, f"文件损坏或不是合法的笔记本：{exc}"
    except OSError as exc:
        return None, type(exc).__name__
    if note and notes is not None:
        notes.append(note)
    return nb, None


@functools.lru_cache(maxsize=None)
def _course_notebook(folder, name):
    return nbformat.writes(nbformat.read(folder / ASSIGNMENT / f"{name}.ipynb", as_version=4))


def course_notebook(folder, name):
    """A fresh copy of notebook `name` of the release (RELEASE_DIR) or the source (SOURCE_DIR)."""
    return nbformat.reads(_course_notebook(folder, name), as_version=4)


class SubmissionReader(NotebookExporter):
    """nbgrader's notebook exporter, reading the submitted file as intake does."""

    def from_filename(self, filename, resources=None, **kw):
        resources = resources if resources is not None else {}
        path, basename = os.path.split(filename)
        name = os.path.splitext(basename)[0]
        resources.setdefault("metadata", {})
        resources["metadata"].update(name=name, path=path)
        try:
            mtime = os.lstat(filename).st_mtime
            resources["metadata"]["modified_date"] = datetime.datetime.fromtimestamp(mtime).strftime("%B %d, %Y")
        except OSError:
            pass
        nb, why = read_notebook(filename, resources.setdefault(NOTES, []))
        if nb is None:
            nb = course_notebook(RELEASE_DIR, name)
            resources.setdefault(NOTES, []).append(f"{quoted(basename)} 无法读取（{why}），按未作答的发布版评分，这本笔记本记 0 分。")
        return self.from_notebook_node(nb, resources, **kw)


class RepairSubmission(NbGraderPreprocessor):
    """The first step of sanitizing: autograder/chain/repair.py on the submitted notebook; its notes (and the
    reader's) go into the notebook's own metadata for the feedback page and the grading command."""

    def preprocess(self, nb, resources):
        name = resources.get("nbgrader", {}).get("notebook") or resources.get("metadata", {}).get("name")
        notes = list(resources.get(NOTES, []))
        try:
            notes += repair.repair(name, nb, course_notebook(RELEASE_DIR, name), course_notebook(SOURCE_DIR, name))
        except Exception as exc:  # a repair that fails costs this notebook only
            nb = course_notebook(RELEASE_DIR, name)
            notes.append(f"{name}：这本笔记本无法处理（{type(exc).__name__}），按未作答的发布版评分，记 0 分。请联系助教。")
        # the one place they are made printable (a name notes.quoted wrote already is: escaped once, not twice)
        nb.metadata[OWN_KEY] = {"notes": [n if is_printable(n) else printable(n) for n in notes]}
        return nb, resources
