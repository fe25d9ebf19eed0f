"""mha_selfcheck: the student's own checks of a multi-head attention, graded by mutation analysis.

- The classes under test are what the grader's table says they are: each hand-written correct class passes
  exercise `mha`, each buggy one fails it with the same bug named, and the notebook's solution checker sees
  every bug where the table says (and only a blind property misses it) at every size the hidden cases use.
- The classes that ship (public cases, in the wheel) are no answer: their attention is PyTorch's own, which
  `mha` forbids. The hand-written ones reach a kernel only in the hidden cases, and never while a test cell of
  `mha` or `split_merge_heads` is still to run: a student who moves the hidden check up gets them withheld
  (tests of `withheld` here, and through both entry points below).
- Through both entry points: the solution earns every point; a checker that stashes the classes to answer
  `mha` with them earns nothing for `mha`; a checker that borrows the companion script or the course's
  reference earns nothing for the checks (both are empty shells in the grading sandbox).
"""
import re

import nbformat
import pytest
import torch
from w1d1_student.exercises.nb04_multihead import CLEAR, PROPERTIES, ZERO, _class_under_test

from autograder.chain.case_delivery import delivery, withheld
from autograder.chain.verdicts import judge_cell
from autograder.course import ASSIGNMENT, SOURCE_DIR
from autograder.exercises import nb04_multihead as grader
from autograder.exercises.private import PRIVATE
from autograder.report.grade_tables import graded_cells
from tests.entry_points import grade_both
from tests.test_mutations import verdicts
from tests.variants import exercises_of, notebook_solution
from tests.variants.nb04_multihead import MHA, SELFCHECK

NB = "04_multihead"
GRADED = [f"{gid}{part}" for gid in exercises_of(NB) for part in ("", "__hidden")]


def _solution_checker():
    ns = {"__name__": "__main__"}
    exec(compile(notebook_solution("mha_selfcheck"), "<solution>", "exec"), ns)
    return ns["mha_property_errors"]


def _names_the_bug(verdict, bug):
    keys = [part for key, _ in verdict.mistakes if key for part in key.split("/")]
    return any(k.startswith(bug) or bug.startswith(k) for k in keys)


@pytest.mark.parametrize("source", list(grader.CLASSES), ids=[f"{s}-{b}" for s, b in grader.CLASSES.values()])
def test_each_class_is_what_the_table_says_by_exercise_mha(source):
    style, bug = grader.CLASSES[source]
    results = verdicts(source, "mha")
    if style == "torch_own":  # the public ones: PyTorch's own attention, which mha forbids
        assert not any(v.passed for v in results)
        assert all("nn.MultiheadAttention" in v.message for v in results), results[0].message
    elif bug is None:
        assert all(v.passed for v in results), results[0].message
    else:
        assert not any(v.passed for v in results)
        assert all(_names_the_bug(v, bug) for v in results), [v.mistakes for v in results]


def _hidden(seeds):
    return [c for seed in seeds for c in grader.CASES["mha_selfcheck"](seed, True)]


def _template(case):
    role = (case[PRIVATE]["style"], case[PRIVATE]["bug"])
    return next(src for src, r in grader.CLASSES.items() if r == role)


def test_a_hidden_class_computes_what_its_template_does():
    """Written afresh, a hidden class computes its template's outputs and weights exactly, with and without masks."""
    for case in _hidden(range(3)):
        mine, template = _class_under_test(case["source"]), _class_under_test(_template(case))
        for d_model, n_heads in ((16, 4), (6, 1)):
            a, b = template(d_model, n_heads).double(), mine(d_model, n_heads).double()
            b.load_state_dict(a.state_dict())
            x = torch.randn(2, 5, d_model, dtype=torch.float64)
            causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
            for mask in (None, causal, causal | (torch.arange(5) >= 3)):
                with torch.no_grad():
                    for want, got in zip(a(x, mask, need_weights=True), b(x, mask, need_weights=True)):
                        assert torch.equal(want.nan_to_num(7.0), got.nan_to_num(7.0)), (case[PRIVATE], case["source"])


