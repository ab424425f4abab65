"""Positions beyond sinusoids (chapter 9b: learned absolute, Shaw's relative, RoPE and ALiBi) and the length test (chapter 9c:
the model that takes each, the copy-in-context task)."""
import math

import pytest
import torch

from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.masks import causal_mask
from transformer_tutorial.multi_head import MultiHeadAttention
from transformer_tutorial.training import PAD, START, END
from transformer_tutorial.positions import (LearnedPositionalEmbedding, relative_positions, ShawRelativePositions,
                                            relative_attention, rope_frequencies, apply_rope, rope_permutation, alibi_slopes,
                                            alibi_bias)
from transformer_tutorial.position_models import (SCHEMES, PositionalSelfAttention, PositionLM, copy_sequences,
                                                  position_model, train_position_model, length_accuracy)

F64 = torch.float64


def randn(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---- learned absolute positions

def test_learned_adds_one_row_per_position():
    pos = LearnedPositionalEmbedding(32, 8).double()
    x = randn(3, 10, 8)
    out = pos(x)
    assert out.shape == (3, 10, 8) and out.dtype == F64
    torch.testing.assert_close(out, x + pos.table.weight[:10])


def test_learned_refuses_positions_past_max_len():
    pos = LearnedPositionalEmbedding(32, 8)
    assert pos(torch.randn(1, 32, 8)).shape == (1, 32, 8)  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"sequence length 33 exceeds max_len 32 .*positions 32 to 32 have no row"):
        pos(torch.randn(1, 33, 8))
    with pytest.raises(ValueError, match=r"expected input shaped \(B, L, d_model=8\), got \(2, 5, 7\)"):
        pos(torch.randn(2, 5, 7))
    with pytest.raises(ValueError, match="max_len must be a positive integer, got 0"):
        LearnedPositionalEmbedding(0, 8)


def test_learned_rows_past_the_length_get_no_gradient():
    pos = LearnedPositionalEmbedding(20, 6)
    (pos(torch.randn(2, 7, 6)) ** 2).sum().backward()
    norms = pos.table.weight.grad.norm(dim=1)
    assert (norms[:7] > 0).all() and (norms[7:] == 0).all()


# ---- Shaw et al.

def test_relative_positions_and_clipping():
    r = relative_positions(3, 5)
    assert r.tolist() == [[0, 1, 2, 3, 4], [-1, 0, 1, 2, 3], [-2, -1, 0, 1, 2]]
    assert relative_positions(6, max_distance=2).min() == -2 and relative_positions(6, max_distance=2).max() == 2
    with pytest.raises(ValueError, match="max_distance must be a positive integer, got 0"):
        relative_positions(4, max_distance=0)


@pytest.mark.parametrize('dtype', [torch.float32, F64])
def test_relative_attention_without_terms_is_chapter_one(dtype):
    q, k, v = (randn(2, 3, 6, 4, seed=s, dtype=dtype) for s in range(3))
    for mask in (None, causal_mask(6)):
        out, w = relative_attention(q, k, v, mask)
        ref_out, ref_w = scaled_dot_product_attention(q, k, v, mask)
        assert out.dtype == dtype
        torch.testing.assert_close(out, ref_out); torch.testing.assert_close(w, ref_w)


@pytest.mark.parametrize('values', [True, False])
def test_shaw_matches_a_loop_over_the_formulas(values):
    B, H, L, d, kmax = 2, 2, 6, 4, 2
    q, k, v = (randn(B, H, L, d, seed=s) for s in range(3))
    shaw = ShawRelativePositions(d, kmax, values=values).double()
    a_key, a_value = shaw(L)
    assert a_key.shape == (L, L, d) and (a_value is None) == (not values)
    out, _ = relative_attention(q, k, v, causal_mask(L), rel_key=a_key, rel_value=a_value)
    wK = shaw.key_table.weight
    wV = shaw.value_table.weight if values else torch.zeros_like(wK)
    row = lambda r: max(-kmax, min(kmax, r)) + kmax
    loop = torch.zeros_like(out)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                e = torch.stack([q[b, h, i] @ (k[b, h, j] + wK[row(j - i)]) / math.sqrt(d) for j in range(i + 1)])
                alpha = e.softmax(0)
                loop[b, h, i] = sum(alpha[j] * (v[b, h, j] + wV[row(j - i)]) for j in range(i + 1))
    torch.testing.assert_close(out, loop)


