"Chapter 19a's Triton kernel, run by Triton's interpreter on the CPU (on the GPU where there is one): values and gradients equal to the course's attention under every mask, half precision, and what it refuses."
import importlib, os, subprocess, sys
import pytest
import torch
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.masks import causal_mask

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'


@pytest.fixture(scope='module')
def ft():
    "The module `transformer_tutorial.flash_triton`; without a GPU its kernel runs in Triton's interpreter (tests/conftest.py)."
    pytest.importorskip('triton', reason='Triton is not installed (pip install triton)')
    module = importlib.import_module('transformer_tutorial.flash_triton')
    assert DEVICE == 'cuda' or module._interpreted(), 'TRITON_INTERPRET=1 must be set before triton is first imported'
    return module


def outputs_and_grads(f, q, k, v):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = f(q, k, v)
    (out * torch.linspace(-1, 1, out.numel(), device=out.device).view_as(out)).sum().backward()
    return out, q.grad, k.grad, v.grad


CASES = ['none', 'causal', 'padding', 'padding+causal', 'longer keys', 'empty row', 'shorter keys causal', 'per-query mask']


@pytest.mark.parametrize('blocks', [(16, 16), (32, 64)])
@pytest.mark.parametrize('case', CASES)
def test_values_and_gradients_equal_the_course_s_attention(ft, case, blocks):
    g = torch.Generator().manual_seed(CASES.index(case))
    B, H, Lq, d, dv = 2, 3, 37, 24, 8                                  # ragged blocks; widths padded to 32 and 16
    Lk = {'longer keys': 50, 'shorter keys causal': 20}.get(case, Lq)
    q, k, v = (torch.randn(B, H, L, w, generator=g).to(DEVICE) for L, w in ((Lq, d), (Lk, d), (Lk, dv)))
    pad = torch.ones(B, 1, 1, Lk, dtype=torch.bool); pad[1, ..., Lk - 9:] = False
    mask, causal = {'causal': (None, True), 'padding': (pad, False), 'padding+causal': (pad, True), 'longer keys': (pad, False),
                    'shorter keys causal': (None, True)}.get(case, (None, False))
    if case == 'empty row': mask = torch.ones(B, H, Lq, Lk, dtype=torch.bool); mask[0, 2, 4] = False; mask[1, 0, 30] = False
    if case == 'per-query mask': mask = torch.rand(B, 1, Lq, Lk, generator=g) < 0.7
    mask = None if mask is None else mask.to(DEVICE)
    top_left = torch.ones(Lq, Lk, dtype=torch.bool, device=DEVICE).tril()
    reference = mask if not causal else (top_left if mask is None else mask & top_left)
    want = outputs_and_grads(lambda q, k, v: scaled_dot_product_attention(q, k, v, reference)[0], q, k, v)
    got = outputs_and_grads(lambda q, k, v: ft.flash_attention_triton(q, k, v, mask, causal, *blocks), q, k, v)
    for a, b in zip(want, got): torch.testing.assert_close(b, a, atol=2e-5, rtol=2e-5)
    if case == 'empty row': assert (got[0][0, 2, 4] == 0).all() and (got[1][0, 2, 4] == 0).all()


@pytest.mark.parametrize('blocks', [(32, 16), (16, 32), (64, 16)])
def test_causal_reads_every_key_up_to_the_diagonal_whatever_the_blocks(ft, blocks):
    "The loop over keys stops at the diagonal's block: with query blocks larger or smaller than key blocks, no key is skipped."
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 100, 16, generator=g).to(DEVICE) for _ in range(3))
    want = scaled_dot_product_attention(q, k, v, causal_mask(100).to(DEVICE))[0]
    torch.testing.assert_close(ft.flash_attention_triton(q, k, v, causal=True, block_q=blocks[0], block_k=blocks[1]), want)


def test_the_log_sum_exp_is_each_row_s_normalizer(ft):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 16, generator=g).to(DEVICE) for _ in range(3))
    out, lse = ft._triton_forward(q, k, v, None, True, 16, 16)
    scores = (q @ k.transpose(-2, -1) / 4).masked_fill(~causal_mask(40).to(DEVICE), float('-inf'))
    torch.testing.assert_close(lse, scores.logsumexp(-1))


