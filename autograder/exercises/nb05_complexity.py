"""Notebook 05 (§5) on the grader's side: its cases and its answer key, one exercise next to the other.

Cases: plain data the student's code runs on, made from the run's seed (they travel to the kernel as data).
The hidden cases end with sizes drawn from the run's seed, so their answers change from run to run.
Answers: exact counts, and the counts the known bugs give.
"""
from .seeding import graded, rng

# ------------------------------------------------------------ cases

def _flops_cases(seed, hidden, salt):
    if not hidden:
        return [
            {"stage": "T=1, d=2 的小例子：8·1·4 + 4·1·2 = 40", "T": 1, "d": 2},
            {"stage": "T=2d 的交叉点（d=4, T=8）：两项相等，占比 0.5", "T": 8, "d": 4},
            {"stage": "正文表格的一行：d=768, T=512", "T": 512, "d": 768},
            {"stage": "超过 2^53 的计数（浮点数算不精确，只用整数运算）：T=3000017, d=4099", "T": 3000017, "d": 4099},
        ]
    return [
        {"stage": "正文表格：d=768, T=8192", "T": 8192, "d": 768},
        {"stage": "正文表格：d=4096, T=2048", "T": 2048, "d": 4096},
        {"stage": "正文表格：d=4096, T=32768", "T": 32768, "d": 4096},
        {"stage": "奇数尺寸 T=7, d=13", "T": 7, "d": 13},
        {"stage": "很大的整数（超过 2^53，浮点数算不精确）：T=1000003, d=12289", "T": 1000003, "d": 12289},
        _drawn(seed, salt, T=(2, 100_000), d=(2, 16_384)),
    ]


def _drawn(seed, salt, **ranges):
    """A case with integer sizes drawn from the run's seed, each in its [low, high] range."""
    g = rng(seed, salt)
    sizes = {k: int(g.integers(low, high + 1)) for k, (low, high) in ranges.items()}
    return {"stage": "随机尺寸：" + ", ".join(f"{k}={v}" for k, v in sizes.items()), **sizes}


def _memory_cases(seed, hidden, salt):
    if not hidden:
        return [
            {"stage": "默认参数（bf16，1 层）：B=1, h=1, T=3 → 1·1·9·2 = 18 字节",
             "B": 1, "h": 1, "T": 3, "bpe": None, "n_layers": None, "keywords": False},
            {"stage": "正文第一行：B=8, h=12, T=1024，每层", "B": 8, "h": 12, "T": 1024,
             "bpe": None, "n_layers": None, "keywords": False},
            {"stage": "正文第一行：全部 12 层（n_layers=12）", "B": 8, "h": 12, "T": 1024,
             "bpe": None, "n_layers": 12, "keywords": True},
            {"stage": "float32：bytes_per_element=4（别把 2 字节写死）", "B": 1, "h": 2, "T": 3,
             "bpe": 4, "n_layers": None, "keywords": True},
        ]
    return [
        {"stage": "float32（bytes_per_element=4）", "B": 2, "h": 3, "T": 5, "bpe": 4, "n_layers": None, "keywords": True},
        {"stage": "位置参数：bytes_per_element=4, n_layers=6", "B": 2, "h": 4, "T": 7, "bpe": 4, "n_layers": 6,
         "keywords": False},
        {"stage": "正文：7B 级 B=1, h=32, T=32768，32 层", "B": 1, "h": 32, "T": 32768, "bpe": 2, "n_layers": 32,
         "keywords": True},
        {"stage": "fp8（1 字节）、3 层", "B": 4, "h": 8, "T": 100, "bpe": 1, "n_layers": 3, "keywords": True},
        {**_drawn(seed, salt, B=(1, 64), h=(1, 64), T=(1, 65_536), bpe=(1, 8), n_layers=(1, 96)),
         "keywords": True},
    ]