def _block_weights(x, offset, rel=None, bias=None, rope=False):
    "Causal attention weights among the tokens from `offset` on, keys outside the block masked."
    L = x.size(0)
    mask = causal_mask(L)[0, 0] & (torch.arange(L) >= offset)
    q = k = apply_rope(x) if rope else x
    rel_key, rel_value = rel(L) if rel is not None else (None, None)
    b = bias(L) if bias is not None else None
    return relative_attention(q, k, x, mask, b, rel_key, rel_value)[1][offset:, offset:].detach()


@pytest.mark.parametrize('scheme', ['shaw', 'rope', 'alibi'])
def test_relative_schemes_are_shift_invariant(scheme):
    content, prefix = randn(5, 8, seed=1), randn(11, 8, seed=2)
    shaw = ShawRelativePositions(8, 3).double()
    kw = {'shaw': dict(rel=shaw), 'rope': dict(rope=True), 'alibi': dict(bias=lambda L: alibi_bias(4, L, F64)[0])}[scheme]
    base = _block_weights(content, 0, **kw)
    for shift in (1, 7, 11):
        torch.testing.assert_close(_block_weights(torch.cat([prefix[:shift], content]), shift, **kw), base, rtol=0, atol=1e-12)


def test_absolute_positions_are_not_shift_invariant():
    content, prefix = randn(5, 8, seed=1), randn(7, 8, seed=2)
    table = LearnedPositionalEmbedding(16, 8).double()
    base = _block_weights(table(content[None])[0], 0)
    moved = _block_weights(table(torch.cat([prefix, content])[None])[0], 7)
    assert (base - moved).abs().max() > 1e-3


def test_shaw_distances_beyond_k_share_one_vector():
    shaw = ShawRelativePositions(4, 2)
    a_key, a_value = shaw(7)
    assert torch.equal(a_key[6, 0], a_key[6, 4]) and torch.equal(a_key[6, 0], a_key[2, 0])   # distances -6, -2 -> w_{-2}
    assert torch.equal(a_value[0, 5], a_value[0, 2]) and not torch.equal(a_key[3, 2], a_key[3, 3])


def test_relative_attention_rejects_bad_shapes():
    q = k = v = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match=r"rel_key must be shaped \(Lq, Lk, d\) = \(5, 5, 4\), got \(5, 5, 3\)"):
        relative_attention(q, k, v, rel_key=torch.randn(5, 5, 3))
    with pytest.raises(ValueError, match=r"rel_value must be shaped \(Lq, Lk, d\) = \(5, 5, 4\), got \(4, 5, 4\)"):
        relative_attention(q, k, v, rel_value=torch.randn(4, 5, 4))
    with pytest.raises(ValueError, match=r"bias of shape \(3, 5, 5\) cannot broadcast to the attention scores' shape \(1, 2, 5, 5\)"):
        relative_attention(q, k, v, bias=torch.randn(3, 5, 5))
    with pytest.raises(ValueError, match="query and key must share their last dimension d_k, got 4 and 3"):
        relative_attention(q, torch.randn(1, 2, 5, 3), v)
    with pytest.raises(TypeError, match="mask must be a boolean tensor"):
        relative_attention(q, k, v, mask=torch.ones(5, 5))


# ---- RoPE

