"""How a case's inputs are read, where the student's side and the grader's side must read them alike:
the inputs as the driver hands them to the student (rounded to the case's dtype) and the scalar test
function of a numerical_gradient case. Neither a driver nor a verdict table: the grader's answer key
imports this module, never those."""
import numpy as np


def rounded(c, key):
    """A case's input as the student's code receives it: cast to the case's dtype, read back as float64."""
    return c[key].astype(c["dtype"]).astype(np.float64)


def ms_inputs(c):
    """masked_softmax (notebook 03): the scores as given and the mask broadcast to them."""
    s = rounded(c, "scores")
    return s, np.broadcast_to(c["mask"], s.shape)


def lp_inputs(c):
    """leftpad_safe (notebook 03): q, k, v, the key-padding mask and the upstream gradient."""
    return rounded(c, "q"), rounded(c, "k"), rounded(c, "v"), c["kp"], rounded(c, "gy")


def make_f(case):
    """The scalar test function of a numerical_gradient case (plain numpy, no reference)."""
    kind, p = case["kind"], case["params"]
    if kind == "cubic":  # Σ c x³ + Σ x_i x_{i+1}: curved and coupled
        return lambda x: float(np.sum(p["c"] * x**3) + np.sum(x.ravel()[:-1] * x.ravel()[1:]))
    if kind == "tanh":  # Σ C ⊙ tanh(X W)
        return lambda x: float(np.sum(p["C"] * np.tanh(x @ p["W"])))
    if kind == "exp":  # Σ c exp(a x) + ½(Σx)²: the central difference depends visibly on eps
        return lambda x: float(np.sum(p["c"] * np.exp(p["a"] * x)) + 0.5 * np.sum(x) ** 2)
    if kind == "quad":  # ½ xᵀ M x + bᵀ x on the flattened array, plus a product term
        return lambda x: float(0.5 * x.ravel() @ p["M"] @ x.ravel() + p["b"] @ x.ravel()
                               + np.prod(np.cos(x.ravel()[:3])))
    raise ValueError(kind)
