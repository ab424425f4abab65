"LayerNorm parity with nn.LayerNorm, the wrong variant differs, SublayerConnection pre-LN / post-LN orders."
import pytest
import torch
from torch import nn

from transformer_tutorial.layer_norm import LayerNorm, SublayerConnection


@pytest.mark.parametrize("shape", [(4, 8), (2, 5, 16), (3, 7, 64), (2, 3, 4, 512), (1, 1, 2)])
def test_parity_with_nn_layernorm(shape):
    torch.manual_seed(0)
    d = shape[-1]
    ours, ref = LayerNorm(d), nn.LayerNorm(d)
    with torch.no_grad():
        ours.weight.normal_(); ours.bias.normal_()
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(shape) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-6)


def test_eps_inside_root_matches_torch_for_constant_rows():
    x = torch.full((2, 8), 3.0)  # zero variance: only eps keeps it finite
    ours, ref = LayerNorm(8, eps=1e-3), nn.LayerNorm(8, eps=1e-3)
    torch.testing.assert_close(ours(x), ref(x))
    assert not torch.isnan(ours(x)).any()


def test_wrong_variant_differs_most_for_small_d():
    torch.manual_seed(1)
    gaps = []
    for d in (2, 16, 256):
        x = torch.randn(64, d)
        wrong = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)  # unbiased std, eps outside
        gaps.append((wrong - LayerNorm(d)(x)).abs().max().item())
    assert gaps[0] > 0.25 and gaps[-1] > 1e-3
    assert gaps[0] > gaps[1] > gaps[2]


def test_sublayer_orders_match_formulas():
    torch.manual_seed(2)
    f = nn.Linear(16, 16)
    x = torch.randn(2, 5, 16)
    pre, post = SublayerConnection(16, norm_first=True), SublayerConnection(16, norm_first=False)
    with torch.no_grad():
        pre.norm.weight.normal_(); pre.norm.bias.normal_()
    post.load_state_dict(pre.state_dict())
    ln = nn.LayerNorm(16); ln.load_state_dict(pre.norm.state_dict())
    torch.testing.assert_close(pre(x, f), x + f(ln(x)), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(post(x, f), ln(x + f(x)), atol=1e-6, rtol=1e-6)
    assert SublayerConnection(16).norm_first is True  # pre-LN is the default


def test_sublayer_dropout_only_on_the_branch():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 16)
    pre = SublayerConnection(16, dropout=0.5, norm_first=True).train()
    branch = pre(x, lambda h: torch.ones_like(h)) - x   # dropout(ones): 0 or 2, residual untouched
    dropped, kept = branch.abs() < 1e-5, (branch - 2).abs() < 1e-5
    assert (dropped | kept).all() and dropped.any() and kept.any()
    torch.testing.assert_close(pre.eval()(x, lambda h: torch.zeros_like(h)), x)


def test_wrong_width_is_a_clear_error():
    with pytest.raises(ValueError, match=r"d_model=16.*\(2, 5, 8\)"):
        LayerNorm(16)(torch.randn(2, 5, 8))