@pytest.mark.parametrize('dtype', [torch.float32, F64])
def test_rope_is_complex_multiplication_and_keeps_lengths(dtype):
    x = randn(2, 3, 9, 6, dtype=dtype)
    out = apply_rope(x)
    assert out.shape == x.shape and out.dtype == dtype
    theta = rope_frequencies(6)
    torch.testing.assert_close(theta, torch.tensor([1.0, 10000 ** (-2 / 6), 10000 ** (-4 / 6)], dtype=F64))
    angle = torch.arange(9, dtype=F64)[:, None] * theta
    z = torch.view_as_complex(x.double().reshape(2, 3, 9, 3, 2)) * torch.polar(torch.ones_like(angle), angle)
    torch.testing.assert_close(out, torch.view_as_real(z).flatten(-2).to(dtype))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(out[..., 0, :], x[..., 0, :])


def test_rope_scores_depend_only_on_the_offset():
    q, k = randn(1, 16, seed=3), randn(1, 16, seed=4)
    score = lambda m, n: (apply_rope(q, torch.tensor([m])) @ apply_rope(k, torch.tensor([n])).T).item()
    for m, n in [(0, 0), (9, 4), (4, 9), (30, 1)]:
        for shift in (1, 100, 5000):
            assert abs(score(m, n) - score(m + shift, n + shift)) < 1e-10
    assert abs(score(9, 4) - score(4, 9)) > 1e-3


def test_rope_rejects_odd_widths_and_bad_positions():
    with pytest.raises(ValueError, match="d_head must be even, got 5"):
        apply_rope(torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match=r"positions must be shaped \(L,\) = \(4,\) or \(B, L\) = \(2, 4\) for x shaped \(2, 4, 6\), got \(3,\)"):
        apply_rope(torch.randn(2, 4, 6), torch.arange(3))
    with pytest.raises(ValueError, match=r"or \(B, L\) = \(2, 4\) for x shaped \(2, 3, 4, 6\), got \(3, 4\)"):
        apply_rope(torch.randn(2, 3, 4, 6), torch.zeros(3, 4))
    with pytest.raises(ValueError, match="d_head must be even, got 5"):
        PositionalSelfAttention(10, 2, 'rope')
    with pytest.raises(ValueError, match="the RoPE base must be a positive number, got -1.0"):
        PositionalSelfAttention(16, 2, 'rope', base=-1.0)


def test_rope_takes_an_offset_and_one_row_of_positions_per_sequence():
    "Positions (L,) shift every sequence; (B, L) rotate each sequence by its own, equal to rotating it alone."
    x = randn(3, 2, 7, 8)
    shifted = apply_rope(x, torch.arange(7) + 40, base=500.0)
    angle = (torch.arange(7, dtype=F64) + 40)[:, None] * rope_frequencies(8, 500.0)
    z = torch.view_as_complex(x.reshape(3, 2, 7, 4, 2)) * torch.polar(torch.ones_like(angle), angle)
    torch.testing.assert_close(shifted, torch.view_as_real(z).flatten(-2))
    per_row = torch.stack([torch.arange(7), torch.arange(7) + 5, torch.arange(7) * 3])     # (B, L)
    out = apply_rope(x, per_row, base=500.0)
    for b in range(3): torch.testing.assert_close(out[b], apply_rope(x[b], per_row[b], base=500.0), rtol=0, atol=0)
    assert not torch.allclose(apply_rope(x, base=500.0), apply_rope(x))                    # the base matters


def test_the_two_rope_layouts_are_one_rotation_through_the_permutation():
    "Adjacent pairs on features reordered by rope_permutation = halves (rotate_half, written here as transformers writes it), reordered."
    q = randn(2, 3, 10, 8)
    angle = torch.arange(10, dtype=F64)[:, None] * rope_frequencies(8, 300.0)
    cos, sin = torch.cat([angle, angle], -1).cos(), torch.cat([angle, angle], -1).sin()
    half = q * cos + torch.cat([-q[..., 4:], q[..., :4]], -1) * sin
    perm = rope_permutation(8)
    assert perm.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    torch.testing.assert_close(apply_rope(q[..., perm], base=300.0), half[..., perm])
    assert not torch.allclose(apply_rope(q, base=300.0), half)
    with pytest.raises(ValueError, match="d_head must be even, got 7"): rope_permutation(7)


