"""Attention's time and peak memory against length: the course's plain attention, PyTorch's fused attention, the tiled attention of chapter 19 and the Triton kernel of chapter 19a.

Usage: python benchmarks/flash_attention.py [--device cpu|cuda] [--lengths ...] [--dtype bfloat16] [--repeats 5]
Causal, one sequence of 16 heads of width 64 (batch 4 on a GPU). For each length and each way: the median time of a
forward pass and of a forward and backward pass, and the peak memory of the forward and backward pass (on a GPU
torch.cuda.max_memory_allocated above the inputs; on the CPU the largest tensor made, counted through PyTorch's
dispatcher). A way that runs out of memory prints 'OOM'. On the CPU the Triton kernel is left out: Triton's
interpreter runs it in NumPy, block by block, which measures the interpreter, not the kernel. Prints a Markdown table
and, on a GPU, the Triton forward's time over PyTorch's flash backend's at L = 4096 (the goal: at most 1.5). On a GPU the
tiled attention in Python runs up to L = 4096 (--max-tiled).
"""
import argparse, statistics, sys, time
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.flash import LargestTensor, flash_attention
from transformer_tutorial.masks import causal_mask


def ways(device):
    "{name: f(q, k, v)} of causal attention, each way its own code path."
    def fused(q, k, v):
        if device.type != 'cuda': return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION): return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = {'plain (course)': lambda q, k, v: scaled_dot_product_attention(q, k, v, causal_mask(q.size(-2)).to(q.device))[0],
           'F.sdpa (PyTorch fused)': fused,
           'tiled (chapter 19, PyTorch)': lambda q, k, v: flash_attention(q, k, v, causal=True, block_q=128, block_k=128)}
    if device.type == 'cuda':
        from transformer_tutorial.flash_triton import flash_attention_triton
        out['Triton (chapter 19a)'] = lambda q, k, v: flash_attention_triton(q, k, v, causal=True)
    return out


def timed(f, device, repeats):
    "Median seconds of `f()` over `repeats` calls after one warm-up call."
    f()
    times = []
    for _ in range(repeats):
        if device.type == 'cuda': torch.cuda.synchronize()
        t0 = time.perf_counter(); f()
        if device.type == 'cuda': torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(f, B, L, dtype, device, repeats):
    "(forward ms, forward+backward ms, peak MiB of forward+backward) of `f` at length L, or None where it ran out of memory."
    q, k, v = (torch.randn(B, 16, L, 64, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    fwd = lambda: f(q, k, v)
    both = lambda: f(q, k, v).sum().backward()
    try:
        with torch.no_grad(): t_fwd = timed(fwd, device, repeats)
        t_both = timed(both, device, repeats)
        if device.type == 'cuda':
            torch.cuda.synchronize(); base = torch.cuda.memory_allocated(); torch.cuda.reset_peak_memory_stats()
            both(); torch.cuda.synchronize(); peak = torch.cuda.max_memory_allocated() - base
        else:
            with LargestTensor() as rec: both()
            peak = rec.bytes
        return 1e3 * t_fwd, 1e3 * t_both, peak / 2**20
    except torch.OutOfMemoryError:
        return None
    finally:
        del q, k, v
        if device.type == 'cuda': torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--lengths', type=int, nargs='+', default=None, help='default: 512 to 16384 on a GPU, 256 to 2048 on the CPU')
    ap.add_argument('--dtype', default=None, help='default: bfloat16 on a GPU, float32 on the CPU')
    ap.add_argument('--repeats', type=int, default=5)
    ap.add_argument('--max-tiled', type=int, default=None, help="the longest L for chapter 19's tiled attention in Python (default: 4096 on "
                    "a GPU, where its Python loop over tiles takes seconds beyond that, none on the CPU)")
    a = ap.parse_args()
    device = torch.device(a.device)
    gpu = device.type == 'cuda'
    lengths = a.lengths or ([512, 1024, 2048, 4096, 8192, 16384] if gpu else [256, 512, 1024, 2048])
    dtype = getattr(torch, a.dtype or ('bfloat16' if gpu else 'float32'))
    B = 4 if gpu else 1
    name = torch.cuda.get_device_name(device) if gpu else f'CPU, {torch.get_num_threads()} threads'
    print(f"torch {torch.__version__}, {name}; causal, batch {B}, 16 heads of width 64, {dtype}, median of {a.repeats}")
    print("\n| L | way | forward ms | forward+backward ms | peak memory MiB (" + ("allocated" if gpu else "largest tensor") + ") |")
    print("|---|---|---|---|---|")
    results = {}
    max_tiled = a.max_tiled or (4096 if gpu else max(lengths))
    for L in lengths:
        for way, f in ways(device).items():
            if way.startswith('tiled') and L > max_tiled:
                print(f"| {L} | {way} | not run (--max-tiled {max_tiled}) | | |", flush=True); continue
            r = results[L, way] = measure(f, B, L, dtype, device, a.repeats)
            print(f"| {L} | {way} | " + ("OOM | OOM | OOM |" if r is None else f"{r[0]:.2f} | {r[1]:.2f} | {r[2]:.1f} |"), flush=True)
    if gpu and 4096 in lengths and results.get((4096, 'Triton (chapter 19a)')) and results.get((4096, 'F.sdpa (PyTorch fused)')):
        ratio = results[4096, 'Triton (chapter 19a)'][0] / results[4096, 'F.sdpa (PyTorch fused)'][0]
        print(f"\nat L = 4096 the Triton forward takes {ratio:.2f}x the time of PyTorch's flash backend (goal: at most 1.5)")
    return 0


if __name__ == '__main__':
    sys.exit(main())
