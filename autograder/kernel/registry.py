"""Which kernel-side driver module serves which exercise (imported lazily)."""
import importlib

MODULE_OF = {
    "softmax": "ex01", "self_attention": "ex01", "score_diagnostics": "ex01",
    "attention_forward": "ex02", "attention_backward": "ex02", "numerical_gradient": "ex02",
    "attention_function": "ex02", "init_score_std": "ex02",
    "causal_mask": "ex03", "padding_mask": "ex03", "attention_mask": "ex03",
    "masked_softmax": "ex03", "leftpad_safe": "ex03",
    "split_merge_heads": "ex04", "mha": "ex04",
    "flops": "ex05", "attn_memory": "ex05", "generation_flops": "ex05",
    "sdpa_attention": "ex06", "decode_step": "ex06", "to_torch_mha": "ex06",
    "torch_mha_forward": "ex06",
}


def module_for(grade_id):
    if grade_id not in MODULE_OF:
        raise KeyError(f"未知的练习：{grade_id!r}")
    return MODULE_OF[grade_id]


def driver(grade_id):
    """The `Driver` of an exercise: its cases and how to run the student's code on them."""
    mod = importlib.import_module(f"autograder.kernel.{module_for(grade_id)}")
    return mod.DRIVERS[grade_id]
