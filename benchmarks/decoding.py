"""Time per generated token against output length: greedy decoding with the key/value cache and without it.

Usage: python benchmarks/decoding.py [--device cpu|cuda] [--threads 1] [--lengths 32 64 128 256] [--repeats 3]
The model of the generation chapter's timing (d_model 128, 2 layers, 4 heads, d_ff 512, random weights), a batch of 16
sources of length 32, no end token (every row generates every position). Both ways run side by side in one process;
each number is the median of --repeats timed calls. Prints a Markdown table and two ratios: plain / cached at the
longest length, and cached time per token at the longest / at the shortest length.
"""
import argparse, statistics, sys
import torch
from transformer_tutorial.model import Transformer
from transformer_tutorial.decoding import seconds_per_token


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--threads', type=int, default=1, help='CPU threads (default 1)')
    ap.add_argument('--lengths', type=int, nargs='+', default=[32, 64, 128, 256])
    ap.add_argument('--repeats', type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    torch.manual_seed(0)
    model = Transformer(32, 32, d_model=128, num_heads=4, num_layers=2, d_ff=512, dropout=0.0, max_len=max(a.lengths)).to(device).eval()
    src = torch.randint(3, 32, (16, 32), generator=torch.Generator().manual_seed(0)).to(device)
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'CPU, {a.threads} thread(s)'
    print(f"torch {torch.__version__}, {name}; d_model 128, 2 layers, batch 16, source length 32, median of {a.repeats}")
    print("\n| tokens | plain ms/token | cached ms/token | plain / cached |\n|---|---|---|---|")
    ms = {}
    for L in a.lengths:
        for cached in (False, True):
            ms[L, cached] = 1e3 * statistics.median(seconds_per_token(model, src, L, use_cache=cached) for _ in range(a.repeats))
        print(f"| {L} | {ms[L, False]:.2f} | {ms[L, True]:.2f} | {ms[L, False] / ms[L, True]:.1f}x |", flush=True)
    lo, hi = min(a.lengths), max(a.lengths)
    print(f"\nat {hi} tokens the cached decoder is {ms[hi, False] / ms[hi, True]:.1f}x faster than the plain one; "
          f"its time per token at {hi} is {ms[hi, True] / ms[lo, True]:.2f}x its time at {lo}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