def test_float16(ft):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 2, 33, 32, generator=g).half().to(DEVICE) for _ in range(3))
    got = ft.flash_attention_triton(q, k, v, causal=True, block_q=16, block_k=16)
    want = scaled_dot_product_attention(q.float(), k.float(), v.float(), causal_mask(33).to(DEVICE))[0]
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, atol=3e-3, rtol=3e-3)
    q.requires_grad_()
    ft.flash_attention_triton(q, k, v, causal=True, block_q=16, block_k=16).float().sum().backward()
    assert q.grad.dtype == torch.float16 and torch.isfinite(q.grad).all()


@pytest.mark.parametrize('change, error, message', [
    (dict(q=torch.randn(1, 1, 8, 256)), ValueError, 'supports head dimensions up to 128, got d_head of q and k = 256'),
    (dict(v=torch.randn(1, 2, 8, 200)), ValueError, 'got d_head of v = 200'),
    (dict(dtype=torch.float64), TypeError, 'takes float16, bfloat16 or float32 inputs, got torch.float64'),
    (dict(q=torch.randn(2, 8, 16)), ValueError, r'must be \(B, H, L, d_head\) for the Triton kernel'),
    (dict(block_q=24), ValueError, 'block_q must be a power of two of at least 16 for the Triton kernel, got 24'),
    (dict(block_k=8), ValueError, 'block_k must be a power of two of at least 16'),
    (dict(mask=torch.ones(8, 8)), TypeError, 'mask must be a boolean tensor'),
    (dict(mask=torch.ones(3, 8, dtype=torch.bool)), ValueError, r'mask of shape \(3, 8\) cannot broadcast'),
    (dict(k=torch.randn(1, 2, 8, 8)), ValueError, 'query and key must share their last dimension'),
])
def test_bad_input(ft, change, error, message):
    q = k = v = torch.randn(1, 2, 8, 16)
    args = dict(q=q, k=k, v=v, mask=None, block_q=16, block_k=16)
    dtype = change.pop('dtype', None)
    args.update(change)
    if args['q'].dim() != 4: args['k'] = args['v'] = args['q']
    if args['q'].size(-1) == 256: args['k'] = args['v'] = args['q']
    if dtype: args.update({n: args[n].to(dtype) for n in 'qkv'})
    with pytest.raises(error, match=message): ft.flash_attention_triton(**args)


@pytest.mark.skipif(DEVICE != 'cpu', reason='the interpreter refuses bfloat16: on a GPU bfloat16 runs')
def test_the_interpreter_refuses_bfloat16(ft):
    q = torch.randn(1, 1, 16, 16, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="Triton's interpreter multiplies bfloat16 blocks wrongly"): ft.flash_attention_triton(q, q, q)


def test_cpu_tensors_without_the_interpreter_get_a_clear_error(ft):
    "Imported without TRITON_INTERPRET, the kernel is compiled for a GPU: CPU tensors get one line saying what to do, not a compiler error."
    code = ("import torch\nfrom transformer_tutorial.flash_triton import flash_attention_triton\n"
            "q = torch.randn(1, 1, 16, 16)\ntry: flash_attention_triton(q, q, q)\nexcept RuntimeError as e: print(e)")
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ("the Triton kernel cannot run here: it got CPU tensors: move q, k and v to a GPU, or set the environment "
                                "variable TRITON_INTERPRET=1 before triton is first imported to run it in Triton's interpreter")


@pytest.mark.parametrize('triton_version, numpy_version, refused', [('3.0.0', '2.0.2', True), ('3.1.0', '2.4.6', True),
                                                                    ('3.0.0', '1.26.4', False), ('3.2.0', '2.4.6', False)])
def test_an_interpreter_known_to_be_wrong_is_refused(ft, monkeypatch, triton_version, numpy_version, refused):
    "Triton 3.0 and 3.1's interpreters give wrong numbers with NumPy 2 (measured): the kernel says so instead of returning them."
    import numpy
    monkeypatch.setattr(ft, '_interpreted', lambda: True)
    monkeypatch.setattr(ft.triton, '__version__', triton_version)
    monkeypatch.setattr(numpy, '__version__', numpy_version)
    problem = ft.kernel_unavailable('cpu')
    assert (problem is not None) == refused and ft.kernel_unavailable('cuda') is None
    if refused:
        assert problem.startswith(f'the interpreter of Triton {triton_version} computes wrong results with NumPy {numpy_version}')
        q = torch.randn(1, 1, 16, 16)
        with pytest.raises(RuntimeError, match='install triton>=3.2, or numpy<2'): ft.flash_attention_triton(q, q, q)
