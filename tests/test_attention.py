"Scaled dot-product attention: parity with torch, any leading dims, masks, fully masked rows, dropout, errors."
import math
import pytest
import torch
import torch.nn.functional as F
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.validation import _check_mask


def random_mask(*shape, g=None):
    "Random boolean mask with at least one True per query row (so every torch version agrees)."
    m = torch.rand(*shape, generator=g) > 0.5
    m[..., 0] = True
    return m


SHAPES = {  # name: (query shape, key/value shape, mask shape or None)
    "4d-square-nomask": ((2, 3, 6, 8), (2, 3, 6, 8), None),
    "4d-square-mask": ((2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 6)),
    "4d-padding-mask": ((2, 3, 6, 8), (2, 3, 6, 8), (2, 1, 1, 6)),
    "4d-rect-nomask": ((2, 3, 4, 8), (2, 3, 9, 8), None),
    "4d-rect-mask": ((2, 3, 4, 8), (2, 3, 9, 8), (2, 1, 4, 9)),
    "3d-nomask": ((3, 5, 16), (3, 7, 16), None),
    "3d-mask": ((3, 5, 16), (3, 7, 16), (3, 5, 7)),
    "5d-nomask": ((2, 2, 3, 4, 8), (2, 2, 3, 5, 8), None),
    "5d-mask": ((2, 2, 3, 4, 8), (2, 2, 3, 5, 8), (2, 1, 3, 4, 5)),
    "2d-mask-1d": ((4, 8), (6, 8), (6,)),
}


@pytest.mark.parametrize("name", SHAPES)
def test_parity_with_torch_output_and_grads(name):
    qs, ks, ms = SHAPES[name]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, generator=g, requires_grad=True) for s in (qs, ks, ks))
    m = None if ms is None else random_mask(*ms, g=g)
    ours, w = scaled_dot_product_attention(q, k, v, m)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    assert w.shape == qs[:-1] + (ks[-2],)
    torch.testing.assert_close(ours, w @ v)  # output is the returned weights times the values
    torch.testing.assert_close(w.sum(-1), torch.ones(qs[:-1]))
    if m is not None: assert (w.masked_select(~m.expand_as(w)) == 0).all()
    go = torch.randn(ours.shape, generator=g)
    ga = torch.autograd.grad(ours, (q, k, v), go)
    gb = torch.autograd.grad(theirs, (q, k, v), go)
    for a, b in zip(ga, gb): torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_worked_example_by_hand():
    Q = K = torch.tensor([[1., 0.], [0., 1.], [1., 1.]])
    V = torch.tensor([[10., 0.], [0., 10.], [5., 5.]])
    out, w = scaled_dot_product_attention(Q, K, V)
    e = math.exp(1 / math.sqrt(2))
    torch.testing.assert_close(w[0], torch.tensor([e, 1., e]) / (2 * e + 1))
    torch.testing.assert_close(out[0], (e * V[0] + V[1] + e * V[2]) / (2 * e + 1))


def test_dv_may_differ_from_dk():
    out, w = scaled_dot_product_attention(torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 7))
    assert out.shape == (2, 3, 7) and w.shape == (2, 3, 5)


@pytest.mark.filterwarnings("ignore:Anomaly Detection")
def test_fully_masked_row_gives_zeros_and_finite_grads():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 8, requires_grad=True) for _ in range(3))
    m = random_mask(2, 3, 4, 4)
    m[0, 1, 2] = False   # one row with no key
    m[1] = False         # a whole sequence with no key
    with torch.autograd.detect_anomaly(check_nan=True):
        out, w = scaled_dot_product_attention(q, k, v, m)
        (out.square().sum() + w.sum()).backward()
    assert not out.isnan().any() and not w.isnan().any()
    assert (out[0, 1, 2] == 0).all() and (w[0, 1, 2] == 0).all()
    assert (out[1] == 0).all() and (w[1] == 0).all()
    for t in (q, k, v): assert torch.isfinite(t.grad).all()
    # the rows that still have keys are untouched by the empty ones
    keep = m.any(-1)
    torch.testing.assert_close(w.sum(-1)[keep], torch.ones(int(keep.sum())))


def test_fully_masked_row_in_float64():
    q, k, v = (torch.randn(1, 2, 3, dtype=torch.float64) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v, torch.tensor([[True, False], [False, False]]))
    assert out.dtype == torch.float64 and (out[0, 1] == 0).all() and torch.isfinite(out).all()


def test_dropout_applied_to_weights():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    plain, w0 = scaled_dot_product_attention(q, k, v)
    doubled, w2 = scaled_dot_product_attention(q, k, v, dropout=lambda w: 2 * w)
    torch.testing.assert_close(w2, 2 * w0)
    torch.testing.assert_close(doubled, 2 * plain)
    drop = torch.nn.Dropout(0.5).eval()
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, dropout=drop)[0], plain)


def test_float_mask_is_a_type_error_naming_dtype():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.raises(TypeError, match=r"boolean.*got dtype torch\.float32"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(2, 3, 5))
    with pytest.raises(TypeError, match=r"got dtype torch\.int64"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(2, 3, 5, dtype=torch.long))


def test_mask_that_cannot_broadcast_names_both_shapes():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 4\) cannot broadcast to the attention scores' shape \(2, 3, 5\)"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(2, 3, 4, dtype=torch.bool))
    # broadcastable, but it would grow the scores: refused too
    with pytest.raises(ValueError, match=r"\(7, 2, 3, 5\).*\(2, 3, 5\)"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(7, 2, 3, 5, dtype=torch.bool))


def test_mismatched_dk_and_lengths():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match=r"d_k, got 4 and 6"):
        scaled_dot_product_attention(q, torch.randn(2, 5, 6), v)
    with pytest.raises(ValueError, match=r"key and value must have the same length, got 5 and 6"):
        scaled_dot_product_attention(q, k, torch.randn(2, 6, 4))


def test_check_mask_helper():
    _check_mask(torch.ones(1, 1, 1, 5, dtype=torch.bool), (2, 4, 3, 5))  # broadcastable: no error
    _check_mask(torch.ones(5, dtype=torch.bool), torch.Size([2, 4, 3, 5]))
    with pytest.raises(TypeError, match="dtype torch.float32"):
        _check_mask(torch.ones(1, 5), (2, 4, 3, 5))
    with pytest.raises(ValueError, match=r"\(3, 5\).*\(2, 4, 4, 5\)"):
        _check_mask(torch.ones(3, 5, dtype=torch.bool), (2, 4, 4, 5))
