"Masks: shapes, exact truth tables, causal includes the diagonal, target = padding & causal, cross-attention broadcasting."
import re
import pytest
import torch
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.masks import padding_mask, causal_mask, target_mask

PAD = 0
TOKENS = torch.tensor([[5, 6, 7, 0, 0],
                       [3, 4, 0, 0, 0],
                       [1, 2, 3, 4, 5]])


def test_padding_mask_shape_and_truth_table():
    m = padding_mask(TOKENS, PAD)
    assert m.shape == (3, 1, 1, 5) and m.dtype == torch.bool
    expected = torch.tensor([[[[True, True, True, False, False]]],
                             [[[True, True, False, False, False]]],
                             [[[True, True, True, True, True]]]])
    assert torch.equal(m, expected)


def test_padding_mask_other_pad_id():
    m = padding_mask(torch.tensor([[9, 1, 9]]), pad_id=9)
    assert torch.equal(m[0, 0, 0], torch.tensor([False, True, False]))


def test_causal_mask_truth_table_includes_diagonal():
    m = causal_mask(4)
    assert m.shape == (1, 1, 4, 4) and m.dtype == torch.bool
    expected = torch.tensor([[1, 0, 0, 0],
                             [1, 1, 0, 0],
                             [1, 1, 1, 0],
                             [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(m[0, 0], expected)
    assert m[0, 0].diagonal().all()
    assert causal_mask(1).shape == (1, 1, 1, 1) and causal_mask(1).all()


def test_causal_mask_device():
    assert causal_mask(3, device=torch.device("cpu")).device.type == "cpu"
    assert causal_mask(3, device="meta").device.type == "meta"


def test_target_mask_is_padding_and_causal():
    m = target_mask(TOKENS, PAD)
    assert m.shape == (3, 1, 5, 5) and m.dtype == torch.bool
    assert torch.equal(m, padding_mask(TOKENS, PAD) & causal_mask(5))
    expected_1 = torch.tensor([[1, 0, 0, 0, 0],
                               [1, 1, 0, 0, 0],
                               [1, 1, 0, 0, 0],
                               [1, 1, 0, 0, 0],
                               [1, 1, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(m[1, 0], expected_1)
    assert torch.equal(m[2, 0], causal_mask(5)[0, 0])  # no padding: plain causal
    assert m.any(-1).all()  # the first token is real, so no query row is empty


def test_self_attention_with_target_mask_ignores_pads_and_future():
    torch.manual_seed(0)
    B, H, L, d = 3, 2, 5, 8
    q, k, v = torch.randn(B, H, L, d), torch.randn(B, H, L, d), torch.randn(B, H, L, d)
    m = target_mask(TOKENS, PAD)
    out, w = scaled_dot_product_attention(q, k, v, m)
    assert w.shape == (B, H, L, L)
    assert (w.masked_select(~m.expand(B, H, L, L)) == 0).all()
    # changing a padded or a future key/value changes nothing at earlier query positions
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 4], v2[:, :, 4] = torch.randn(B, H, d), torch.randn(B, H, d)
    out2, _ = scaled_dot_product_attention(q, k2, v2, m)
    assert torch.equal(out[:, :, :4], out2[:, :, :4])
    assert not torch.equal(out[2, :, 4], out2[2, :, 4])  # the last real token of sequence 2 does see it


def test_cross_attention_broadcasts_source_padding_over_target_queries():
    torch.manual_seed(0)
    src = TOKENS                      # (B, Ls) = (3, 5)
    B, H, Lt, Ls, d = 3, 4, 2, 5, 8
    src_m = padding_mask(src, PAD)    # (B, 1, 1, Ls)
    assert torch.broadcast_shapes(src_m.shape, (B, H, Lt, Ls)) == (B, H, Lt, Ls)
    q, k, v = torch.randn(B, H, Lt, d), torch.randn(B, H, Ls, d), torch.randn(B, H, Ls, d)
    out, w = scaled_dot_product_attention(q, k, v, src_m)
    assert out.shape == (B, H, Lt, d) and w.shape == (B, H, Lt, Ls)
    assert (w[0, ..., 3:] == 0).all() and (w[1, ..., 2:] == 0).all() and (w[2] > 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, Lt))
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=src_m),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_tokens_not_2d_is_a_value_error_naming_the_shape(shape):
    tokens = torch.zeros(shape, dtype=torch.long)
    with pytest.raises(ValueError, match=rf"tokens must be shaped \(B, L\), got {re.escape(str(tuple(shape)))}"):
        padding_mask(tokens, PAD)
    with pytest.raises(ValueError, match=r"tokens must be shaped \(B, L\)"):
        target_mask(tokens, PAD)
