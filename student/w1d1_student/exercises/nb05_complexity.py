"""Exercises of notebook 05 (§5): flops, attn_memory, generation_flops.

Counts must be exact integers, so the outputs travel as Python ints (JSON keeps them exact, even
beyond int64) together with the name of the type the student returned (from driver.py's vocabulary).

Verdicts: exact integer counts — tables for the engine's one loop.
"""
import numpy as np

from ..driver import OTHER, Driver, is_tensor, lookup, type_name
from ..engine import Number, VerdictTable, bug_table, known

NOTEBOOK = "05_complexity"


# flops ───────────────────────────────────────────────────────────────────────

def _number(x):
    """(value, type name), by x's exact type: a Python int or bool stays an exact int, a float a float; a numpy
    number, 0-d array or 0-d tensor gives its item; anything else None (the value of no number)."""
    name = type_name(x)
    if type(x) is bool or type(x) is int:
        return int(x), name
    if type(x) is float:
        return x, name
    if issubclass(type(x), np.generic) and name != OTHER or type(x) is np.ndarray and x.ndim == 0 or is_tensor(x) and x.ndim == 0:
        v = x.item()
        return (int(v) if type(v) is int or type(v) is bool else float(v)), name
    return None, name


def _call_flops(ns, case):
    T, d = case["T"], case["d"]
    flops, flops_type = _number(lookup(ns, "mha_flops")(T, d))
    share, share_type = _number(lookup(ns, "attention_flop_share")(T, d))
    return {"flops": flops, "flops_type": flops_type, "share": share, "share_type": share_type}


INT_HINT = "FLOPs 和字节数是精确的计数，应返回整数 int（全程用整数运算：* 和 //，不要用 / 或浮点数）。"


def exact_count(key, diagnoses):
    """An exact count: equal to the answer of the same name, and returned as an int."""
    return Number(key, expected=known(key), diagnoses=diagnoses, type_note=INT_HINT)


FLOPS_BUGS = bug_table("""
flops_macs     把一次乘加算成了 1 次浮点运算：(m×k)(k×n) 的矩阵乘是 2mkn FLOPs。
flops_no_wo    漏了输出投影 W_O（它也是 2Td²）：投影一共 4 个矩阵乘，8Td²。
flops_no_av    注意力部分只算了 QKᵀ，漏了 AV（两者各 2T²d）。
flops_swapped  T 和 d 的位置写反了：投影项是 8Td²，注意力项是 4T²d。
""")


SHARE_BUGS = bug_table("""
share_projection       算成了投影项（8Td²）的占比：要的是 T² 项 4T²d 占总量的比例。
share_over_projection  除以的是投影项，不是总量：占比 = 4T²d / (8Td² + 4T²d) = T / (T + 2d)。
share_percent          占比用的是百分数：应返回 [0, 1] 之间的小数。
share_macs             占比用了乘加算 1 次的公式，分子分母的系数不一致。
""")


FLOPS = VerdictTable((exact_count("flops", FLOPS_BUGS),
                  Number("share", expected=known("share"), kind="float", diagnoses=SHARE_BUGS, bounds=(0.0, 1.0), name="占比")),
                 show=lambda c: f"T={c['T']}, d={c['d']}", untouched=None)


# attn_memory ─────────────────────────────────────────────────────────────────

def _call_memory(ns, case):
    fn = lookup(ns, "attn_matrix_bytes")
    args = [case["B"], case["h"], case["T"]]
    kwargs = {}
    if case["keywords"]:
        if case["bpe"] is not None:
            kwargs["bytes_per_element"] = case["bpe"]
        if case["n_layers"] is not None:
            kwargs["n_layers"] = case["n_layers"]
    else:
        if case["bpe"] is not None or case["n_layers"] is not None:
            args.append(2 if case["bpe"] is None else case["bpe"])
        if case["n_layers"] is not None:
            args.append(case["n_layers"])
    value, type_name = _number(fn(*args, **kwargs))
    return {"bytes": value, "bytes_type": type_name}


def _mem_args(c):
    return c["B"], c["h"], c["T"], (2 if c["bpe"] is None else c["bpe"]), (1 if c["n_layers"] is None else c["n_layers"])


MEMORY_BUGS = bug_table("""
mem_no_layers  忘了乘 n_layers：每一层都要存自己的注意力矩阵。
mem_no_bytes   忘了乘每个元素的字节数 bytes_per_element（bf16 是 2 字节）。
mem_T          A 的形状是 B×h×T×T：要乘 T²，不是 T。
mem_no_heads   忘了乘头数 h：每个头都有自己的 T×T 矩阵。
mem_bytes_2    字节数写死成了 2：要用参数 bytes_per_element。
mem_gib        返回的是 GiB，题目要字节数（不要除以 2**30）。
""")


ATTN_MEMORY = VerdictTable(
    (exact_count("bytes", MEMORY_BUGS),), untouched=None,
    show=lambda c: "B={}, h={}, T={}, bytes_per_element={}, n_layers={}".format(*_mem_args(c)))


# generation_flops ────────────────────────────────────────────────────────────

def _call_generation(ns, case):
    fn = lookup(ns, "generation_flops")
    if case["T"] % 2:
        out = fn(case["T"], case["d"], case["kv_cache"])
    else:
        out = fn(case["T"], case["d"], kv_cache=case["kv_cache"])
    value, type_name = _number(out)
    return {"flops": value, "flops_type": type_name}


GENERATION_BUGS = bug_table("""
gen_from_0            t 从 0 开始数了：第 t 步（t = 1..T）的前缀长度是 t，用 range(1, T + 1)。
gen_no_last           少算了最后一步：range(1, T) 不含 T，要写 range(1, T + 1)。
gen_swapped           kv_cache 的两种情况弄反了：有缓存时每步是 8d² + 4td（只算新 token），没有缓存时是 8td² + 4t²d。
gen_last_only         只算了最后一步（长度 T 的一次前向），没有对 t = 1..T 求和。
gen_cache_projection  有缓存时投影不必重算：新 token 的投影只要 8d²，不是 8td²。
gen_cache_queries     有缓存时新 token 只有 1 个 query，注意力是 4td，不是 4t²d。
gen_macs              把一次乘加算成了 1 次浮点运算（系数应是 8 和 4）。
""")


GENERATION_FLOPS = VerdictTable((exact_count("flops", GENERATION_BUGS),), untouched=None,
                            show=lambda c: f"T={c['T']}, d={c['d']}, kv_cache={c['kv_cache']}")


# grade_id -> (driver: how to run the student's code on one case, verdict table: how to read its outputs)
EXERCISES = {
    "flops": (Driver(("mha_flops", "attention_flop_share"), _call_flops), FLOPS),
    "attn_memory": (Driver(("attn_matrix_bytes",), _call_memory), ATTN_MEMORY),
    "generation_flops": (Driver(("generation_flops",), _call_generation), GENERATION_FLOPS),
}
