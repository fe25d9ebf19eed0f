"""Checks that pass without the work they stand for, through the real sandboxed grader by both entry points
(red team, breaks 3, 7 and 8):

- a self-check (mha_selfcheck) that writes one number, the class's distance to a reference of its own, under all
  five keys: it reports each bug also on the properties blind to it by the math, which the verdict now requires ≈ 0;
- a self-check that measures nothing and recognises the grader's correct classes by a hash of their code objects:
  the hidden classes are written afresh for each run, so no table made ahead of time knows them;
- a backward by numerical differentiation (complex step in attention_backward, central differences over the
  student's numerical_gradient in AttentionFunction.backward): the hidden check's large case needs ~10⁵ forwards,
  past the kernel's time limit per cell (the class's limit is shared_class.CELL_LIMIT; bench/numerical_backward.py
  measures them against the course's 120 s), which costs that test cell only; the public checks and every other
  exercise keep their points."""
import nbformat
import pytest

from autograder.report.grade_tables import graded_cells
from tests.entry_points import ENTRY_POINTS
from tests.shared_class import attack_class
from tests.test_backward_by_hand import _release_with
from tests.test_mha_selfcheck import _submission
from tests.variants.nb04_multihead import CHEAT_ONE_NUMBER, fingerprint_checker

NB2, NB4 = "02_scaled_dot_product", "04_multihead"

COMPLEX_STEP = '''import numpy as np


def _fwd_c(Q, K, V, mask):
    d_k = Q.shape[-1]
    S = (Q @ np.swapaxes(K, -1, -2)) / np.sqrt(d_k)
    if mask is not None:
        S = np.where(mask, -np.inf, S)
    S = S - np.max(S.real, axis=-1, keepdims=True)
    E = np.exp(S)
    A = E / np.sum(E, axis=-1, keepdims=True)
    return A @ V


def attention_backward(dY, cache):
    """complex step: one complex forward per input, exact to rounding"""
    Q, K, V, A = cache[:4]
    mask = A == 0
    h = 1e-30
    out = []
    for which in range(3):
        args = [np.asarray(Q, complex), np.asarray(K, complex), np.asarray(V, complex)]
        X = args[which]
        g = np.zeros(X.shape)
        for idx in np.ndindex(X.shape):
            X[idx] += 1j * h
            g[idx] = np.sum(dY * _fwd_c(*args, mask)).imag / h
            X[idx] -= 1j * h
        out.append(g)
    return tuple(out)
'''

CENTRAL_DIFFERENCES = '''import math

import numpy as np
import torch


class AttentionFunction(torch.autograd.Function):
    """forward as usual; backward: central differences of the numpy forward (numerical_gradient, exercise 3)"""

    @staticmethod
    def forward(ctx, q, k, v, mask=None):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        ctx.save_for_backward(q, k, v)
        ctx.mask = None if mask is None else mask.numpy().copy()
        return torch.softmax(scores, dim=-1) @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v = ctx.saved_tensors
        Q, K, V = (t.numpy().astype(np.float64) for t in (q, k, v))
        dY, mask = dy.numpy().astype(np.float64), ctx.mask

        def L(a, b, c):
            return float(np.sum(dY * attention_forward(a, b, c, mask)[0]))

        g = (numerical_gradient(lambda a: L(a, K, V), Q.copy()), numerical_gradient(lambda b: L(Q, b, V), K.copy()),
             numerical_gradient(lambda c: L(Q, K, c), V.copy()))
        return tuple(torch.from_numpy(x).to(q.dtype) for x in g) + (None,)
'''

SELFCHECKS = {"selfcheck_one_number": CHEAT_ONE_NUMBER, "selfcheck_fingerprint": fingerprint_checker()}
SELFCHECK_CELLS = ("test_mha_selfcheck", "test_mha_selfcheck__hidden")
NUMERIC_CELLS = ("test_attention_backward__hidden", "test_attention_function__hidden")


def build(subs):
    for student, checker in SELFCHECKS.items():
        (subs / student).mkdir()
        nbformat.write(_submission({"mha_selfcheck": checker}), subs / student / f"{NB4}.ipynb")
    (subs / "numeric_backward").mkdir()
    nb = _release_with(attention_backward=COMPLEX_STEP, attention_function=CENTRAL_DIFFERENCES)
    nbformat.write(nb, subs / "numeric_backward" / f"{NB2}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return attack_class(tmp_path_factory)  # build()'s students, graded with the other attack files'


def _worth(nb):
    return dict(graded_cells(nb)[0])


def _kept(g, student, nb, lost):
    return {gid: g.score(student, nb, gid) for gid, pts in _worth(nb).items() if gid not in lost and g.score(student, nb, gid) != pts}


@pytest.mark.parametrize("path", ENTRY_POINTS)
@pytest.mark.parametrize("student", list(SELFCHECKS))
def test_a_selfcheck_that_measures_no_property_earns_nothing(graded, path, student):
    g = graded[path]
    assert g.returncode == 0, g.log[-3000:]
    assert {gid: g.score(student, NB4, gid) for gid in SELFCHECK_CELLS} == dict.fromkeys(SELFCHECK_CELLS, 0.0)
    assert not _kept(g, student, NB4, SELFCHECK_CELLS), student  # mha and the rest keep their points
    assert "你的检查把一个错误报在了看不出它的性质上" in g.page(student, NB4)


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_numerical_differentiation_is_no_hand_derived_backward(graded, path):
    g = graded[path]
    assert g.returncode == 0, g.log[-3000:]
    assert {gid: g.score("numeric_backward", NB2, gid) for gid in NUMERIC_CELLS} == dict.fromkeys(NUMERIC_CELLS, 0.0)
    assert not _kept(g, "numeric_backward", NB2, NUMERIC_CELLS)  # the public checks pass: a timeout costs one cell
    assert g.page("numeric_backward", NB2).count("没有得到可用的检查结果：单元格没有运行完（前面的错误、超时或内核退出）") == 2
