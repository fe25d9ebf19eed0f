"""Case generators draw from a generator that depends on the grading run's seed and on the exercise."""
import numpy as np


def rng(seed, salt):
    """Never global state: the same (seed, salt) gives the same cases in every process."""
    return np.random.default_rng([int(seed), sum(ord(c) * 131 ** i for i, c in enumerate(salt)) % 2**32])
