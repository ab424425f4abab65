"RMSNorm, GELU/SiLU and the SwiGLU feed-forward: parity with PyTorch where PyTorch has the block, the formula where it has not."
import pytest, torch
import torch.nn.functional as F
from torch import nn
from transformer_tutorial.modern_blocks import RMSNorm, gelu, silu, SwiGLUFeedForward
from transformer_tutorial.feed_forward import PositionwiseFeedForward


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_rmsnorm_equals_torch_by_weight_copy(dtype):
    ours, theirs = RMSNorm(12, eps=1e-5).to(dtype), nn.RMSNorm(12, eps=1e-5).to(dtype)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(12)); ours.weight.copy_(theirs.weight)
    x = torch.randn(3, 4, 12, dtype=dtype) * 5 + 2
    out = ours(x)
    assert out.dtype == dtype
    torch.testing.assert_close(out, theirs(x))
    x.requires_grad_()
    ours(x).sum().backward(); g_ours = x.grad.clone(); x.grad = None
    theirs(x).sum().backward()
    torch.testing.assert_close(g_ours, x.grad)


def test_rmsnorm_degenerate_rows_are_finite_and_match_torch():
    ours, theirs = RMSNorm(6), nn.RMSNorm(6, eps=1e-6)
    x = torch.stack([torch.zeros(6), torch.full((6,), -3.0), torch.tensor([1e-20, 0, 0, 0, 0, 0])])
    out = ours(x)
    assert torch.isfinite(out).all() and (out[0] == 0).all()
    torch.testing.assert_close(out, theirs(x))
    assert ours(torch.randn(1, 1, 6)).shape == (1, 1, 6)  # a single position


def test_rmsnorm_is_not_layernorm():
    "Unlike LayerNorm, RMSNorm keeps the mean: a shifted input gives a different output."
    z = torch.randn(32)
    rms = RMSNorm(32)
    assert not torch.allclose(rms(z), rms(z + 5.0), atol=1e-2)
    ln = nn.LayerNorm(32, elementwise_affine=False)
    torch.testing.assert_close(ln(z), ln(z + 5.0), atol=1e-4, rtol=1e-4)


def test_rmsnorm_rejects_a_wrong_width():
    with pytest.raises(ValueError, match=r"RMSNorm expects the last dimension of its input to be d_model=8, got shape \(2, 7\)"):
        RMSNorm(8)(torch.randn(2, 7))
    with pytest.raises(ValueError, match='d_model must be a positive integer, got 0'):
        RMSNorm(0)


@pytest.mark.parametrize('mode', ['none', 'tanh'])
def test_gelu_equals_torch(mode):
    x = torch.linspace(-8, 8, 2001, dtype=torch.float64)
    torch.testing.assert_close(gelu(x, mode), F.gelu(x, approximate=mode))
    torch.testing.assert_close(gelu(x.float(), mode), F.gelu(x.float(), approximate=mode))


def test_gelu_modes_differ_and_bad_mode_is_named():
    x = torch.linspace(-3, 3, 101, dtype=torch.float64)
    assert 1e-5 < (gelu(x) - gelu(x, 'tanh')).abs().max() < 1e-3
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh', got 'fast'"):
        gelu(x, 'fast')


def test_silu_equals_torch():
    x = torch.linspace(-10, 10, 501)
    torch.testing.assert_close(silu(x), F.silu(x))


def test_swiglu_is_the_formula_and_keeps_dtype():
    ffn = SwiGLUFeedForward(6, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    W, V, W2 = ffn.w_gate.weight.T, ffn.w_up.weight.T, ffn.w_down.weight.T
    out = ffn(x)
    assert out.dtype == torch.float64 and out.shape == (2, 3, 6)
    torch.testing.assert_close(out, (F.silu(x @ W) * (x @ V)) @ W2)
    assert all(not hasattr(m, 'bias') or m.bias is None for m in (ffn.w_gate, ffn.w_up, ffn.w_down))


def test_swiglu_at_two_thirds_width_costs_what_relu_ffn_costs():
    count = lambda m: sum(p.numel() for p in m.parameters())
    relu, swiglu = PositionwiseFeedForward(512, 2048), SwiGLUFeedForward(512, 2048 * 2 // 3)
    assert abs(count(swiglu) / count(relu) - 1) < 0.01


def test_swiglu_dropout_acts_only_in_training():
    ffn = SwiGLUFeedForward(8, 16, dropout=0.5)
    x = torch.randn(4, 5, 8)
    ffn.eval(); torch.testing.assert_close(ffn(x), ffn(x))
    ffn.train(); assert not torch.equal(ffn(x), ffn(x))


def test_swiglu_rejects_a_wrong_width():
    with pytest.raises(ValueError, match=r"d_model=8, got shape \(1, 2, 9\)"):
        SwiGLUFeedForward(8, 16)(torch.randn(1, 2, 9))


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_rmsnorm_squares_half_precision_in_float32(dtype):
    "An entry of 300 squares past float16's largest number (65504): the naive formula gives a row of zeros, RMSNorm the float32 answer."
    norm = RMSNorm(8, eps=1e-5)
    with torch.no_grad(): norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    x = torch.tensor([[300.0, -1.0, 2.0, 0.5, 300.0, 3.0, -2.0, 1.0], [1e4, 1e4, 1e4, 1e4, 1e4, 1e4, 1e4, 1e4]])
    out = norm.to(dtype)(x.to(dtype))
    reference = (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5)).to(dtype) * norm.weight.to(dtype)
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out, reference, rtol=0, atol=0)       # Llama's: float32 inside, cast back, then the gain
    torch.testing.assert_close(out[1].float(), norm.weight.float(), atol=1e-2, rtol=0)   # a constant row normalizes to the gain
    if dtype == torch.float16:
        h = x.to(dtype)
        assert (h * torch.rsqrt((h * h).mean(-1, keepdim=True) + 1e-5) == 0).all()   # squared in float16: inf, then 0


def test_rmsnorm_equals_transformers_llama_norm_in_every_dtype():
    transformers = pytest.importorskip('transformers')
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    theirs, ours = LlamaRMSNorm(16, eps=1e-5), RMSNorm(16, eps=1e-5)
    with torch.no_grad(): theirs.weight.copy_(torch.randn(16)); ours.weight.copy_(theirs.weight)
    x = torch.randn(3, 16) * 200
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        assert torch.equal(ours.to(dtype)(x.to(dtype)), theirs.to(dtype)(x.to(dtype))), dtype


def test_swiglu_takes_biases_when_asked():
    ffn = SwiGLUFeedForward(6, 10, bias=True).double()
    assert all(m.bias is not None for m in (ffn.w_gate, ffn.w_up, ffn.w_down))
    with torch.no_grad():
        for m in (ffn.w_gate, ffn.w_up, ffn.w_down): m.bias.normal_()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    gate, up, down = ffn.w_gate, ffn.w_up, ffn.w_down
    torch.testing.assert_close(ffn(x), (F.silu(x @ gate.weight.T + gate.bias) * (x @ up.weight.T + up.bias)) @ down.weight.T + down.bias)
