"""Chapter 19a's Triton kernels on a GPU: errors against float64 under every mask and dtype, the launch settings swept, and what a faster forward takes.

Usage: python benchmarks/flash_triton_gpu.py [--part errors tune] [--length 4096]

- errors: the output and the three gradients of `flash_attention_triton` against the course's attention computed in float64
  on the same inputs (relative error ||x - ref|| / ||ref||), under each mask, in float32, float16 and bfloat16; beside it,
  the course's plain attention computed in the same dtype, as the yardstick of what that dtype allows.
- tune: causal bf16 attention at one length (batch 4, 16 heads of width 64): the chapter's forward kernel at each block size,
  `num_warps` and `num_stages`; then `forward_fast` below, the same algorithm with the changes of FlashAttention-2's
  Triton implementations (the exponent in base 2 with the scale folded in, the causal mask applied only on the diagonal
  tiles, no mask tensor), swept the same way; each against `F.scaled_dot_product_attention` on its flash backend.
`forward_fast` is checked against the course's attention before it is timed; under TRITON_INTERPRET=1 (no GPU) `--check-only`
runs that check alone on the CPU.
"""
import argparse, itertools, math, os, sys
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _fast_tile(q, K, V, s_kn, s_vn, start, rows, L, m, l, acc, qk_scale, d, DIAGONAL: tl.constexpr, BLOCK_N: tl.constexpr):
    "One tile of keys for `forward_fast`: scores in base 2, masked only on a diagonal tile."
    cols = start + tl.arange(0, BLOCK_N)
    in_range = cols < L
    k = tl.load(K + cols[:, None] * s_kn + d[None, :], mask=in_range[:, None], other=0.0)         # (BLOCK_N, D)
    s = tl.dot(q, tl.trans(k)) * qk_scale                                                         # log2(e) / sqrt(d) folded in
    if DIAGONAL: s = tl.where((cols[None, :] <= rows[:, None]) & in_range[None, :], s, float('-inf'))
    m_new = tl.maximum(m, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m - m_new)
    v = tl.load(V + cols[:, None] * s_vn + d[None, :], mask=in_range[:, None], other=0.0)
    return m_new, l * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)