def test_the_rope_layouts_against_transformers_apply_rotary_pos_emb():
    transformers = pytest.importorskip('transformers')
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=96, num_attention_heads=6, rope_theta=2500.0))
    q, k = torch.randn(2, 6, 11, 16), torch.randn(2, 3, 11, 16)          # grouped: fewer key heads
    position_ids = torch.stack([torch.arange(11), torch.arange(11) + 17])
    q_hf, k_hf = apply_rotary_pos_emb(q, k, *rotary(q, position_ids))
    perm = rope_permutation(16)
    torch.testing.assert_close(apply_rope(q[..., perm], position_ids, 2500.0), q_hf[..., perm])
    torch.testing.assert_close(apply_rope(k[..., perm], position_ids, 2500.0), k_hf[..., perm])
    assert not torch.allclose(apply_rope(q, position_ids, 2500.0), q_hf, atol=1e-3)


def test_positional_self_attention_honours_bias_base_positions_and_kv_heads():
    torch.manual_seed(0)
    attn = PositionalSelfAttention(16, 4, 'rope', bias=False, base=100.0, num_kv_heads=2, out_bias=False).eval()
    assert all(getattr(attn, n).bias is None for n in ('w_q', 'w_k', 'w_v', 'w_o'))
    assert attn.w_k.weight.shape == (8, 16) and attn.base == 100.0
    qkv_only = PositionalSelfAttention(16, 4, 'rope', bias=True, out_bias=False)
    assert qkv_only.w_q.bias is not None and qkv_only.w_o.bias is None
    x, mask = torch.randn(2, 6, 16), causal_mask(6)
    out = attn(x, x, x, mask)[0]
    # the formula: rotated heads with base 100, each key/value head read by two query heads
    q = apply_rope(attn.w_q(x).view(2, 6, 4, 4).transpose(1, 2), base=100.0)
    k = apply_rope(attn.w_k(x).view(2, 6, 2, 4).transpose(1, 2), base=100.0).repeat_interleave(2, 1)
    v = attn.w_v(x).view(2, 6, 2, 4).transpose(1, 2).repeat_interleave(2, 1)
    ref = attn.w_o(scaled_dot_product_attention(q, k, v, mask)[0].transpose(1, 2).reshape(2, 6, 16))
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(attn(x, x, x, mask, need_weights=False)[0], out, atol=1e-6, rtol=1e-5)   # the fused path
    for positions in (torch.arange(6) + 9, torch.stack([torch.arange(6) + 3, torch.arange(6) + 50])):   # relative: same output
        torch.testing.assert_close(attn(x, x, x, mask, positions=positions)[0], out, atol=1e-5, rtol=1e-5)
    other = PositionalSelfAttention(16, 4, 'rope', bias=False, num_kv_heads=2, out_bias=False).eval()   # base 10000
    other.load_state_dict(attn.state_dict())
    assert not torch.allclose(other(x, x, x, mask)[0], out, atol=1e-4)                                 # the base is used
    with pytest.raises(ValueError, match="positions= is for scheme='rope'; scheme 'alibi' reads positions 0..L-1"):
        PositionalSelfAttention(16, 4, 'alibi')(x, x, x, positions=torch.arange(6))
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(4\)"):
        PositionalSelfAttention(16, 4, 'rope', num_kv_heads=3)


@pytest.mark.parametrize('scheme', ['shaw', 'alibi'])
def test_grouped_keys_and_values_with_shaw_and_alibi(scheme):
    "With fewer key/value heads the relative schemes equal their multi-head layer whose key and value heads are repeated."
    torch.manual_seed(0)
    grouped = PositionalSelfAttention(16, 4, scheme, num_kv_heads=1).eval()
    full = PositionalSelfAttention(16, 4, scheme).eval()
    full.load_state_dict({**grouped.state_dict(), **{f'{n}.{p}': getattr(getattr(grouped, n), p).repeat(4, *([1] * (p == 'weight')))
                                                     for n in ('w_k', 'w_v') for p in ('weight', 'bias')}})
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(grouped(x, x, x, causal_mask(5))[0], full(x, x, x, causal_mask(5))[0])


