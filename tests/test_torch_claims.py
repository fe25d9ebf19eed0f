"""What 06 says about the pinned torch's `nn.MultiheadAttention(..., is_causal=True)`, measured here
independently of the notebook: with a mask that is not causal, the hint wins exactly when
need_weights=False, no key_padding_mask, and the module is training or grad is on."""
import itertools

import pytest
import torch
from torch import nn

T, B, D, H = 4, 2, 8, 2


def _follows_hint(module, training, grad, need_weights, padded):
    x = torch.randn(B, T, D)
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


@pytest.mark.parametrize("training,grad,need_weights,padded", itertools.product([True, False], repeat=4))
def test_the_is_causal_hint_wins_only_where_06_says(training, grad, need_weights, padded):
    torch.manual_seed(0)
    module = nn.MultiheadAttention(D, H, batch_first=True)
    expected = not need_weights and not padded and (training or grad)
    assert _follows_hint(module, training, grad, need_weights, padded) == expected