def test_the_table_holds_for_the_solution_checker_at_every_size():
    """Correct: every value ≤ 1e-6. A bug: every property that must see it > 1e-4; every property the table calls
    blind really sees nothing (≤ 1e-6), so no correct checker is asked for the impossible (the other correct
    styles of checker meet the table through the hidden check: tests/variants/nb04_multihead.py)."""
    check = _solution_checker()
    for source, (style, bug) in grader.CLASSES.items():
        cls = _class_under_test(source)
        for d_model, n_heads in grader._SIZES:
            torch.manual_seed(0)
            got = check(cls, d_model, n_heads)
            where = (style, bug, d_model, n_heads, got)
            if bug is None:
                assert all(got[p] <= ZERO for p in PROPERTIES), where
                continue
            sees, blind = grader.SELFCHECK_TABLE[bug]
            assert all(not got[p] <= CLEAR for p in sees), where
            assert all(got[p] <= ZERO for p in blind), where


def test_every_bug_of_the_table_is_written_and_every_style_is_used():
    bugs = {bug for _, bug in grader.CLASSES.values()} - {None}
    assert bugs == set(grader.SELFCHECK_TABLE)
    for seed in range(3):
        hidden = [(c[PRIVATE]["style"], c[PRIVATE]["bug"]) for c in grader.CASES["mha_selfcheck"](seed, True)]
        assert {bug for _, bug in hidden} - {None} == bugs  # every bug in every run
        assert {style for style, bug in hidden if bug is None} == set(grader._STYLES) - {"torch_own"}
        assert not any(style == "torch_own" for style, _ in hidden)
    public = [grader.CLASSES[c["source"]] for c in grader.CASES["mha_selfcheck"](0, False)]
    assert public == list(grader.PUBLIC_CLASSES) and all(style == "torch_own" for style, _ in public)


def test_a_class_under_test_looks_like_the_students_own():
    """No name, module, source file or attribute tells a grader's class from a student's, or one grader class
    from another."""
    import inspect

    seen = set()
    for source in list(grader.CLASSES) + [c["source"] for c in _hidden(range(2))]:
        cls = _class_under_test(source)
        assert (cls.__name__, cls.__qualname__, cls.__module__) == ("MultiHeadAttention",) * 2 + ("__main__",)
        seen.add(tuple(sorted(vars(cls))))
        with pytest.raises((OSError, TypeError)):
            inspect.getsource(cls.forward)
    assert len(seen) == 1, seen


def _code_objects(cls):
    out = []

    def walk(code):
        out.append(code)
        for const in code.co_consts:
            if hasattr(const, "co_code"):
                walk(const)

    for name in sorted(vars(cls)):
        if hasattr(vars(cls)[name], "__code__"):
            walk(vars(cls)[name].__code__)
    return out


# exact properties of a class's code objects a checker could look a class up by
EXACT = {
    "bytecode": lambda codes: tuple(c.co_code for c in codes),
    "forward bytecode": lambda codes: next(c.co_code for c in codes if c.co_name == "forward"),
    "length of forward's bytecode": lambda codes: len(next(c.co_code for c in codes if c.co_name == "forward")),
    "names": lambda codes: tuple(c.co_names for c in codes),
    "local names": lambda codes: tuple(c.co_varnames for c in codes),
    "constants": lambda codes: tuple(repr(c.co_consts) for c in codes),
    "line table": lambda codes: tuple(c.co_linetable for c in codes),
    "everything (the red team's hash)": lambda codes: tuple((c.co_code, c.co_names, repr(c.co_consts)) for c in codes),
}