# ---- ALiBi

def test_alibi_slopes_are_the_papers():
    torch.testing.assert_close(alibi_slopes(8, F64), torch.tensor([2.0 ** -h for h in range(1, 9)], dtype=F64))
    s16 = alibi_slopes(16, F64)
    torch.testing.assert_close(s16, (2 ** -0.5) ** torch.arange(1, 17, dtype=F64))
    assert alibi_slopes(4).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256] and alibi_slopes(4).dtype == torch.float32
    with pytest.raises(ValueError, match="num_heads must be a positive integer, got 0"):
        alibi_slopes(0)


def test_alibi_bias_is_minus_slope_times_distance():
    b = alibi_bias(4, 7, F64)
    assert b.shape == (4, 7, 7) and b.dtype == F64
    m = alibi_slopes(4, F64)
    for i in range(7):
        for j in range(i + 1):
            torch.testing.assert_close(b[:, i, j], -m * (i - j))
    big = alibi_bias(4, 20, F64)
    torch.testing.assert_close(big[:, 10:17, 10:17], b)  # the same wherever the block sits


# ---- the model

def test_positional_self_attention_adds_nothing_for_absolute_schemes():
    torch.manual_seed(0)
    x, mask = torch.randn(2, 7, 16), causal_mask(7)
    plain = MultiHeadAttention(16, 2)
    reference = plain(x, x, x, mask)[0]
    for scheme in SCHEMES:
        attn = PositionalSelfAttention(16, 2, scheme)
        attn.load_state_dict(plain.state_dict(), strict=False)
        out, w = attn(x, x, x, mask)
        assert out.shape == (2, 7, 16) and w.shape == (2, 2, 7, 7)
        assert torch.allclose(out, reference, atol=1e-6) == (scheme in ('sinusoidal', 'learned'))
    assert attn(x, x, x, mask, need_weights=False)[1] is None


def test_positional_self_attention_rejects_bad_input():
    with pytest.raises(ValueError, match=r"scheme must be one of \('sinusoidal', 'learned', 'shaw', 'rope', 'alibi'\), got 'nope'"):
        PositionalSelfAttention(16, 2, 'nope')
    attn = PositionalSelfAttention(16, 2, 'alibi')
    with pytest.raises(ValueError, match="needs as many keys as queries, got 3 queries and 5 keys"):
        attn(torch.randn(1, 3, 16), torch.randn(1, 5, 16), torch.randn(1, 5, 16))
    with pytest.raises(ValueError, match=r"query must be shaped \(B, L, d_model=16\)"):
        attn(torch.randn(1, 3, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8))


@pytest.mark.parametrize('scheme', SCHEMES)
def test_position_lm_is_causal_and_keeps_float64(scheme):
    model = position_model(scheme, seed=1, num_symbols=10, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=20)
    tokens = torch.randint(3, 13, (2, 9), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone(); changed[:, 5] = 3 + (changed[:, 5] - 2) % 10
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert a.shape == (2, 9, 13)
    assert torch.allclose(a[:, :5], b[:, :5], atol=1e-6) and not torch.allclose(a[:, 5:], b[:, 5:])
    assert model.double()(tokens).dtype == F64


def test_position_lm_errors():
    with pytest.raises(ValueError, match="scheme must be one of"):
        PositionLM(10, 'absolute')
    model = position_model('learned', num_symbols=10, max_len=8)
    with pytest.raises(ValueError, match="sequence length 9 exceeds max_len 8"):
        model(torch.full((1, 9), 3))
    with pytest.raises(ValueError, match="token id 13 is outside the vocabulary"):
        model(torch.full((1, 4), 13))
    with pytest.raises(ValueError, match=r"tokens must be shaped \(B, L\), got \(4,\)"):
        model(torch.full((4,), 3))


def test_position_model_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b, c = position_model('shaw', 3), position_model('shaw', 3), position_model('shaw', 4)
    assert torch.equal(torch.random.get_rng_state(), state)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[n], sb[n]) for n in sa) and not all(torch.equal(sa[n], sc[n]) for n in sa)


