"""Answers that look copied: each exercise's answer cells compared pairwise, and with the code students can see.

The comparison is copydetect's (MOSS-style winnowing of token k-grams): pygments tokenises each answer,
every identifier becomes V, every function name F, every class name O, every string S, and comments and
whitespace go; k-grams of what is left (k characters) are hashed, winnowed (one fingerprint per window of
`win_size` k-grams at least), and two answers are compared by the share of each one's fingerprinted code
that the other holds too. Renaming variables, rewording comments or moving blank lines changes nothing.

What is never evidence of copying, and is taken out of every answer before comparing:
- the release's own cell for the exercise (signature, docstring, `# 在这里写你的代码`): all of its k-grams;
- what a large part of the class writes alike (the lines the exercise dictates: `self.W_q = nn.Linear(d_model,
  d_model, bias=bias)`, the imports, `B, T, d = x.shape`): a fingerprint found in at least COMMON_SHARE of the
  exercise's answers, and in at least COMMON_MIN of them, is treated as release code, as MOSS's -m does.
  A small class never has one; in a large one a source copied by more than that share of the class is
  treated as the class's own idiom (the comparison with `references` still finds copies of known code).
An answer is compared with what it uses from the student's other answer cells of the notebook (`with_helpers`: a
base class or helper moved into another exercise's cell comes along), and string literals holding code that defines
a function or class (what `exec` would run) are fingerprinted as code.
An answer longer than MAX_CHARS is not compared at all: a cut would let a long comment or dead code in front of a
copy push the copy out of sight.
What is left must be long enough to tell answers apart: an answer with fewer than MIN_TOKENS fingerprinted
characters of filtered code (copydetect's `token_coverage`) is not compared (short answers converge), and an
exercise where (nearly) every answer is that short is listed in `skipped` with the reason. Every answer of a compared
exercise that is not compared (too long, too short, empty, nothing left but release code), and every answer too long
to compare, is listed in `left_out` with the reason: the page and similarity.csv (kind "not_compared") name it.

Score of two students: min of the two directional overlaps (overlap / token_coverage of each), so both answers
must be mostly the same code: a short answer whose lines also occur in a long one (the standard lines of an
exercise) does not flag, and the score of an honest pair does not grow with how little one of them wrote.
Padding a copy with dead code lowers it (the price of min; max flagged honest pairs, below), so a pair where at
least CONTAINED of one answer's fingerprinted code lies inside the other is listed too (kind "contained", the score
that share): a copy padded with dead code, broken cells or a second answer still holds all of the original.
Score against a reference: the answer's side only (the share of the answer found in the reference), since a
reference (the companion script, the release notebook's code) is much longer than any answer; the answer's own
functions and classes (long enough on their own) are compared one by one too, and the highest share counts: a
copied function wrapped in a loop of the student's own is still found.

Answers are compared in their canonical form: where the code parses, as `ast.unparse` writes its syntax tree, type
annotations dropped, so that no cosmetic edit (`;` after every statement, redundant parentheses, trailing commas,
backslashes, annotations, quote style, comments, blank lines) changes a k-gram (red team, round 4: `;` after every
statement paired a copy at 0.47 with its original, parentheses at 0.13); an answer that does not parse as a whole
(a broken cell joined to the working one) is cut before each line that is not indented, and each part that parses
is compared in its canonical form, the rest as written. References are compared in their canonical form too.

Before fingerprinting, an answer loses what is no evidence (import statements, `pass`, constants standing alone:
docstrings, `0;`) and every statement shaped like one of the release cell's (names -> V: its def and class lines,
even with parameters renamed, `super().__init__()`); these are statements shorter than k that would otherwise pad
every answer's share with what everyone writes, or break the k-grams of a copy. Both are read on the syntax tree,
never on physical lines: `import math; x = 1` keeps `x = 1` (issue 36: `import math; ` in front of every statement of
a copy took the copy away with its imports), an import inside a block or a function goes too, a cell with magics is
read as IPython runs it, and code that is not Python (it does not run) is compared as written.

Settings, measured by bench/similarity_settings.py on the mutation tables' answers (measured with copydetect's
salted hash(), which made scores vary by about ±0.02 between processes; k-grams are now hashed with blake2b,
the same in every process; .venv/bin/python bench/similarity_settings.py):
  distinct correct mha styles (MHA, EINSUM, PERMUTE, LOOP, SDPA_ALIAS, TORCH, QKV_FUSED, THREAD_SDPA_MATH,
  PATCHES_DETECTOR), min score: largest 0.47 (SDPA_ALIAS ~ THREAD_SDPA_MATH, one author's two variants sharing
  most of `forward` verbatim; 0.38 compared as written: the canonical `(V,V)` of a tuple adds one shared
  fingerprint to answers that hold about ten), next 0.32; with max instead of min: 0.58 (QKV_FUSED, a short
  answer inside longer ones) - hence min;
  planted copies: MHA all names renamed, comments reworded, blank lines moved 1.00; the same plus four
  statements reworded/reordered 0.86; EINSUM renamed and edited 0.94; each of the first and the last with the
  cosmetic edits of tests/cosmetic.py, one by one and all together: the same (compared as written: 0.00-0.63);
  backward copied from w1day1_checks.py (its body verbatim, signature adapted) vs the companion 0.68; distinct
  correct backward styles vs the companion: largest 0.25; any correct answer of notebooks 02/04 vs the companion
  or the release notebooks' code: largest 0.22.
  k 20..35 and window 1..6 change these by a few hundredths (k=20 lifts the honest backward to 0.49 and the
  honest mha pair to 0.53); k=25 (copydetect's noise threshold) with window 4 (a match of 28 characters is always
  seen) keeps a quarter of the fingerprints of window 1.
THRESHOLD 0.55: between the largest honest score (0.47) and the lowest planted one (0.68), 0.08 and 0.13 from them.
MIN_TOKENS 90: the release stub alone gives 0; one-line exercises give init_score_std 30-49, split_merge_heads
54-81 (two dictated lines: skipped); numerical_gradient 81-137, attention_backward 103-206, mha 266-467.
CONTAINED 0.9: the largest share of an honest answer inside another is 0.58 (QKV_FUSED, above); a padded copy holds
all of its original (1.00).
Not caught: a copy of a reference padded with a few lines of one's own (a reference is scored by the answer's
share only, and the planted companion copy's 0.69 lies close to THRESHOLD), a copy left in a cell of an exercise
that is not compared (too short, or numerical_gradient) and used from there in ways the helper lookup does not
follow (attribute access on another object, `getattr` with a computed name), a copy of the companion's backward
rewritten to batched axes (0.27, as honest answers are), a copy with other no-op code in front of every statement
(`x = x; `, `if 1: `: each breaks the k-grams around it), a
padded copy that is also edited until less than CONTAINED of the original survives, and code built at run time
(an encoded string decoded before `exec`: only literal code is read).
"""
import ast
import copy
import functools
import hashlib
import io
import keyword
import re
import symtable
import textwrap
import warnings
from dataclasses import dataclass, field

