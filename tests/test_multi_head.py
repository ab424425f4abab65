import pytest
import torch
from torch import nn
from transformer_tutorial.multi_head import (split_heads, merge_heads, repeat_kv, MultiHeadAttention, copy_mha_to_torch,
                                             to_torch_attn_mask)
from transformer_tutorial.masks import padding_mask, causal_mask

TOL = dict(atol=1e-5, rtol=1e-5)


def test_split_merge_round_trip_and_layout():
    x = torch.randn(2, 5, 12)
    h = split_heads(x, 4)
    assert h.shape == (2, 4, 5, 3)
    for i in range(4):
        assert torch.equal(h[:, i], x[..., i * 3:(i + 1) * 3])
    assert torch.equal(merge_heads(h), x)
    y = torch.randn(2, 4, 5, 3)
    assert torch.equal(split_heads(merge_heads(y), 4), y)


def test_wrong_splits_differ():
    x = torch.arange(24.).view(1, 4, 6)
    right = split_heads(x, 3)
    chunks = torch.stack(torch.split(x, 3, dim=-1), dim=1)  # chunks of SIZE num_heads
    assert chunks.shape != right.shape
    view_only = x.view(1, 3, 4, 2)                         # no transpose: same shape, wrong content
    assert view_only.shape == right.shape and not torch.equal(view_only, right)
    big = torch.randn(2, 5, 512)
    assert torch.stack(torch.split(big, 8, dim=-1), 1).shape == (2, 64, 5, 8)
    assert not torch.equal(big.view(2, 8, 5, 64), split_heads(big, 8))


def test_weights_shape_self_and_cross():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    x, mem = torch.randn(3, 5, 8), torch.randn(3, 7, 8)
    out, w = mha(x, x, x)
    assert out.shape == (3, 5, 8) and w.shape == (3, 2, 5, 5)
    out, w = mha(x, mem, mem)
    assert out.shape == (3, 5, 8) and w.shape == (3, 2, 5, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 5))
    out, w = mha(x, mem, mem, need_weights=False)
    assert w is None and out.shape == (3, 5, 8)


def test_head_slice_of_w_q_is_one_head():
    torch.manual_seed(0)
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 4, 12)
    q = split_heads(mha.w_q(x), 3)
    for i in range(3):
        torch.testing.assert_close(q[:, i], x @ mha.w_q.weight[i * 4:(i + 1) * 4].T + mha.w_q.bias[i * 4:(i + 1) * 4])


B, LQ, LK, D, H = 2, 5, 7, 16, 4
PAD_Q = padding_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), 0)
PAD_K = padding_mask(torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]]), 0)


@pytest.mark.parametrize("case", ["self", "cross", "self_padding", "cross_padding", "causal", "both", "both_torch_pair"])
@pytest.mark.parametrize("bias", [True, False])
def test_parity_with_nn_multihead_attention(case, bias):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, bias=bias).eval()
    ref = copy_mha_to_torch(mha, nn.MultiheadAttention(D, H, bias=bias, batch_first=True)).eval()
    x, mem = torch.randn(B, LQ, D), torch.randn(B, LK, D)
    kv, mask, kw = x, None, {}
    if case == "cross": kv = mem
    elif case == "self_padding": mask, kw = PAD_Q, dict(key_padding_mask=~PAD_Q[:, 0, 0])
    elif case == "cross_padding": kv, mask, kw = mem, PAD_K, dict(key_padding_mask=~PAD_K[:, 0, 0])
    elif case == "causal": mask, kw = causal_mask(LQ), dict(attn_mask=~causal_mask(LQ)[0, 0])
    elif case == "both":
        mask = PAD_Q & causal_mask(LQ)
        kw = dict(attn_mask=to_torch_attn_mask(mask, B, H, LQ, LQ))
    elif case == "both_torch_pair":
        mask = PAD_Q & causal_mask(LQ)
        kw = dict(key_padding_mask=~PAD_Q[:, 0, 0], attn_mask=~causal_mask(LQ)[0, 0])
    out, w = mha(x, kv, kv, mask=mask)
    out_ref, w_ref = ref(x, kv, kv, **kw)
    assert not out.isnan().any()
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(w.mean(1), w_ref, **TOL)


@pytest.mark.parametrize("mask", [None, PAD_Q, causal_mask(LQ), PAD_Q & causal_mask(LQ)])
def test_fast_path_equals_teaching_path(mask):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).eval()
    x = torch.randn(B, LQ, D)
    slow, _ = mha(x, x, x, mask=mask)
    fast, w = mha(x, x, x, mask=mask, need_weights=False)
    assert w is None
    torch.testing.assert_close(fast, slow, **TOL)


def test_fully_masked_row_is_zero_on_both_paths():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, bias=False).eval()
    x, mem = torch.randn(B, LQ, D), torch.randn(B, LK, D)
    mask = torch.ones(B, 1, LQ, LK, dtype=torch.bool)
    mask[1, 0, 2] = False
    slow, w = mha(x, mem, mem, mask=mask)
    fast, _ = mha(x, mem, mem, mask=mask, need_weights=False)
    assert torch.equal(w[1, :, 2], torch.zeros(H, LK))
    assert torch.equal(slow[1, 2], torch.zeros(D)) and torch.equal(fast[1, 2], torch.zeros(D))
    assert not fast.isnan().any()
    torch.testing.assert_close(fast, slow, **TOL)


