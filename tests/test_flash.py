"Chapter 19's tiled attention: equal to the course's attention in values and gradients under every mask, a correct hand-written backward pass, bad arguments refused, and no (L, L) tensor."
import pytest
import torch
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.flash import LargestTensor, flash_attention, flash_dropout_mask, online_softmax
from transformer_tutorial.masks import causal_mask


def outputs_and_grads(f, q, k, v):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = f(q, k, v)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    return out, q.grad, k.grad, v.grad


def test_online_softmax():
    x = torch.randn(4, 7, 13) * 10
    for block in (1, 3, 13, 20): torch.testing.assert_close(online_softmax(x, block), x.softmax(-1))
    torch.testing.assert_close(online_softmax(x + 5000, 4), (x + 5000).softmax(-1))   # no overflow where exp(x) alone would


@pytest.mark.parametrize('blocks', [(8, 11), (64, 64), (1, 1), (37, 50)])
@pytest.mark.parametrize('case', ['none', 'causal', 'padding', 'padding+causal', 'longer keys', 'empty row', 'shorter keys causal'])
def test_values_and_gradients_equal_the_course_s_attention(case, blocks):
    g = torch.Generator().manual_seed(hash(case) % 1000)
    B, H, Lq, d = 2, 3, 37, 8
    Lk = {'longer keys': 50, 'shorter keys causal': 20}.get(case, Lq)
    q, k, v = torch.randn(B, H, Lq, d, generator=g), torch.randn(B, H, Lk, d, generator=g), torch.randn(B, H, Lk, 5, generator=g)
    pad = torch.ones(B, 1, 1, Lk, dtype=torch.bool); pad[1, ..., Lk - 9:] = False
    top_left = torch.ones(Lq, Lk, dtype=torch.bool).tril()              # causal: query i reads keys 0..i
    mask, causal = {'none': (None, False), 'causal': (None, True), 'padding': (pad, False), 'padding+causal': (pad, True),
                    'longer keys': (pad, False), 'shorter keys causal': (None, True)}.get(case, (None, False))
    if case == 'empty row':
        mask = torch.ones(B, H, Lq, Lk, dtype=torch.bool); mask[0, 2, 4] = False; mask[1, 0, 30] = False
    reference = mask if not causal else (top_left if mask is None else mask & top_left)
    want = outputs_and_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, reference)[0], q, k, v)
    got = outputs_and_grads(lambda q, k, v: flash_attention(q, k, v, mask, causal=causal, block_q=blocks[0], block_k=blocks[1]), q, k, v)
    for a, b in zip(want, got): torch.testing.assert_close(b, a, atol=2e-5, rtol=2e-5)
    if case == 'empty row': assert (got[0][0, 2, 4] == 0).all() and (got[1][0, 2, 4] == 0).all()


def test_the_backward_pass_passes_gradcheck():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1, 7, 3, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    pad = torch.tensor([True] * 5 + [False] * 2)
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, causal=True, block_q=3, block_k=2), (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, pad, block_q=2, block_k=4), (q, k, v))


@pytest.mark.parametrize('case', ['padding', 'causal', 'longer keys'])
def test_dropout_equals_the_course_s_attention_given_the_same_mask(case):
    "Dropped weights are the tiled path's own, drawn again in the backward pass: with that mask handed to the course's attention, all agree."
    g = torch.Generator().manual_seed(3)
    B, H, Lq, d, p, seed = 2, 2, 21, 8, 0.4, 99
    Lk = 30 if case == 'longer keys' else Lq
    q, k, v = torch.randn(B, H, Lq, d, generator=g), torch.randn(B, H, Lk, d, generator=g), torch.randn(B, H, Lk, d, generator=g)
    pad = torch.ones(B, 1, 1, Lk, dtype=torch.bool); pad[0, ..., -6:] = False
    mask, causal = (None, True) if case == 'causal' else (pad, False)
    keep = flash_dropout_mask(q, k, p, seed, block_q=8, block_k=7)
    assert torch.isclose(keep.unique(), torch.tensor([0.0, 1 / (1 - p)])).all() and 0.3 < (keep == 0).float().mean() < 0.5
    reference = causal_mask(Lq) if causal else mask
    want = outputs_and_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, reference, dropout=lambda w: w * keep)[0], q, k, v)
    got = outputs_and_grads(lambda q, k, v: flash_attention(q, k, v, mask, causal, dropout_p=p, seed=seed, block_q=8, block_k=7), q, k, v)
    for a, b in zip(want, got): torch.testing.assert_close(b, a, atol=2e-5, rtol=2e-5)
    assert not torch.allclose(got[0], flash_attention(q, k, v, mask, causal, block_q=8, block_k=7))   # something was dropped