import copydetect.utils
import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage


def _stable_kgrams(string, k):
    """copydetect's k-gram hashes, but the same in every process (its own use the salted hash()): a
    report rebuilt, or made on the hub's path, lists the same pairs with the same scores."""
    return np.array([int.from_bytes(hashlib.blake2b(string[i:i + k].encode("utf-8", "surrogatepass"), digest_size=8)
                                    .digest(), "little", signed=True) for i in range(len(string) - k + 1)], dtype=np.int64)


copydetect.utils.hashed_kgrams = _stable_kgrams

K = 25                 # characters of filtered code per k-gram (noise threshold)
WIN_SIZE = 4           # winnowing window: any match of K + WIN_SIZE - 1 characters is guaranteed to be seen
THRESHOLD = 0.55       # pairs at or above it are listed
CONTAINED = 0.9        # ... and pairs where this share of one answer lies inside the other (padding hides nothing)
MIN_TOKENS = 90        # fingerprinted characters an answer needs (after boilerplate) to be compared
SHORT_SHARE = 0.2      # an exercise where fewer than this share of the answers is long enough is not compared
COMMON_SHARE = 0.4     # a fingerprint in at least this share of an exercise's answers ...
COMMON_MIN = 8         # ... and in at least this many of them is the class's common code, not evidence
MAX_CHARS = 100_000    # an answer's source longer than this is not compared, and listed as such (`left_out`)
MAX_REFERENCE_CHARS = 400_000
ROW_FIELDS = ("grade_id", "kind", "a", "b", "score", "reason")
_NAME = "answer.py"    # copydetect picks the lexer from a file name; with language="python" it never logs


