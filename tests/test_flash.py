"Chapter 19's tiled attention: equal to the course's attention in values and gradients under every mask, a correct hand-written backward pass, bad arguments refused, and no (L, L) tensor."
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.flash import flash_attention, online_softmax
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


def test_bad_arguments_are_refused():
    q = torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match='block_k must be a positive integer, got 0'): flash_attention(q, q, q, block_k=0)
    with pytest.raises(ValueError, match='mask'): flash_attention(q, q, q, torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(ValueError): flash_attention(q, torch.randn(1, 2, 5, 3), q)


class Largest(TorchDispatchMode):
    "The largest memory (storage bytes) behind any tensor an operation returns; an expanded view has its base's small storage."
    def __init__(self): super().__init__(); self.bytes = 0
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor): self.bytes = max(self.bytes, t.untyped_storage().nbytes())
        return out


def test_no_tensor_of_the_scores_size_is_made():
    L, d = 512, 8
    q, k, v = (torch.randn(1, 1, L, d, requires_grad=True) for _ in range(3))
    pad = torch.ones(1, 1, 1, L, dtype=torch.bool); pad[..., -7:] = False
    with Largest() as rec: flash_attention(q, k, v, pad, causal=True, block_q=32, block_k=32).sum().backward()
    assert rec.bytes == L * d * 4                                        # the inputs, outputs and gradients: never (L, L)
    with Largest() as rec: scaled_dot_product_attention(q, k, v, causal_mask(L))[0].sum().backward()
    assert rec.bytes == L * L * 4
