"""What 06 says about the pinned torch's `nn.MultiheadAttention(..., is_causal=True)`, measured here
independently of the notebook: with a mask that is not causal, the hint wins exactly when need_weights=False,
no key_padding_mask, and the call does not take the native fast path -- which needs eval() and no grad and a
module with batch_first=True, an even number of heads and biases. So 06's module (4 heads, bias, batch_first)
follows the hint in 3 of the 16 conditions, and a module with odd heads, bias=False or batch_first=False in 4."""
import itertools

import pytest
import torch
from torch import nn

T, B, D = 4, 2, 8
MODULES = {"h=2, bias, batch_first": dict(num_heads=2, batch_first=True),
           "h=1": dict(num_heads=1, batch_first=True),
           "h=2, bias=False": dict(num_heads=2, bias=False, batch_first=True),
           "h=2, batch_first=False": dict(num_heads=2)}


def _module(kind):
    return nn.MultiheadAttention(D, **MODULES[kind])


def _follows_hint(module, training, grad, need_weights, padded):
    x = torch.randn(B, T, D) if module.batch_first else torch.randn(T, B, D)
    last_key = torch.zeros(T, T, dtype=torch.bool)
    last_key[:, -1] = True
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    pad = torch.zeros(B, T, dtype=torch.bool) if padded else None
    module.train(training)
    with torch.set_grad_enabled(grad):
        def run(**kw):
            return module(x, x, x, need_weights=need_weights, key_padding_mask=pad, **kw)[0]
        hinted, by_mask, by_causal = run(attn_mask=last_key, is_causal=True), run(attn_mask=last_key), run(attn_mask=causal)
    assert not torch.allclose(by_mask, by_causal)
    if torch.allclose(hinted, by_causal, atol=1e-6):
        return True
    assert torch.allclose(hinted, by_mask, atol=1e-6)
    return False


@pytest.mark.parametrize("module_kind", list(MODULES))
@pytest.mark.parametrize("training,grad,need_weights,padded", itertools.product([True, False], repeat=4))
def test_the_is_causal_hint_wins_only_where_06_says(module_kind, training, grad, need_weights, padded):
    torch.manual_seed(0)
    module = _module(module_kind)
    eligible = module.batch_first and module.num_heads % 2 == 0 and module.in_proj_bias is not None
    fast_path = not training and not grad and eligible
    expected = not need_weights and not padded and not fast_path
    assert _follows_hint(module, training, grad, need_weights, padded) == expected


def test_06s_module_follows_the_hint_in_three_conditions_and_the_others_in_four():
    counts = {}
    for kind in MODULES:
        torch.manual_seed(0)
        module = _module(kind)
        counts[kind] = sum(_follows_hint(module, *cond) for cond in itertools.product([True, False], repeat=4))
    assert counts == {"h=2, bias, batch_first": 3, "h=1": 4, "h=2, bias=False": 4, "h=2, batch_first=False": 4}