@dataclass(frozen=True)
class Pair:
    grade_id: str
    a: str              # a student id
    b: str              # a student id (kind "students", a < b) or a reference's label (kind "reference")
    score: float        # in [0, 1]
    a_source: str
    b_source: str       # a reference's source: the lines holding the matched code, "…" between them
    kind: str           # "students" | "contained" (one answer inside the other) | "reference"


@dataclass
class Comparison:
    pairs: list = field(default_factory=list)       # [Pair], highest score first
    compared: dict = field(default_factory=dict)    # {grade_id: number of answers compared}
    skipped: dict = field(default_factory=dict)     # {grade_id: why it was not compared (Chinese)}
    left_out: dict = field(default_factory=dict)    # {grade_id: {student: why that answer was not compared}}
    threshold: float = THRESHOLD
    contained: float = CONTAINED
    k: int = K
    win_size: int = WIN_SIZE

    def rows(self):
        """CSV rows in ROW_FIELDS order: the pairs (score with 3 decimals), then a row of kind "not_compared" for
        each exercise not compared (a empty) and each answer not compared, with the reason."""
        return ([(p.grade_id, p.kind, p.a, p.b, f"{p.score:.3f}", "") for p in self.pairs]
                + [(gid, "not_compared", "", "", "", why) for gid, why in sorted(self.skipped.items())]
                + [(gid, "not_compared", s, "", "", why) for gid, by in sorted(self.left_out.items())
                   for s, why in sorted(by.items())])


def _fingerprint(source, k, win_size, limit):
    """copydetect's fingerprint of `source[:limit]` (never executed, only tokenised), or None: not text, blank, or
    untokenisable."""
    if not isinstance(source, str) or not source.strip():
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return CodeFingerprint(_NAME, k, win_size, filter=True, language="python", fp=io.StringIO(source[:limit]))
    except Exception:  # a source pygments cannot take is not compared
        return None


_NAME_RE = re.compile(r"[^\W\d]\w*")
_NO_EVIDENCE = (ast.Import, ast.ImportFrom, ast.Pass)


def _pieces(tree, raw):
    """(start, end, shape, whether it is no evidence at all) in `raw` (the parsed code's UTF-8 bytes) of each part of
    the code a student writes as it stands: every simple statement at any depth, each decorator, and each def or
    class line up to its body. No evidence: an import, `pass`, a constant by itself (a docstring, `0;`)."""
    starts = [0]
    for line in raw.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def at(line, col):
        return starts[line - 1] + col

    def piece(start, end):
        return start, end, _shape(raw[start:end].decode("utf-8", "surrogatepass"))

    for node in _statements(tree):
        if not isinstance(getattr(node, "body", None), list):
            yield (*piece(at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)),
                   isinstance(node, _NO_EVIDENCE) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:
                begin = at(d.lineno, d.col_offset)
                sign = raw.rfind(b"@", starts[d.lineno - 1], begin)
                yield (*piece(sign if sign >= 0 else begin, at(d.end_lineno, d.end_col_offset)), False)
            yield (*piece(at(node.lineno, node.col_offset), at(node.body[0].lineno, node.body[0].col_offset)), False)