# ---- the task

def test_copy_sequences_layout():
    inputs, targets = copy_sequences([2, 4], 6, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (2, 10)
    x = inputs[0, 1:3].tolist()
    assert inputs[0].tolist() == [START, *x, END, *x, END] + [PAD] * 3
    assert targets[0].tolist() == [PAD] * 3 + [*x, END] + [PAD] * 4
    y = inputs[1, 1:5].tolist()
    assert inputs[1].tolist() == [START, *y, END, *y] and targets[1].tolist() == [PAD] * 5 + [*y, END]
    assert len(set(y)) == 4 and all(3 <= t < 9 for t in y)


def test_copy_sequences_errors():
    with pytest.raises(ValueError, match=r"every length must be in \[1, num_symbols=6\] .*got lengths from 2 to 7"):
        copy_sequences([2, 7], 6)
    with pytest.raises(ValueError, match="lengths must be a non-empty 1-D list or tensor of integers"):
        copy_sequences([1.5, 2.0], 6)
    with pytest.raises(ValueError, match="lengths must be a non-empty 1-D list or tensor of integers"):
        copy_sequences([], 6)


def test_training_arguments_are_checked():
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        train_position_model('rope', steps=0)
    with pytest.raises(ValueError, match=r"train_lengths must be \(lo, hi\) with 1 <= lo <= hi <= num_symbols=32, got \(5, 2\)"):
        train_position_model('rope', train_lengths=(5, 2))


def test_a_tiny_training_run_learns_in_distribution():
    "RoPE, n from 1 to 4, 250 steps: every length it trained on is copied; exact match is greedy decoding's."
    state = torch.random.get_rng_state()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try: model, losses = train_position_model('rope', seed=0, steps=250, train_lengths=(1, 4), num_symbols=16, d_ff=64)
    finally: torch.set_num_threads(threads)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert not model.training and losses[-1] < 0.1 * losses[0]
    acc = length_accuracy(model, [1, 2, 3, 4, 6], num_symbols=16, n=100)
    assert all(acc[n]['exact_match'] >= 0.95 for n in (1, 2, 3, 4)), acc
    assert len(acc[6]['by_position']) == 7
    # teacher-forced exact match == greedy generation's, row by row
    n = 4
    inputs, targets = copy_sequences([n] * 50, 16, torch.Generator().manual_seed(5))
    with torch.no_grad():
        out = inputs[:, :n + 2]
        for _ in range(n + 1): out = torch.cat([out, model(out)[:, -1].argmax(-1, keepdim=True)], 1)
        forced = model(inputs).argmax(-1)
    assert torch.equal((out[:, n + 2:] == targets[:, n + 1:]).all(1), (forced[:, n + 1:] == targets[:, n + 1:]).all(1))


def test_position_models_train_through_the_training_loop(monkeypatch):
    "train_position_model runs the training chapter's `train` and `train_step` (on `LMBatch`es), and gives the losses of the loop written out by hand."
    import transformer_tutorial.position_models as position_models
    from transformer_tutorial.training import PAD, make_optimizer, sequence_loss
    calls, real = [], position_models.train
    monkeypatch.setattr(position_models, 'train', lambda *a, **kw: calls.append(kw.get('step')) or real(*a, **kw))
    _, losses = position_models.train_position_model('alibi', seed=3, steps=12, warmup=4)
    assert calls == [None] and len(losses) == 12  # the default step, train_step, on LMBatch batches
    model = position_models.position_model('alibi', 3, 32).train()  # the same run, step by step
    opt, sched = make_optimizer(model, 5e-3, 4, total=12, cooldown=0.3, floor=0.05)
    g, by_hand = torch.Generator().manual_seed(3), []
    for _ in range(12):
        inputs, targets = position_models.copy_sequences(torch.randint(1, 9, (32,), generator=g), 32, g)
        loss = sequence_loss(model(inputs), targets, PAD)
        opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step()
        by_hand.append(loss.item())
    assert losses == by_hand