@triton.jit
def _forward_fast_kernel(Q, K, V, OUT, LSE, s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_vb, s_vh, s_vn, s_ob, s_oh, s_om, H, L, qk_scale,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    "Causal attention, one program per block of queries: the tiles left of the diagonal unmasked, then the diagonal's."
    b, h, blk = tl.program_id(0) // H, tl.program_id(0) % H, tl.program_id(1)
    rows = blk * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    q = tl.load(Q + b * s_qb + h * s_qh + rows[:, None] * s_qm + d[None, :], mask=rows[:, None] < L, other=0.0)
    K, V = K + b * s_kb + h * s_kh, V + b * s_vb + h * s_vh
    m = tl.full([BLOCK_M], float('-inf'), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    lo = blk * BLOCK_M                                          # every key before lo is readable by every query of the block
    for start in range(0, lo, BLOCK_N):
        m, l, acc = _fast_tile(q, K, V, s_kn, s_vn, start, rows, L, m, l, acc, qk_scale, d, False, BLOCK_N)
    for start in range(lo, tl.minimum(lo + BLOCK_M, L), BLOCK_N):
        m, l, acc = _fast_tile(q, K, V, s_kn, s_vn, start, rows, L, m, l, acc, qk_scale, d, True, BLOCK_N)
    tl.store(OUT + b * s_ob + h * s_oh + rows[:, None] * s_om + d[None, :], (acc / l[:, None]).to(OUT.dtype.element_ty),
             mask=rows[:, None] < L)
    tl.store(LSE + (b * H + h) * L + rows, (m + tl.math.log2(l)) / 1.4426950408889634, mask=rows < L)   # natural log, as the chapter's


def forward_fast(q, k, v, block_m=128, block_n=64, num_warps=4, num_stages=3):
    "Causal softmax(Q Kᵀ/√d) V of (B, H, L, d) inputs (d a power of two, at least 16; `block_m` a multiple of `block_n`) and its log-sum-exp."
    B, H, L, d = q.shape
    assert block_m % block_n == 0 and d == triton.next_power_of_2(d) and d >= 16 and q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    out, lse = torch.empty_like(q), torch.empty(B, H, L, device=q.device, dtype=torch.float32)
    _forward_fast_kernel[(B * H, triton.cdiv(L, block_m))](
        q, k, v, out, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3], H, L, d ** -0.5 * math.log2(math.e),
        BLOCK_M=block_m, BLOCK_N=block_n, D=d, num_warps=num_warps, num_stages=num_stages)
    return out, lse


def reference(q, k, v, mask):
    "The course's attention in float64: output, and the gradients of a fixed weighted sum of it."
    from transformer_tutorial.attention import scaled_dot_product_attention
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = scaled_dot_product_attention(q, k, v, mask)[0]
    return grads(out, q, k, v)


def grads(out, q, k, v):
    w = torch.linspace(-1, 1, out.numel(), device=out.device).to(out.dtype).view_as(out)   # in float16 itself, linspace over 150k points gives NaN
    (out * w).sum().backward()
    return [t.detach().double() for t in (out, q.grad, k.grad, v.grad)]


def rel(a, b): return ((a - b).norm() / b.norm()).item()


def check_fast(device, dtype):
    "forward_fast against the course's attention, at lengths that end inside a block and exactly on one."
    from transformer_tutorial.attention import scaled_dot_product_attention
    for L, (bm, bn) in itertools.product((37, 128, 200), ((16, 16), (32, 16), (64, 32))):
        q, k, v = (torch.randn(2, 3, L, 16, device=device, dtype=dtype) for _ in range(3))
        out, lse = forward_fast(q, k, v, bm, bn)
        causal = torch.ones(L, L, dtype=torch.bool, device=device).tril()
        want = scaled_dot_product_attention(q.double(), k.double(), v.double(), causal)[0]
        scores = (q.double() @ k.double().transpose(-2, -1) / 4).masked_fill(~causal, -math.inf)
        e_out, e_lse = rel(out.double(), want), rel(lse.double(), scores.logsumexp(-1))
        assert e_out < (1e-2 if dtype != torch.float32 else 1e-3) and e_lse < 1e-3, (L, bm, bn, e_out, e_lse)
    print(f"forward_fast equals the course's attention ({dtype}, lengths 37, 128, 200, three block shapes)", flush=True)


def errors():
    from transformer_tutorial.flash_triton import flash_attention_triton
    from transformer_tutorial.attention import scaled_dot_product_attention
    g = torch.Generator(device='cuda').manual_seed(0)
    B, H, L, d = 2, 4, 300, 64
    print("\n| dtype | mask | Triton: out, dq, dk, dv (relative error against float64) | plain attention in that dtype: out, dq, dk, dv |")
    print("|---|---|---|---|")
    for dtype, case in itertools.product((torch.float32, torch.float16, torch.bfloat16),
                                         ('none', 'causal', 'padding', 'padding+causal', 'per-query mask', 'empty rows')):
        q, k, v = (torch.randn(B, H, L, d, device='cuda', generator=g).to(dtype) for _ in range(3))
        pad = torch.ones(B, 1, 1, L, dtype=torch.bool, device='cuda'); pad[1, ..., L - 77:] = False
        mask, causal = {'causal': (None, True), 'padding': (pad, False), 'padding+causal': (pad, True)}.get(case, (None, False))
        if case == 'per-query mask': mask = torch.rand(B, 1, L, L, device='cuda', generator=g) < 0.7
        if case == 'empty rows': mask = torch.rand(B, H, L, L, device='cuda', generator=g) < 0.9; mask[0, 1, 5] = False; mask[1, 3, 250] = False
        tri = torch.ones(L, L, dtype=torch.bool, device='cuda').tril()
        full = mask if not causal else (tri if mask is None else mask & tri)
        want = reference(q, k, v, full)
        qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
        got = grads(flash_attention_triton(qt, kt, vt, mask, causal), qt, kt, vt)
        qp, kp, vp = (t.detach().clone().requires_grad_() for t in (q, k, v))
        plain = grads(scaled_dot_product_attention(qp, kp, vp, full)[0], qp, kp, vp)
        bad = any(not torch.isfinite(x).all() for x in got)
        print(f"| {str(dtype)[6:]} | {case} | {', '.join(f'{rel(a, b):.1e}' for a, b in zip(got, want))}{' NaN/inf!' if bad else ''} | "
              f"{', '.join(f'{rel(a, b):.1e}' for a, b in zip(plain, want))} |", flush=True)


def bench(f):
    return triton.testing.do_bench(f, warmup=25, rep=100, return_mode='median')


def tune(L):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformer_tutorial.flash_triton import _forward_kernel, _arguments
    B, H, d = 4, 16, 64
    q, k, v = (torch.randn(B, H, L, d, device='cuda', dtype=torch.bfloat16) for _ in range(3))
    flops = 2 * B * H * L * L * d   # causal: half of 4 B H L² d
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        t_flash = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    print(f"\ncausal bf16, batch {B}, {H} heads of width {d}, L = {L}: F.sdpa flash backend forward {t_flash:.3f} ms "
          f"({flops / t_flash / 1e9:.0f} TFLOP/s)", flush=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = []
    for bm, bn, w, s in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3)):
        out = torch.empty_like(q); lse = torch.empty(B, H, L, device='cuda')
        may, sizes, settings = _arguments(q, k, v, None, out, lse, True, bm, bn)
        run = lambda: _forward_kernel[(B * H, triton.cdiv(L, bm))](q, k, v, may, out, lse, *sizes, **settings, num_warps=w, num_stages=s)
        try:
            run(); torch.cuda.synchronize()
            err = rel(out.double(), want.double())
            rows.append(('chapter 19a kernel', bm, bn, w, s, bench(run), err))
        except Exception as e:
            rows.append(('chapter 19a kernel', bm, bn, w, s, None, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"))
    check_fast('cuda', torch.bfloat16)
    for bm, bn, w, s in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)):
        if bm % bn: continue
        try:
            out, _ = forward_fast(q, k, v, bm, bn, w, s); torch.cuda.synchronize()
            rows.append(('forward_fast', bm, bn, w, s, bench(lambda: forward_fast(q, k, v, bm, bn, w, s)), rel(out.double(), want.double())))
        except Exception as e:
            rows.append(('forward_fast', bm, bn, w, s, None, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"))
    print("\n| kernel | BLOCK_M | BLOCK_N | num_warps | num_stages | forward ms | TFLOP/s | x flash | rel. error vs F.sdpa |\n|---|---|---|---|---|---|---|---|---|")
    for name, bm, bn, w, s, t, err in rows:
        if t is None: print(f"| {name} | {bm} | {bn} | {w} | {s} | failed | | | {err} |")
        else: print(f"| {name} | {bm} | {bn} | {w} | {s} | {t:.3f} | {flops / t / 1e9:.0f} | {t / t_flash:.2f} | {err:.1e} |")
    for name in ('chapter 19a kernel', 'forward_fast'):
        ok = [r for r in rows if r[0] == name and r[5] is not None]
        if ok:
            best = min(ok, key=lambda r: r[5])
            default = next((r for r in ok if r[1:5] == (64, 64, 4, 3)), None) if name == 'chapter 19a kernel' else None
            print(f"{name}: best {best[5]:.3f} ms at BLOCK_M {best[1]}, BLOCK_N {best[2]}, num_warps {best[3]}, num_stages {best[4]}: "
                  f"{best[5] / t_flash:.2f}x the flash backend" + (f"; as the chapter launches it (64, 64, 4 warps, 3 stages) "
                  f"{default[5]:.3f} ms, {default[5] / t_flash:.2f}x" if default else ''), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--part', nargs='+', default=['errors', 'tune'], choices=['errors', 'tune'])
    ap.add_argument('--length', type=int, default=4096)
    ap.add_argument('--check-only', action='store_true', help="check forward_fast only (on the CPU under TRITON_INTERPRET=1)")
    a = ap.parse_args()
    if a.check_only:
        check_fast('cuda' if torch.cuda.is_available() else 'cpu', torch.float32); return 0
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}", flush=True)
    if 'errors' in a.part: errors()
    if 'tune' in a.part: tune(a.length)
    return 0


if __name__ == '__main__':
    sys.exit(main())