def _generation_cases(seed, hidden, salt):
    if not hidden:
        return [
            {"stage": "T=1 且无缓存：只有一步，等于 mha_flops(1, d)", "T": 1, "d": 4, "kv_cache": False},
            {"stage": "T=1 且有缓存：8d² + 4d", "T": 1, "d": 4, "kv_cache": True},
            {"stage": "T=3, d=2，无缓存（t = 1, 2, 3 三步）", "T": 3, "d": 2, "kv_cache": False},
            {"stage": "T=3, d=2，有 KV 缓存", "T": 3, "d": 2, "kv_cache": True},
            {"stage": "T=200000, d=8192，无缓存：结果超过 int64 的范围（用 Python 的 int）", "T": 200000, "d": 8192,
             "kv_cache": False},
            {"stage": "T=200003, d=8191，无缓存：超过 2^53 的整数，用浮点数（/）算不精确", "T": 200003, "d": 8191,
             "kv_cache": False},
        ]
    return [
        {"stage": "T=2, d=5，无缓存", "T": 2, "d": 5, "kv_cache": False},
        {"stage": "T=10, d=64，有缓存", "T": 10, "d": 64, "kv_cache": True},
        {"stage": "T=100, d=768，无缓存", "T": 100, "d": 768, "kv_cache": False},
        {"stage": "T=1000, d=4096，有缓存", "T": 1000, "d": 4096, "kv_cache": True},
        {"stage": "T=300000, d=16384，无缓存：结果超过 int64 的范围", "T": 300000, "d": 16384, "kv_cache": False},
        {"stage": "T=300007, d=12289，无缓存：超过 2^53 的整数", "T": 300007, "d": 12289, "kv_cache": False},
        {**_drawn(seed, salt, T=(2, 5_000), d=(2, 8_192)), "kv_cache": bool(seed % 2)},
    ]


# ------------------------------------------------------------ answers

def mha_flops(T, d):
    return 8 * T * d**2 + 4 * T**2 * d


def power_sums(steps):
    """(n, Σt, Σt²) over `steps`, a range of consecutive integers, exactly: in closed form, as a loop over a
    case's 300 000 steps cost a third of a second each time it was judged."""
    def s1(n):
        return n * (n + 1) // 2

    def s2(n):
        return n * (n + 1) * (2 * n + 1) // 6

    lo, hi = steps.start - 1, steps.stop - 1
    return hi - lo, s1(hi) - s1(lo), s2(hi) - s2(lo)


def generation(T, d, kv_cache, steps=None):
    """Σ over the steps t of one step's cost: 8d² + 4td with the cache, 8td² + 4t²d without."""
    n, s1, s2 = power_sums(range(1, T + 1) if steps is None else steps)
    if kv_cache:
        return 8 * d**2 * n + 4 * d * s1
    return 8 * d**2 * s1 + 4 * d * s2


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


CASES, ANSWERS = graded({
    "flops": (_flops_cases, {
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
    }),
    "attn_memory": (_memory_cases, {
        "bytes": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe * L),
        "mem_no_layers": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe),
        "mem_no_bytes": _mem(lambda B, h, T, bpe, L: B * h * T * T * L),
        "mem_T": _mem(lambda B, h, T, bpe, L: B * h * T * bpe * L),
        "mem_no_heads": _mem(lambda B, h, T, bpe, L: B * T * T * bpe * L),
        "mem_bytes_2": _mem(lambda B, h, T, bpe, L: B * h * T * T * 2 * L),
        "mem_gib": _mem(lambda B, h, T, bpe, L: B * h * T * T * bpe * L / 2**30),
    }),
    "generation_flops": (_generation_cases, {
        "flops": _gen(generation),
        "gen_from_0": _gen(lambda T, d, kv: generation(T, d, kv, range(0, T))),
        "gen_no_last": _gen(lambda T, d, kv: generation(T, d, kv, range(1, T))),
        "gen_swapped": _gen(lambda T, d, kv: generation(T, d, not kv)),
        "gen_last_only": _gen(lambda T, d, kv: mha_flops(T, d) if not kv else 8 * d**2 + 4 * T * d),
        "gen_cache_projection": _gen(lambda T, d, kv: (8 * d**2 + 4 * d) * power_sums(range(1, T + 1))[1] if kv else None),
        "gen_cache_queries": _gen(lambda T, d, kv: 8 * d**2 * T + 4 * d * power_sums(range(1, T + 1))[2] if kv else None),
        "gen_macs": _gen(lambda T, d, kv: generation(T, d, kv) // 2),
    }),
})