def _statements(tree):
    """Every statement of a tree, at any depth (expressions are not walked: they hold none)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        todo += getattr(node, "body", []) + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
        todo += [s for part in getattr(node, "handlers", []) + getattr(node, "cases", []) for s in part.body]


def stub_lines(stub):
    """The shapes of the parts of a release cell a student keeps as they are (def and class lines, decorators,
    imports, `super().__init__()`, `raise NotImplementedError()`; not its docstrings, filtered to one S anyway)."""
    code, tree = _python(stub or "")
    if tree is None:
        return set()
    return {shape for _, _, shape, none in _pieces(tree, code.encode("utf-8", "surrogatepass")) if shape and not none}


def _shape(text):
    """Code with its comments gone, every name but the keywords replaced by V and no blanks (what the filter would
    make of it)."""
    text = re.sub(r"#[^\n]*", "", text)
    return re.sub(r"\s+", "", _NAME_RE.sub(lambda m: m.group() if keyword.iskeyword(m.group()) else "V", text))


def _python(source):
    """(the code a cell runs in its canonical form (`_canonical`), its syntax tree): of the source, or of what IPython
    makes of it (`%%time` and other magics); (source, None) when that is not Python either (it does not run)."""
    code = source if _parsed(source) is not None else _ipython_code(source)
    if code is None or _parsed(code) is None:
        return source, None
    canonical = _canonical(code)
    tree = _parsed(canonical) if canonical is not None else None
    return (code, _parsed(code)) if tree is None else (canonical, tree)


class _Unannotated(ast.NodeTransformer):
    """A tree without its type annotations (Python never checks them): `x: T = v` is `x = v`, `x: T` goes."""

    def visit_arg(self, node):
        node.annotation = None
        return node

    def visit_FunctionDef(self, node):
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):
        return ast.Pass() if node.value is None else ast.Assign([node.target], node.value, lineno=node.lineno)


def _canonical(code):
    """Parsed Python written back by `ast.unparse`, without annotations, or None: what no cosmetic edit changes (`;`,
    parentheses, line breaks, backslashes, trailing commas, quotes, comments, blank lines: each breaks the k-grams
    around it in the text as written)."""
    try:
        return ast.unparse(ast.fix_missing_locations(_Unannotated().visit(ast.parse(code))))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@functools.cache
def _transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


def _ipython_code(source):
    try:
        return _transformer().transform_cell(source)
    except Exception:  # not IPython's either (or no IPython): it is compared as written
        return None


def _code_in_strings(tree):
    """The string literals of a parsed code that are code defining a function or class (what `exec` would run):
    the filter would make each one token, S."""
    out = []
    for node in ast.walk(tree) if tree else ():
        value = node.value if isinstance(node, ast.Constant) else None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str) and ("\n" in value or "\r" in value):
            value = value.replace("\r\n", "\n").replace("\r", "\n")
            inner = _parsed(value)
            if inner and any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.walk(inner)):
                out.append(value)
    return out


def _without_common(code, tree, unavoidable):
    """`code` without what is no evidence (imports, `pass`, constants by themselves) and the parts shaped like the
    release cell's (`_pieces`), read on its syntax tree: `import math; x = 1` keeps `x = 1`, an import inside a block
    or a function goes too; code that is not Python is kept as written."""
    if tree is None:
        return code
    raw = code.encode("utf-8", "surrogatepass")
    cuts = [(start, end) for start, end, shape, none in _pieces(tree, raw) if none or shape in unavoidable]
    kept, done = [], 0
    for start, end in sorted(cuts):
        kept.append(raw[done:max(start, done)])
        done = max(done, end)
    kept.append(raw[done:])
    return b"".join(kept).decode("utf-8", "surrogatepass")


def _answer_code(source, unavoidable):
    """The answer without what every student writes (`_without_common`), and with the code its strings hold; an
    answer that does not parse, part by part (`_parts`)."""
    code, tree = _python(source)
    parts = [(code, tree)] if tree is not None else [_python(p) if _parsed(p) else (p, None) for p in _parts(code)]
    strings = [text for _, t in parts for text in _code_in_strings(t)]
    return "\n\n".join([*(_without_common(c, t, unavoidable) for c, t in parts),
                         *(_without_common(*_python(text), unavoidable) for text in strings)])


def _parts(source, most=4):
    """A source that does not parse (a broken cell joined to a good one), cut before each line that is not indented:
    each part joined with up to `most` - 1 that follow where that parses (a decorator and its def, `if` and `else`),
    so that what parses is compared in its canonical form, and only the rest as written."""
    lines = source.splitlines(keepends=True)
    bounds = [0, *(i for i, line in enumerate(lines) if i and line.strip() and line[0] not in " \t"), len(lines)]
    chunks = ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]
    out, i = [], 0
    while i < len(chunks):
        n = next((n for n in range(min(most, len(chunks) - i), 1, -1) if _parsed("".join(chunks[i:i + n]))), 1)
        out.append("".join(chunks[i:i + n]))
        i += n
    return out


@functools.lru_cache(maxsize=128)  # reuse within one student; bounded memory for a class of long answers
def _parsed(source):
    """The syntax tree of a source (shared: only read, never changed), or None."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


_BINDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def _bound(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _lines_of(lines, node):
    return "\n".join(lines[node.lineno - 1:node.end_lineno])


def _definitions(source):
    """{name: [(a statement binding it, the cell's lines)]} of one answer cell: every def, class and assignment
    at any depth (inside `if True:` too, `_Base = None` before `class _Base` as well). One walk of the tree."""
    tree = _parsed(source) if len(source) <= MAX_CHARS else None
    lines, out = source.splitlines(), {}
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, _BINDS):
            for name in _bound(node):
                out.setdefault(name, []).append((node, lines))
    return out


def _names_in(tree):
    """The global names a tree uses (by Python's scope rules: a parameter or local of its own functions is not
    one, so `x` in `forward(self, x)` never pulls in another cell's `x = ...`), and the strings in it that are
    names (`globals()["_Base"]`)."""
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
               and n.value.isidentifier()}
    try:
        tables = [symtable.symtable(ast.unparse(tree), "<answer>", "exec")]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return strings | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names = set()
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        names |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and (table.get_type() == "module" or s.is_global())}
    return strings | names


def _used_names(source):
    tree = _parsed(source) if len(source) <= MAX_CHARS else None
    return _names_in(tree) if tree else set()


def with_helpers(cells):
    """{grade_id: answer} of one student's notebook, each answer followed by what it uses from the other
    answer cells (a base class, a helper function, an alias, and what those use in turn): a copy moved into
    another exercise's cell is compared where it is used. A function or class another cell defines is followed
    even where this cell binds the name too (`MultiHeadAttention = MultiHeadAttention`, a local `_Base`);
    an assignment only where this cell does not."""
    defined = {gid: _definitions(src) if isinstance(src, str) else {} for gid, src in cells.items()}
    out = {}
    for gid, src in cells.items():
        if not isinstance(src, str):
            out[gid] = src
            continue
        elsewhere = {}
        for other, defs in defined.items():
            if other != gid:
                for name, bindings in defs.items():
                    elsewhere.setdefault(name, []).extend(bindings)
        own, added, seen, todo = set(defined[gid]), {}, set(), _used_names(src)   # added: an ordered set
        while todo:
            name = todo.pop()
            if name in seen or name not in elsewhere:
                continue
            seen.add(name)
            for node, lines in elsewhere[name]:
                if name in own and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                segment = textwrap.dedent(_lines_of(lines, node))  # a definition nested in `if True:` too
                if segment not in added:
                    added[segment] = None
                    todo |= _names_in(node)
        out[gid] = "\n\n".join([src, *added])
    return out


def _units(source):
    """The outermost function and class definitions of an answer (at any statement depth, `if True:`
    included; never a method or a nested function, whose lines the exercise dictates), each on its own: a
    copied function wrapped in code of the student's own is compared with a reference by itself."""
    tree = _parsed(source) if isinstance(source, str) and len(source) <= MAX_CHARS else None
    lines, out, todo = (source.splitlines() if tree else []), [], list(tree.body) if tree else []
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(textwrap.dedent(_lines_of(lines, node)))
        else:
            todo += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
    return out


def _kgram_hashes(source, k):
    """Every k-gram hash of a source's filtered code (window 1), as copydetect computes boilerplate."""
    fp = _fingerprint(source, k, 1, MAX_REFERENCE_CHARS)
    return set() if fp is None else set(fp.hashes)


def _release(stub, k):
    """(every k-gram hash of the release cell, as written and in its canonical form, its code lines) for one
    exercise."""
    if not stub:
        return set(), set()
    code, tree = _python(stub)
    strings = _code_in_strings(tree)
    return (_kgram_hashes("\n\n".join([stub, *strings]), k) | _kgram_hashes("\n\n".join([code, *strings]), k),
            stub_lines(stub))


def _answer_fingerprint(source, release, k, win_size):
    """The fingerprint of an answer without its imports, the release cell's lines and the release cell's k-grams."""
    if not isinstance(source, str):
        return None
    code = _answer_code(source, release[1])  # never cut: a copy in a string lies after the source (red team)
    fp = _fingerprint(code, k, win_size, len(code))
    return None if fp is None else _without(fp, release[0])