def test_error_messages():
    with pytest.raises(ValueError, match=r"d_model \(10\).*num_heads \(3\)"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"d_model \(10\).*num_heads \(3\)"):
        split_heads(torch.randn(1, 2, 10), 3)
    mha = MultiHeadAttention(8, 2)
    x, mem = torch.randn(3, 5, 8), torch.randn(3, 7, 8)
    with pytest.raises(ValueError, match=r"\(3, 2, 5, 7\)"):
        mha(x, mem, mem, mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\(3, 2, 5, 7\)"):
        mha(x, mem, mem, need_weights=False, mask=torch.ones(3, 1, 1, 5, dtype=torch.bool))
    for args, name in [((x[..., :6], x, x), "query"), ((x, mem[..., :4], mem), "key"), ((x, mem, mem[..., :4]), "value")]:
        with pytest.raises(ValueError, match=rf"{name} must be shaped \(B, L, d_model=8\), got"):
            mha(*args)
    with pytest.raises(ValueError, match="key and value must have the same"):
        mha(x, mem, x)
    with pytest.raises(ValueError, match="embed_dim=6"):
        copy_mha_to_torch(mha, nn.MultiheadAttention(6, 2, batch_first=True))


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradients_flow(need_weights):
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, dropout=0.1)
    x = torch.randn(B, LQ, D, requires_grad=True)
    out, _ = mha(x, x, x, mask=PAD_Q & causal_mask(LQ), need_weights=need_weights)
    out.pow(2).sum().backward()
    assert x.grad is not None and x.grad.isfinite().all() and x.grad.abs().sum() > 0
    for name, p in mha.named_parameters():
        assert p.grad is not None and p.grad.isfinite().all() and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("need_weights", [True, False])
def test_dropout_on_both_paths_drops_weights_and_keeps_the_mean(need_weights):
    "Training with dropout: both paths drop attention weights with their own random numbers (the same seed gives different masks), and on average give the undropped output; a query that reads nothing stays 0."
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(1, LQ, D).expand(4000, LQ, D)                        # one sequence, 4000 independent dropout masks
    mask = torch.ones(1, 1, LQ, LQ, dtype=torch.bool); mask[0, 0, 1] = False
    want, _ = mha.eval()(x[:1], x[:1], x[:1], mask=mask)
    got, _ = mha.train()(x, x, x, mask=mask, need_weights=need_weights)
    spread = got.std(0)
    assert (spread[0] > 0.01).all() and torch.equal(got[:, 1], torch.zeros_like(got[:, 1]) + mha.w_o.bias)  # dropped, and row 1 reads nothing
    torch.testing.assert_close(got.mean(0), want[0], atol=4 * spread.max().item() / 4000 ** 0.5, rtol=0)
    torch.manual_seed(1); a, _ = mha(x[:8], x[:8], x[:8], need_weights=True)
    torch.manual_seed(1); b, _ = mha(x[:8], x[:8], x[:8], need_weights=False)
    assert not torch.allclose(a, b)                                        # the two paths draw different masks from one seed


@pytest.mark.parametrize('num_kv_heads', [1, 2, 4])
@pytest.mark.parametrize('need_weights', [True, False])
def test_grouped_query_attention_is_multi_head_attention_with_repeated_key_and_value_heads(num_kv_heads, need_weights):
    "num_kv_heads key/value heads, each read by a group of query heads: equal to an ordinary layer whose w_k, w_v rows repeat per group."
    torch.manual_seed(0)
    d, H = 32, 8
    gqa = MultiHeadAttention(d, H, num_kv_heads=num_kv_heads, out_bias=False).eval()
    mha = MultiHeadAttention(d, H, out_bias=False).eval()
    assert gqa.w_k.weight.shape == (num_kv_heads * 4, d) and gqa.w_o.bias is None and gqa.w_q.bias is not None
    group = H // num_kv_heads
    with torch.no_grad():
        mha.w_q.load_state_dict(gqa.w_q.state_dict()); mha.w_o.load_state_dict(gqa.w_o.state_dict())
        for name in ('w_k', 'w_v'):
            ours, theirs = getattr(gqa, name), getattr(mha, name)
            theirs.weight.copy_(ours.weight.view(num_kv_heads, 4, d).repeat_interleave(group, 0).reshape(d, d))
            theirs.bias.copy_(ours.bias.view(num_kv_heads, 4).repeat_interleave(group, 0).reshape(d))
    x, mem = torch.randn(2, 6, d), torch.randn(2, 9, d)
    for q, kv, mask in ((x, x, causal_mask(6)), (x, mem, None)):
        torch.testing.assert_close(gqa(q, kv, kv, mask, need_weights)[0], mha(q, kv, kv, mask, need_weights)[0], **TOL)
    k = torch.randn(2, num_kv_heads, 5, 4)
    for h in range(H): assert torch.equal(repeat_kv(k, H)[:, h], k[:, h // group])          # query head h reads group h // (H / H_kv)


def test_grouped_query_attention_errors():
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(8\)"):
        MultiHeadAttention(32, 8, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be a positive integer, got 0"):
        MultiHeadAttention(32, 8, num_kv_heads=0)
    with pytest.raises(ValueError, match="nn.MultiheadAttention has one key/value head per query head"):
        copy_mha_to_torch(MultiHeadAttention(32, 8, num_kv_heads=2), nn.MultiheadAttention(32, 8, batch_first=True))
    with pytest.raises(ValueError, match=r"bias mismatch: mha has bias=True \(out_bias=False\)"):
        copy_mha_to_torch(MultiHeadAttention(32, 8, out_bias=False), nn.MultiheadAttention(32, 8, batch_first=True))