@pytest.mark.parametrize("prop", list(EXACT))
def test_no_exact_property_of_the_code_names_a_hidden_class(prop):
    """A table of an exact property of the code objects, made from every class of 20 other runs (and the
    templates), cannot name every hidden class of a run: for each run some class has a value the table never
    saw or saw with another role. A checker that looks classes up that way misses one, so never earns full marks."""
    key = EXACT[prop]
    seen = {}
    cases = _hidden(range(100, 120))
    roles = [(c[PRIVATE]["style"], c[PRIVATE]["bug"]) for c in cases]
    sources = [c["source"] for c in cases] + list(grader.CLASSES)
    for source, role in zip(sources, roles + list(grader.CLASSES.values())):
        seen.setdefault(key(_code_objects(_class_under_test(source))), set()).add(role[1])
    for seed in range(3):
        named = []
        for case in grader.CASES["mha_selfcheck"](seed, True):
            bugs = seen.get(key(_code_objects(_class_under_test(case["source"]))), set())
            named.append(bugs == {case[PRIVATE]["bug"]})
        assert not all(named), (prop, seed)
    if prop.startswith("everything"):  # every hidden class is new to it
        assert not any(key(_code_objects(_class_under_test(c["source"]))) in seen for c in _hidden(range(3)))


def test_which_bug_a_class_has_never_reaches_a_kernel(tmp_path):
    """The run's case file holds what the grader knows of each class; the cell that hands a kernel its cases
    (case_delivery.py) sends the classes without it."""
    from autograder.exercises.checks import write_case_file

    path = write_case_file(3, tmp_path)
    assert f'"{PRIVATE}":{{"style"' in open(path, encoding="utf-8").read()
    nb = _source_nb()
    for gid in ("test_mha_selfcheck", "test_mha_selfcheck__hidden"):
        index = next(i for i, c in enumerate(nb.cells) if c.id == gid)
        sent = delivery(nb, index, lambda: path)
        assert "class MultiHeadAttention" in sent and PRIVATE not in sent and '"bug"' not in sent, gid


def _moved(nb, gids, before):
    """The notebook with the cells `gids` moved, in order, right before the cell `before`."""
    cells = [c for c in nb.cells if c.id in gids]
    nb.cells = [c for c in nb.cells if c.id not in gids]
    at = next(i for i, c in enumerate(nb.cells) if c.id == before)
    nb.cells[at:at] = cells
    return nb


def _source_nb():
    return nbformat.read(SOURCE_DIR / ASSIGNMENT / f"{NB}.ipynb", as_version=4)


def test_hidden_classes_are_withheld_while_a_check_they_answer_is_still_to_run():
    nb = _source_nb()
    assert not any(withheld(nb, i) for i in range(len(nb.cells)))  # the notebook's own order
    moved = _moved(_source_nb(), ["test_mha_selfcheck", "test_mha_selfcheck__hidden"], "test_mha")
    held = {c.id: withheld(moved, i) for i, c in enumerate(moved.cells) if withheld(moved, i)}
    assert held == {"test_mha_selfcheck__hidden": {"mha_selfcheck": ["mha"]}}
    cell = next(c for c in moved.cells if c.id == "test_mha_selfcheck__hidden")
    passed, message, records = judge_cell(moved, cell, seed=0)
    assert not passed and "没有运行" in message and "mha" in message
    assert records[0]["mistakes"][0][1] == message


# ------------------------------------------------------------------ graded through both entry points

# keeps every class it is handed with its output on a probe; no SDPA call in the cell (the static check would zero
# mha for one above mha's checks); the sdpa property is left out
STASH = SELFCHECK.replace("def mha_property_errors(mha_cls, d_model=16, n_heads=4):\n", """_STASH = []


def _probe(cls):
    torch.manual_seed(123)
    m = cls(8, 2).double()
    with torch.no_grad():
        return m(torch.randn(2, 5, 8, dtype=torch.float64), torch.ones(5, 5, dtype=torch.bool).triu(1))


def _most_agreed():
    return max(reversed(_STASH), key=lambda item: sum(bool(torch.allclose(item[1], o, atol=1e-9)) for _, o in _STASH))[0]


def mha_property_errors(mha_cls, d_model=16, n_heads=4):
    _STASH.append((mha_cls, _probe(mha_cls)))
""")
STASH = STASH[:STASH.index("        def heads(t):")] + '        errors["sdpa"] = 0.0\n    return errors\n'
DELEGATES = MHA[:MHA.index("    def forward(")] + """    def forward(self, x, mask=None, need_weights=False):
        return _most_agreed().forward(self, x, mask, need_weights)  # the class most others agree with
"""
COMPANION = SELFCHECK.replace('''        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_model), dim=-1)
        errors["single_head"] = (one(x) - one.W_o(a @ v)).abs().max().item()''', '''        import w1day1_checks
        q, k, v = one.W_q(x), one.W_k(x), one.W_v(x)
        ys = [torch.as_tensor(w1day1_checks.attention(q[b].numpy(), k[b].numpy(), v[b].numpy())[0]) for b in range(B)]
        errors["single_head"] = (one(x) - one.W_o(torch.stack(ys))).abs().max().item()''')
