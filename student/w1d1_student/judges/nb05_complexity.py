"""Verdicts of notebook 05 (§5): exact integer counts, checked case by case."""
import math

from ..engine import PASS, fail, known, raised, ran

INT_HINT = "FLOPs 和字节数是精确的计数，应返回整数 int（全程用整数运算：* 和 //，不要用 / 或浮点数）。"


def _is_int_type(name):
    return name == "int" or name.startswith(("int", "uint"))


def _is_float_type(name):
    return name == "float" or name.startswith("float")


def _same(got, want, kind):
    if isinstance(got, str) or isinstance(got, bool):
        return False
    if kind == "int":
        if isinstance(got, float):
            return math.isfinite(got) and got == want
        return got == want
    return math.isclose(float(got), float(want), rel_tol=1e-6, abs_tol=1e-12)


def _near(got, want):
    """Loose equality used to name a bug (a float answer can still match a buggy formula)."""
    if isinstance(got, str) or not math.isfinite(float(got)):
        return False
    if isinstance(got, int) and isinstance(want, int):
        return got == want
    return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)


def _judge(cases, results, specs, show):
    """specs: list of (key, kind, reference(case), [(message, buggy(case)), ...])."""
    for i, (case, res) in enumerate(zip(cases, results)):
        stage = case.get("stage", f"用例 {i + 1}")
        if not ran(res):
            return raised(stage, res)
        out = res.get("out") or {}
        for key, kind, reference, diagnoses in specs:
            got, type_name = out.get(key), str(out.get(f"{key}_type"))
            want = reference(case)
            where = f"输入：{show(case)}\n期望的 `{key}`：{want!r}\n你的 `{key}`：{got!r}（类型 {type_name}）"
            if isinstance(got, str) or got is None:
                return fail(f"【{stage}】`{key}` 应当是一个数，得到类型 {type_name}。\n{where}")
            if not _same(got, want, kind):
                named = [m for m, bug in diagnoses if _near(got, bug(case))]
                msg = "\n或者：".join(named) if named else None
                if msg is None and kind == "int" and isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12):
                    msg = "数值只差一点：用浮点数算大整数丢了精度。" + INT_HINT
                if msg is None and kind == "int" and want >= 2**63:
                    msg = "结果超过了 int64 的范围：numpy 的 int64 会悄悄溢出，用 Python 的 int 求和（不要用 np.sum/np.arange）。"
                return fail(f"【{stage}】{msg or f'`{key}` 的数值不对。'}\n{where}")
            if kind == "int" and not _is_int_type(type_name):
                return fail(f"【{stage}】数值对了，但类型是 {type_name}。{INT_HINT}\n{where}")
            if kind == "float" and not (_is_float_type(type_name) or _is_int_type(type_name)):
                return fail(f"【{stage}】`{key}` 应返回 float，得到类型 {type_name}。\n{where}")
            if kind == "float" and not 0.0 <= float(got) <= 1.0:
                return fail(f"【{stage}】占比应在 [0, 1] 之间。\n{where}")
    return PASS


FLOPS_BUGS = [
    ("把一次乘加算成了 1 次浮点运算：(m×k)(k×n) 的矩阵乘是 2mkn FLOPs。", known("flops_macs")),
    ("漏了输出投影 W_O（它也是 2Td²）：投影一共 4 个矩阵乘，8Td²。", known("flops_no_wo")),
    ("注意力部分只算了 QKᵀ，漏了 AV（两者各 2T²d）。", known("flops_no_av")),
    ("T 和 d 的位置写反了：投影项是 8Td²，注意力项是 4T²d。", known("flops_swapped")),
]
SHARE_BUGS = [
    ("算成了投影项（8Td²）的占比：要的是 T² 项 4T²d 占总量的比例。", known("share_projection")),
    ("除以的是投影项，不是总量：占比 = 4T²d / (8Td² + 4T²d) = T / (T + 2d)。", known("share_over_projection")),
    ("占比用的是百分数：应返回 [0, 1] 之间的小数。", known("share_percent")),
    ("占比用了乘加算 1 次的公式，分子分母的系数不一致。", known("share_macs")),
]


def judge_flops(cases, results):
    specs = [("flops", "int", known("flops"), FLOPS_BUGS), ("share", "float", known("share"), SHARE_BUGS)]
    return _judge(cases, results, specs, lambda c: f"T={c['T']}, d={c['d']}")


def _mem_args(c):
    return c["B"], c["h"], c["T"], (2 if c["bpe"] is None else c["bpe"]), (1 if c["n_layers"] is None else c["n_layers"])


MEMORY_BUGS = [
    ("忘了乘 n_layers：每一层都要存自己的注意力矩阵。", known("mem_no_layers")),
    ("忘了乘每个元素的字节数 bytes_per_element（bf16 是 2 字节）。", known("mem_no_bytes")),
    ("A 的形状是 B×h×T×T：要乘 T²，不是 T。", known("mem_T")),
    ("忘了乘头数 h：每个头都有自己的 T×T 矩阵。", known("mem_no_heads")),
    ("字节数写死成了 2：要用参数 bytes_per_element。", known("mem_bytes_2")),
    ("返回的是 GiB，题目要字节数（不要除以 2**30）。", known("mem_gib")),
]


def judge_attn_memory(cases, results):
    show = lambda c: "B={}, h={}, T={}, bytes_per_element={}, n_layers={}".format(*_mem_args(c))  # noqa: E731
    return _judge(cases, results, [("bytes", "int", known("bytes"), MEMORY_BUGS)], show)


GENERATION_BUGS = [
    ("t 从 0 开始数了：第 t 步（t = 1..T）的前缀长度是 t，用 range(1, T + 1)。", known("gen_from_0")),
    ("少算了最后一步：range(1, T) 不含 T，要写 range(1, T + 1)。", known("gen_no_last")),
    ("kv_cache 的两种情况弄反了：有缓存时每步是 8d² + 4td（只算新 token），没有缓存时是 8td² + 4t²d。",
     known("gen_swapped")),
    ("只算了最后一步（长度 T 的一次前向），没有对 t = 1..T 求和。", known("gen_last_only")),
    ("有缓存时投影不必重算：新 token 的投影只要 8d²，不是 8td²。", known("gen_cache_projection")),
    ("有缓存时新 token 只有 1 个 query，注意力是 4td，不是 4t²d。", known("gen_cache_queries")),
    ("把一次乘加算成了 1 次浮点运算（系数应是 8 和 4）。", known("gen_macs")),
]


def judge_generation_flops(cases, results):
    show = lambda c: f"T={c['T']}, d={c['d']}, kv_cache={c['kv_cache']}"  # noqa: E731
    return _judge(cases, results, [("flops", "int", known("flops"), GENERATION_BUGS)], show)


JUDGES = {
    "flops": judge_flops,
    "attn_memory": judge_attn_memory,
    "generation_flops": judge_generation_flops,
}