def test_dropout_backward_passes_gradcheck_and_the_seed_decides():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 9, 3, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, causal=True, dropout_p=0.5, seed=5, block_q=4, block_k=3), (q, k, v))
    a, b, c = (flash_attention(q, k, v, dropout_p=0.5, seed=s, block_q=4, block_k=3) for s in (5, 5, 6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(0); x = flash_attention(q, k, v, dropout_p=0.5)   # no seed: one drawn from torch's generator
    torch.manual_seed(0); y = flash_attention(q, k, v, dropout_p=0.5)
    assert torch.equal(x, y) and not torch.equal(x, flash_attention(q, k, v, dropout_p=0.5))


@pytest.mark.parametrize('call, error, message', [
    (lambda q: flash_attention(q, q, q, block_k=0), ValueError, 'block_k must be a positive integer, got 0'),
    (lambda q: flash_attention(q, q, q, torch.ones(3, 5, dtype=torch.bool)), ValueError, r'mask of shape \(3, 5\) cannot broadcast'),
    (lambda q: flash_attention(q, q, q, torch.ones(5, 5, dtype=torch.int64)), TypeError, 'mask must be a boolean tensor'),
    (lambda q: flash_attention(q, torch.randn(1, 2, 5, 3), q), ValueError, 'query and key must share their last dimension d_k, got 4 and 3'),
    (lambda q: flash_attention(q, q, q[..., :4, :]), ValueError, 'key and value must have the same length, got 5 and 4'),
    (lambda q: flash_attention(q, q[:, :1], q[:, :1]), ValueError, 'q, k and v must share their leading'),
    (lambda q: flash_attention(q, q.double(), q), TypeError, 'q, k and v must share one dtype'),
    (lambda q: flash_attention(q, q.to('meta'), q), ValueError, 'q, k and v must be on one device, got cpu, meta, cpu'),
    (lambda q: flash_attention(q, q, q, torch.ones(5, dtype=torch.bool, device='meta')), ValueError, 'and mask must be on one device'),
    (lambda q: flash_attention(q, q, q, dropout_p=1.0), ValueError, r'dropout_p must be in \[0, 1\), got 1.0'),
    (lambda q: flash_attention(q, q, q, dropout_p=-0.1), ValueError, 'dropout_p must be in'),
])
def test_bad_arguments_are_refused(call, error, message):
    with pytest.raises(error, match=message): call(torch.randn(1, 2, 5, 4))


def test_no_tensor_of_the_scores_size_is_made():
    L, d = 512, 8
    q, k, v = (torch.randn(1, 1, L, d, requires_grad=True) for _ in range(3))
    pad = torch.ones(1, 1, 1, L, dtype=torch.bool); pad[..., -7:] = False
    with LargestTensor() as rec: flash_attention(q, k, v, pad, causal=True, block_q=32, block_k=32).sum().backward()
    assert rec.bytes == L * d * 4                                        # the inputs, outputs and gradients: never (L, L)
    with LargestTensor() as rec: scaled_dot_product_attention(q, k, v, causal_mask(L))[0].sum().backward()
    assert rec.bytes == L * L * 4
