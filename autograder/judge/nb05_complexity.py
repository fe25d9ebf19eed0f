"""Answers of notebook 05 (§5): exact counts, and the counts the known bugs give."""


def mha_flops(T, d):
    return 8 * T * d**2 + 4 * T**2 * d


def generation(T, d, kv_cache, steps=None):
    steps = range(1, T + 1) if steps is None else steps
    if kv_cache:
        return sum(8 * d**2 + 4 * t * d for t in steps)
    return sum(8 * t * d**2 + 4 * t**2 * d for t in steps)


def _td(f):
    return lambda c: f(c["T"], c["d"])


def _mem(f):
    return lambda c: f(c["B"], c["h"], c["T"], 2 if c["bpe"] is None else c["bpe"], 1 if c["n_layers"] is None else c["n_layers"])


def _gen(f):
    """A bug that does not apply to a case counts as -1 (never a student's answer)."""
    def count(c):
        n = f(c["T"], c["d"], c["kv_cache"])
        return -1 if n is None else n
    return count


ORACLES = {
    "flops": {
        "flops": _td(mha_flops),
        "flops_macs": _td(lambda T, d: 4 * T * d**2 + 2 * T**2 * d),
        "flops_no_wo": _td(lambda T, d: 6 * T * d**2 + 4 * T**2 * d),
        "flops_no_av": _td(lambda T, d: 8 * T * d**2 + 2 * T**2 * d),
        "flops_swapped": _td(lambda T, d: 8 * d * T**2 + 4 * d**2 * T),
        "share": _td(lambda T, d: 4 * T**2 * d / mha_flops(T, d)),
        "share_projection": _td(lambda T, d: 8 * T * d**2 / mha_flops(T, d)),
        "share_over_projection": _td(lambda T, d: 4 * T**2 * d / (8 * T * d**2)),
        "share_percent": _td(lambda T, d: 100 * 4 * T**2 * d / mha_flops(T, d)),
        "share_macs": _td(lambda T, d: 2 * T**2 * d / mha_flops(T, d)),
    },
    "attn_memory": {
        "bytes": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe * L),
        "mem_no_layers": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe),
        "mem_no_bytes": _mem(lambda B, h, T, bpe, L: B * h * T * T * L),
        "mem_T": _mem(lambda B, h, T, bpe, L: B * h * T * bpe * L),
        "mem_no_heads": _mem(lambda B, h, T, bpe, L: B * T * T * bpe * L),
        "mem_bytes_2": _mem(lambda B, h, T, bpe, L: B * h * T * T * 2 * L),
        "mem_gib": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe * L / 2**30),
    },
    "generation_flops": {
        "flops": _gen(generation),
        "gen_from_0": _gen(lambda T, d, kv: generation(T, d, kv, range(0, T))),
        "gen_no_last": _gen(lambda T, d, kv: generation(T, d, kv, range(1, T))),
        "gen_swapped": _gen(lambda T, d, kv: generation(T, d, not kv)),
        "gen_last_only": _gen(lambda T, d, kv: mha_flops(T, d) if not kv else 8 * d**2 + 4 * T * d),
        "gen_cache_projection": _gen(lambda T, d, kv: sum(8 * t * d**2 + 4 * t * d for t in range(1, T + 1)) if kv else None),
        "gen_cache_queries": _gen(lambda T, d, kv: sum(8 * d**2 + 4 * t**2 * d for t in range(1, T + 1)) if kv else None),
        "gen_macs": _gen(lambda T, d, kv: generation(T, d, kv) // 2),
    },
}
