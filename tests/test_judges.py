"""The grader's own references agree with each other (analytic, autograd, finite differences)."""
import numpy as np

from autograder.judge import ex02


def test_backward_references_agree():
    g = np.random.default_rng(3)
    case = {"Q": g.normal(size=(2, 3, 4)), "K": g.normal(size=(2, 5, 4)), "V": g.normal(size=(2, 5, 3)),
            "dY": g.normal(size=(2, 3, 3)), "mask": np.triu(np.ones((3, 5), dtype=bool), k=3)}
    analytic = ex02.backward_ref(case["Q"], case["K"], case["V"], case["mask"], case["dY"])
    auto = ex02.autograd_grads(case)
    fd = ex02.finite_difference_grads(case)
    for key in ("dQ", "dK", "dV"):
        assert np.allclose(analytic[key], auto[key], rtol=1e-10, atol=1e-12), key
        assert np.allclose(analytic[key], fd[key], rtol=1e-5, atol=1e-7), key


def test_independent_check_catches_a_wrong_gradient():
    g = np.random.default_rng(4)
    case = {"stage": "t", "Q": g.normal(size=(3, 2)), "K": g.normal(size=(3, 2)), "V": g.normal(size=(3, 2)),
            "dY": g.normal(size=(3, 2)), "mask": None}
    good = ex02.autograd_grads(case)
    assert ex02._independent_checks(case, {"out": good}) is None
    bad = {**good, "dK": good["dK"] * 1.01}
    assert ex02._independent_checks(case, {"out": bad}) is not None
