"""A notebook file without its saved outputs, read in bounded memory: how a notebook over the size limit still
reaches the teacher (exchange.py, at submit) and is graded (autograder/chain/intake_chain.py). Outputs are never graded.

The file is read in chunks and copied as it is, except that the value of `outputs` in each cell (an object in a
list under a `cells` key) becomes `[]`, however large or deep it is. What is kept may not pass `keep_bytes`, the
file may not pass `max_bytes`, and what is kept may not nest deeper than MAX_DEPTH: each raises TooBig saying which
(in Chinese). Nothing is validated here: whoever reads the text parses it.
"""
import json
import re

CHUNK = 2**20
MAX_DEPTH = 256          # a notebook's own structure nests about six deep; what outputs hold is dropped, not counted
MB = 2**20
_NEXT = re.compile(rb'["{}\[\],:]')              # the next string or structural character
_SKIPPED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*("?)|[{}\[\]]', re.S)  # inside a dropped value: strings, brackets
_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's characters up to its closing quote


class TooBig(ValueError):
    pass


def size_text(n):
    return f"{n / MB:.1f} MB"


class _Reader:
    """The file as a buffer that moves forward: bytes before `copy_from` are in `kept` (or skipped)."""

    def __init__(self, fh, keep_bytes, max_bytes):
        self.fh, self.keep_bytes, self.max_bytes = fh, keep_bytes, max_bytes
        self.buf, self.pos, self.copy_from, self.read_bytes, self.eof = b"", 0, 0, 0, False
        self.kept = bytearray()

    def more(self):
        """Read the next chunk; False at the end of the file. What was scanned is kept or dropped first."""
        if self.eof:
            return False
        if self.copy_from is not None:
            self.keep(self.buf[self.copy_from:self.pos])
            self.copy_from = 0
        chunk = self.fh.read(CHUNK)
        self.read_bytes += len(chunk)
        if self.max_bytes is not None and self.read_bytes > self.max_bytes:
            raise TooBig(f"文件超过 {size_text(self.max_bytes)}")
        self.buf, self.pos, self.eof = self.buf[self.pos:] + chunk, 0, not chunk
        return bool(chunk)

    def keep(self, data):
        self.kept += data
        if len(self.kept) > self.keep_bytes:
            raise TooBig(f"去掉输出以后仍超过 {size_text(self.keep_bytes)}（代码、文字或元数据太多）")

    def search(self, pattern):
        """The next match of `pattern` (reading on as needed), or None at the end of the file."""
        while True:
            m = pattern.search(self.buf, self.pos)
            if m is not None:
                return m
            self.pos = len(self.buf)
            if not self.more():
                return None

    def string(self):
        """Past a string whose opening quote is behind `pos`; returns its text (bytes, escapes decoded) when short."""
        piece, short = bytearray(), True
        while True:
            start, end = self.pos, _BODY.match(self.buf, self.pos).end()
            short = short and len(piece) + end - start <= 64
            if short:
                piece += self.buf[start:end]
            if end < len(self.buf) and self.buf[end:end + 1] == b'"':
                self.pos = end + 1
                if short and b"\\" in piece:  # "outp\u0075ts" is the key "outputs" too
                    try:
                        return json.loads(b'"' + piece + b'"').encode("utf-8", "surrogatepass")
                    except ValueError:
                        return None
                return bytes(piece) if short else None
            self.pos = end  # the buffer ends inside the string (or on its backslash)
            if not self.more():
                return None

    def skip_value(self):
        """Past one JSON value (none of it kept): a string, a container with all it holds, or a scalar."""
        self.copy_from = None
        m = self.search(_NEXT)
        if m is None or m.group() in b",}]:":  # a scalar ended: the comma or bracket is the caller's
            self.pos = m.start() if m is not None else self.pos
            return
        self.pos = m.end()
        if m.group() == b'"':
            self.string()
            return
        depth = 1
        while depth:
            for t in _SKIPPED.finditer(self.buf, self.pos):
                self.pos = t.end()
                if t.group(1) is None:
                    depth += 1 if t.group() in b"{[" else -1
                    if not depth:
                        return
                elif not t.group(1):  # a string the buffer ends inside
                    break
            else:
                self.pos = len(self.buf)
                if not self.more():
                    return
                continue
            if not self.more():
                return
            self.string()


def without_outputs(fh, keep_bytes, max_bytes=None):
    """The text of the notebook in binary file `fh` with every cell's outputs emptied (bytes, at most keep_bytes);
    raises TooBig."""
    r = _Reader(fh, keep_bytes, max_bytes)
    stack = []  # [kind, key]: an object's last key, or the key a list sits under
    expect_key = False
    while True:
        m = r.search(_NEXT)
        if m is None:
            break
        char, r.pos = m.group(), m.end()
        top = stack[-1] if stack else None
        if char == b'"':
            text = r.string()
            if expect_key and top is not None and top[0] == "o":
                top[1], expect_key = text, False
        elif char in b"{[":
            if len(stack) >= MAX_DEPTH:
                raise TooBig(f"JSON 嵌套超过 {MAX_DEPTH} 层")
            key = top[1] if top is not None and top[0] == "o" else None
            in_cells = top is not None and top[0] == "a" and top[1] == b"cells"
            stack.append(["o" if char == b"{" else "a", key, in_cells])
            expect_key = char == b"{"
        elif char in b"}]":
            if stack:
                stack.pop()
            expect_key = False
        elif char == b",":
            expect_key = top is not None and top[0] == "o"
        elif char == b":" and top is not None and top[0] == "o" and top[2] and top[1] == b"outputs":
            r.keep(r.buf[r.copy_from:r.pos] + b" []")
            r.skip_value()
            r.copy_from = r.pos
    if r.copy_from is not None:
        r.keep(r.buf[r.copy_from:])
    return bytes(r.kept)