REFERENCE = SELFCHECK.replace('''        def heads(t):''', '''        from w1d1_attention import MultiHeadAttention as Reference
        ref = Reference(d_model, n_heads).double()
        ref.load_state_dict(mha.state_dict())
        errors["sdpa"] = (y - ref(x, causal)).abs().max().item()
        return errors

        def heads(t):''')


def _submission(answers, move=None):
    nb = _source_nb()
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return _moved(nb, *move) if move else nb


def build(subs):
    students = {
        "honest": _submission({}),
        # the checker keeps the classes it is handed; its MultiHeadAttention borrows the one most others agree with
        # (a correct one): its cells moved above mha's, hoping for the hidden (hand-written) classes first
        "stasher": _submission({"mha_selfcheck": STASH, "mha": DELEGATES},
                               move=(["mha_selfcheck", "test_mha_selfcheck", "test_mha_selfcheck__hidden"], "mha")),
        "companion": _submission({"mha_selfcheck": COMPANION}),
        "reference": _submission({"mha_selfcheck": REFERENCE}),
    }
    for student, nb in students.items():
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / f"{NB}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("selfcheck")
    build(root / "class")
    return grade_both(root / "class", root, seed=5, jobs=2)


@pytest.fixture(params=("command", "nbgrader"))
def scores(graded, request):
    run = graded[request.param]
    assert run.returncode == 0, run.log[-3000:]
    table = {}
    for (student, notebook, grade_id), score in run.scores.items():
        if notebook == NB:
            table[(student, grade_id.removeprefix("test_"))] = score
    return table, run


def _full(table, student, *cells):
    worth = dict(graded_cells(NB)[0])
    return all(table[(student, cell)] == worth[f"test_{cell}"] > 0 for cell in cells)


def test_the_solution_earns_every_point(scores):
    table, _ = scores
    assert sorted(cell for student, cell in table if student == "honest") == sorted(GRADED)
    assert _full(table, "honest", *GRADED)


def test_classes_stashed_by_a_checker_answer_nothing(scores):
    table, run = scores
    assert table[("stasher", "mha")] == table[("stasher", "mha__hidden")] == 0
    assert table[("stasher", "mha_selfcheck__hidden")] == 0
    page = run.page("stasher", NB)
    assert "nn.MultiheadAttention" in page  # it got only the public classes: PyTorch's own attention
    assert re.search(r"mha_selfcheck（隐藏检查）这次没有运行", page)


def test_checks_borrowed_from_the_course_earn_nothing(scores):
    """The companion script (an empty shell in the sandbox) earns nothing for the checks; the course's reference is
    a module the grading environment lacks, code the static check cannot read: the whole notebook scores 0."""
    table, run = scores
    for student in ("companion", "reference"):
        assert table[(student, "mha_selfcheck")] == table[(student, "mha_selfcheck__hidden")] == 0
    assert _full(table, "companion", "mha", "mha__hidden", "split_merge_heads", "split_merge_heads__hidden")
    assert not any(score for (student, _), score in table.items() if student == "reference")
    assert "import w1d1_attention（评分环境里没有这个模块" in run.page("reference", NB)
