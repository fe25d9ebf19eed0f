"""The one list of exercises: grade_id -> the notebook it belongs to.

Everything else derives from it: the driver and the judge of an exercise live in the modules named
after its notebook (`drivers/nb03_masks.py`, `judges/nb03_masks.py`, and on the grader side
`autograder/exercises/nb03_masks.py`: cases and answer key).
"""
import importlib

NOTEBOOK_OF = {
    "softmax": "01_self_attention", "self_attention": "01_self_attention", "score_diagnostics": "01_self_attention",
    "attention_forward": "02_scaled_dot_product", "attention_backward": "02_scaled_dot_product",
    "numerical_gradient": "02_scaled_dot_product", "attention_function": "02_scaled_dot_product",
    "init_score_std": "02_scaled_dot_product",
    "causal_mask": "03_masks", "padding_mask": "03_masks", "attention_mask": "03_masks",
    "masked_softmax": "03_masks", "leftpad_safe": "03_masks",
    "split_merge_heads": "04_multihead", "mha": "04_multihead",
    "flops": "05_complexity", "attn_memory": "05_complexity", "generation_flops": "05_complexity",
    "sdpa_attention": "06_api", "decode_step": "06_api", "to_torch_mha": "06_api", "torch_mha_forward": "06_api",
}


def topic(grade_id):
    """The module name of an exercise's notebook: 'nb03_masks'."""
    if grade_id not in NOTEBOOK_OF:
        raise KeyError(f"未知的练习：{grade_id!r}")
    return "nb" + NOTEBOOK_OF[grade_id]


def driver(grade_id):
    """The `Driver` of an exercise: how to run the student's code on one case."""
    return importlib.import_module(f"w1d1_student.drivers.{topic(grade_id)}").DRIVERS[grade_id]


def judge(grade_id):
    """The verdict function of an exercise: judge(cases, results) -> Verdict."""
    return importlib.import_module(f"w1d1_student.judges.{topic(grade_id)}").JUDGES[grade_id]
