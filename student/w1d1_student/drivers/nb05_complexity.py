"""Drivers of notebook 05 (§5): flops, attn_memory, generation_flops.

Counts must be exact integers, so the outputs travel as Python ints (JSON keeps them exact, even
beyond int64) together with the name of the type the student returned.
"""
import numbers

from ..driver import Driver, lookup


def _number(x):
    """(value, type name): ints stay exact Python ints, reals become floats, anything else a string."""
    name = type(x).__name__
    if isinstance(x, bool):
        return int(x), name
    if isinstance(x, numbers.Integral):
        return int(x), name
    if isinstance(x, numbers.Real):
        return float(x), name
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:  # 0-d torch / numpy scalar
        v = x.item()
        return (int(v) if isinstance(v, int) else float(v)), name
    return repr(x)[:80], name


def _call_flops(ns, case):
    T, d = case["T"], case["d"]
    flops, flops_type = _number(lookup(ns, "mha_flops")(T, d))
    share, share_type = _number(lookup(ns, "attention_flop_share")(T, d))
    return {"flops": flops, "flops_type": flops_type, "share": share, "share_type": share_type}


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


def _call_generation(ns, case):
    fn = lookup(ns, "generation_flops")
    if case["T"] % 2:
        out = fn(case["T"], case["d"], case["kv_cache"])
    else:
        out = fn(case["T"], case["d"], kv_cache=case["kv_cache"])
    value, type_name = _number(out)
    return {"flops": value, "flops_type": type_name}


DRIVERS = {
    "flops": Driver(("mha_flops", "attention_flop_share"), _call_flops),
    "attn_memory": Driver(("attn_matrix_bytes",), _call_memory),
    "generation_flops": Driver(("generation_flops",), _call_generation),
}