def _without(fp, hashes):
    """A copy of `fp` without the fingerprints in `hashes`, its token_coverage recomputed.

    (Not CodeFingerprint's own boilerplate=: in copydetect 0.5.0 it also drops repeats of fingerprints that are
    not boilerplate at all, np.intersect1d being told the winnowed hashes are unique when they are not.)"""
    out = copy.copy(fp)
    out.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in hashes}
    out.hashes = set(out.hash_idx)
    out.token_coverage = float(get_token_coverage(out.hash_idx, fp.k, len(fp.filtered_code)))
    return out


def _similarities(fa, fb):
    """(share of a's fingerprinted code found in b, the same for b), and b's matched slices in its source."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, (sa, sb), (_, slices_b) = compare_files(fa, fb)
    return min(float(sa), 1.0), min(float(sb), 1.0), slices_b


def _excerpt(source, slices):
    """The lines of `source` the slices touch, "…" between runs that are not adjacent."""
    if len(slices) == 0 or len(slices[0]) == 0:
        return source
    starts = np.concatenate([[0], np.cumsum([len(line) for line in source.splitlines(keepends=True)])])
    lines = source.splitlines()
    keep = set()
    for s, e in zip(slices[0], slices[1]):
        first = int(np.searchsorted(starts, s, side="right")) - 1
        last = int(np.searchsorted(starts, max(e - 1, s), side="right")) - 1
        keep.update(range(max(first, 0), min(last, len(lines) - 1) + 1))
    out, prev = [], None
    for i in sorted(keep):
        if prev is not None and i != prev + 1:
            out.append("…")
        out.append(lines[i])
        prev = i
    return "\n".join(out)


def _shared_occurrences(fps):
    """occ[a, b] = how many fingerprint positions of answer a carry a hash answer b has too.

    An inverted index (hash -> answers) touches only the pairs that share a fingerprint; occ[a, b] * k bounds
    the overlap compare_files can find, so pairs that cannot reach the threshold are never compared."""
    n = len(fps)
    index = {}
    for i, fp in enumerate(fps):
        for h, positions in fp.hash_idx.items():
            index.setdefault(h, []).append((i, len(positions)))
    occ = np.zeros((n, n), dtype=np.float64)
    for postings in index.values():
        if len(postings) < 2:
            continue
        who = np.fromiter((i for i, _ in postings), dtype=np.intp, count=len(postings))
        count = np.fromiter((c for _, c in postings), dtype=np.float64, count=len(postings))
        occ[np.ix_(who, who)] += count[:, None]
    np.fill_diagonal(occ, 0)
    return occ


def _common_hashes(fps):
    """Fingerprints found in at least COMMON_SHARE of these answers, and in at least COMMON_MIN of them."""
    need = max(COMMON_MIN, COMMON_SHARE * len(fps))
    counts = {}
    for fp in fps:
        for h in fp.hashes:
            counts[h] = counts.get(h, 0) + 1
    return {h for h, c in counts.items() if c >= need}


TOO_LONG = f"超过 {MAX_CHARS} 个字符，不截断也不比较：请人工查看"
EMPTY = "空的"
NOTHING_LEFT = "去掉导入语句和发布版的代码后没有可比较的代码"


def _compare_exercise(grade_id, answers, stub, references):
    """(pairs, number compared or None, {student: why their answer was not compared}, None or why the exercise was
    not compared) for one exercise. An exercise not compared lists only its answers too long to compare (the
    exercise's reason covers the rest)."""
    release = _release(stub, K)
    stub_hashes = release[0]
    answered, seen, left_out = {}, {}, {}
    for student, source in answers.items():
        if isinstance(source, str) and len(source) > MAX_CHARS:  # never cut: what lies past a cut would hide
            left_out[student] = TOO_LONG
            continue
        key = source if isinstance(source, str) else None
        if key not in seen:                 # identical answers (copies, untouched stubs) are fingerprinted once
            seen[key] = _answer_fingerprint(source, release, K, WIN_SIZE)
        fp = seen[key]
        if fp is not None and fp.token_coverage > 0:
            answered[student] = fp
        else:
            left_out[student] = EMPTY if not isinstance(source, str) or not source.strip() else NOTHING_LEFT
    too_long = {s: why for s, why in left_out.items() if why == TOO_LONG}
    if not answered:
        return [], None, too_long, "没有可比较的答案：都是空的、只有发布版的代码，或无法分词"
    common = _common_hashes(list(answered.values()))
    if common:
        answered = {s: _without(fp, common) for s, fp in answered.items()}
    long = sorted(s for s, fp in answered.items() if fp.token_coverage >= MIN_TOKENS)
    if not long or len(long) < SHORT_SHARE * len(answered):
        return [], None, too_long, (f"答案几乎都太短：去掉发布版的代码和全班共有的写法后，{len(answered)} 份答案中只有 {len(long)} 份"
                          f"有至少 {MIN_TOKENS} 个可比较的记号；短答案彼此必然相似，不作比较")
    left_out |= {s: f"太短：去掉导入、发布版的代码和全班共有的写法后只有 {int(fp.token_coverage)} 个可比较的记号"
                    f"（至少要 {MIN_TOKENS} 个）" for s, fp in answered.items() if fp.token_coverage < MIN_TOKENS}
    fps = [answered[s] for s in long]
    pairs = []
    occ = _shared_occurrences(fps)
    coverage = np.array([fp.token_coverage for fp in fps])
    bound = np.minimum(1.0, occ * K / coverage[:, None])          # bound[a, b] >= share of a found in b
    candidates = np.argwhere(np.triu((np.minimum(bound, bound.T) >= THRESHOLD) | (np.maximum(bound, bound.T) >= CONTAINED), 1))
    for i, j in candidates:
        sa, sb, _ = _similarities(fps[i], fps[j])
        a, b = long[i], long[j]
        if min(sa, sb) >= THRESHOLD:
            pairs.append(Pair(grade_id, a, b, min(sa, sb), answers[a], answers[b], "students"))
        elif max(sa, sb) >= CONTAINED:
            pairs.append(Pair(grade_id, a, b, max(sa, sb), answers[a], answers[b], "contained"))
    units = {}
    for label, (ref_source, ref_fp) in references.items():
        ref = _without(ref_fp, stub_hashes | common)
        for s, fp in zip(long, fps):
            if not fp.hashes & ref.hashes:
                continue
            sa, _, slices = _similarities(fp, ref)
            if sa < THRESHOLD and sa * fp.token_coverage >= THRESHOLD * MIN_TOKENS:
                # a function or class of the answer, long enough on its own, may be found where the whole is not
                if s not in units:
                    units[s] = [u for u in (_answer_fingerprint(src, release, K, WIN_SIZE) for src in _units(answers[s]))
                                if u is not None and _without(u, common).token_coverage >= MIN_TOKENS]
                for u in units[s]:
                    if u.hashes & ref.hashes:
                        su, _, slices_u = _similarities(_without(u, common), ref)
                        if su > sa:
                            sa, slices = su, slices_u
            if sa >= THRESHOLD:
                pairs.append(Pair(grade_id, s, label, sa, answers[s], _excerpt(ref_source[:MAX_REFERENCE_CHARS], slices),
                                  "reference"))
    return pairs, len(long), left_out, None


def reference(source, k=K, win_size=WIN_SIZE):
    """(the code of a reference in its canonical form where it parses, its fingerprint or None)."""
    code = _python(source)[0] if isinstance(source, str) and len(source) <= MAX_REFERENCE_CHARS else source
    return code, _fingerprint(code, k, win_size, MAX_REFERENCE_CHARS)


def compare(answers, boilerplate, references):
    """Answers that look copied, per exercise.

    answers:     {grade_id: {student_id: source of the student's answer cell(s)}}; untrusted text, only tokenised
    boilerplate: {grade_id: the release's own cell source for the exercise}
    references:  {label: source} of code students can see; every compared answer is checked against each
    Returns a Comparison: pairs scoring >= threshold, highest first; what was compared; what was not, and why:
    each exercise, and each answer of an exercise compared (and any answer too long to compare).
    """
    refs = {str(label): ref for label, source in (references or {}).items()
            if (ref := reference(source))[1] is not None}
    result = Comparison(threshold=THRESHOLD, k=K, win_size=WIN_SIZE)
    for grade_id, by_student in answers.items():
        pairs, n, left_out, why = _compare_exercise(grade_id, by_student or {}, (boilerplate or {}).get(grade_id), refs)
        result.pairs += pairs
        if left_out:
            result.left_out[grade_id] = left_out
        if why is None:
            result.compared[grade_id] = n
        else:
            result.skipped[grade_id] = why
    result.pairs.sort(key=lambda p: (-p.score, p.grade_id, p.kind != "students", p.a, p.b))
    return result
