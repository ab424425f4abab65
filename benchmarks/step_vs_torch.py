"""One training step (forward + loss + backward) of this course's Transformer against torch.nn.Transformer.

Usage: python benchmarks/step_vs_torch.py [--rounds 15] [--steps 5] [--device cpu|cuda] [--sizes copy mid base]
                                          [--dtype float32|bfloat16] [--compile] [--peak-tflops X]
Both models get identical embeddings, positional encoding and output head; only the encoder-decoder stacks
differ (ours: pre-LN, boolean masks, F.scaled_dot_product_attention; torch: nn.Transformer(norm_first=True,
batch_first=True) with key-padding and causal masks). Timings are interleaved (ours, torch, ours, ...) so that
load from other processes hits both alike; the ratio is of the medians. Dropout 0.

Sizes: `copy` (the copy task's model and batch), `mid` (d_model 256, where the matrix products dominate on a CPU) and
`base` (the paper's base model: d_model 512, 8 heads, 6+6 layers, d_ff 2048, meant for a GPU). `--dtype bfloat16`
runs the steps under bf16 autocast; `--compile` compiles both models with torch.compile (the first calls, which
compile, are the warm-up). Each row also gives tokens per second (source and target tokens, padding included) and,
with a known peak (`--peak-tflops`, or the GPU's bf16 dense peak for an H100 or A100), the model FLOPs utilisation:
the FLOPs of one step, counted by torch.utils.flop_counter.FlopCounterMode, per second, over the peak.
"""
import argparse, contextlib, statistics, time, warnings
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from transformer_tutorial.model import Transformer
from transformer_tutorial.masks import padding_mask, target_mask

PAD = 0
warnings.filterwarnings("ignore", message="enable_nested_tensor")
SIZES = {  # name: (d_model, heads, layers, d_ff, batch, length, vocabulary)
    'copy': (64, 4, 1, 128, 128, 11, 13),
    'mid': (256, 4, 2, 1024, 32, 32, 1000),
    'base': (512, 8, 6, 2048, 64, 128, 32000),
}
PEAK_BF16_TFLOPS = {'H100': 989.0, 'H200': 989.0, 'A100': 312.0}   # dense bf16 tensor-core peaks from NVIDIA's data sheets


class TorchStack(nn.Module):
    "Our embeddings, positional encoding and output head around torch.nn.Transformer."
    def __init__(self, ours, d_model, heads, layers, d_ff):
        super().__init__()
        self.src_embed, self.tgt_embed, self.positional, self.output = ours.src_embed, ours.tgt_embed, ours.positional, ours.output
        self.stack = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, src, tgt):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), dtype=torch.bool, device=tgt.device)  # True = masked
        h = self.stack(self.positional(self.src_embed(src)), self.positional(self.tgt_embed(tgt)), tgt_mask=causal,
                       src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD,
                       tgt_is_causal=True)
        return self.output(h)


def data(batch, length, vocab, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=g)
    tgt = torch.randint(3, vocab, (batch, length), generator=g)
    lens = torch.randint(length // 2, length + 1, (batch,), generator=g)
    pad = torch.arange(length)[None] >= lens[:, None]
    src[pad] = PAD; tgt[pad] = PAD; tgt[:, 0] = 1
    return src.to(device), tgt.to(device)


def peak_tflops(device, given):
    "The peak to measure utilisation against: --peak-tflops, else a known GPU's bf16 dense peak, else None."
    if given: return given
    if device.type != 'cuda': return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def bench(name, cfg, device, dtype, compiled, rounds, steps, peak):
    d, h, L, ff, B, T, V = cfg
    torch.manual_seed(0)
    ours = Transformer(V, V, d_model=d, num_heads=h, num_layers=L, d_ff=ff, dropout=0.0, max_len=T + 1).to(device)
    theirs = TorchStack(ours, d, h, L, ff).to(device)
    src, tgt = data(B, T, V, device)
    labels = torch.roll(tgt, -1, 1)
    sm, tm = padding_mask(src, PAD), target_mask(tgt, PAD)
    run_ours, run_theirs = (torch.compile(ours), torch.compile(theirs)) if compiled else (ours, theirs)
    autocast = (lambda: torch.autocast(device.type, dtype=dtype)) if dtype != torch.float32 else contextlib.nullcontext
    def step(model, forward):
        model.zero_grad(set_to_none=True)
        with autocast(): loss = F.cross_entropy(forward().flatten(0, 1).float(), labels.flatten(), ignore_index=PAD)
        loss.backward()
    step_ours = lambda: step(ours, lambda: run_ours(src, tgt, sm, tm))
    step_torch = lambda: step(theirs, lambda: run_theirs(src, tgt))
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    for k, f in enumerate((step_ours, step_torch, step_ours, step_torch)):  # warm-up (and compilation)
        sync(); t = time.perf_counter(); f(); sync()
        if compiled and k < 2: print(f"{name}: {('ours', 'nn.Transformer')[k]}'s first step, compiling, {time.perf_counter() - t:.1f} s", flush=True)
    with FlopCounterMode(display=False) as counter: step(ours, lambda: ours(src, tgt, sm, tm))
    flops = counter.get_total_flops()
    t_ours, t_torch = [], []
    for _ in range(rounds):
        for f, acc in ((step_ours, t_ours), (step_torch, t_torch)):
            sync(); t = time.perf_counter()
            for _ in range(steps): f()
            sync(); acc.append((time.perf_counter() - t) / steps)
    mo, mt = statistics.median(t_ours), statistics.median(t_torch)
    tokens = 2 * B * T
    mfu = lambda s: f"{100 * flops / s / (peak * 1e12):.1f}%" if peak else "n/a"
    print(f"| {name} (d_model {d}, {h} heads, {L}+{L} layers, d_ff {ff}, batch {B}, length {T}) | {1000 * mo:.2f} ms | "
          f"{1000 * mt:.2f} ms | {mo / mt:.3f} | {tokens / mo:,.0f} | {tokens / mt:,.0f} | {mfu(mo)} | {mfu(mt)} |", flush=True)
    return mo / mt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=15); ap.add_argument('--steps', type=int, default=5)
    ap.add_argument('--device', default='cpu'); ap.add_argument('--sizes', nargs='+', default=None, choices=list(SIZES))
    ap.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--compile', action='store_true'); ap.add_argument('--peak-tflops', type=float, default=None)
    a = ap.parse_args()
    device = torch.device(a.device)
    sizes = a.sizes or (['base'] if device.type == 'cuda' else ['copy', 'mid'])
    where = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'CPU, {torch.get_num_threads()} threads'
    peak = peak_tflops(device, a.peak_tflops)
    print(f"torch {torch.__version__}, {where}, {a.dtype}{' autocast' if a.dtype != 'float32' else ''}"
          f"{', torch.compile' if a.compile else ''}; median of {a.rounds} rounds of {a.steps} steps"
          + (f"; utilisation against a peak of {peak:g} TFLOP/s" if peak else ""))
    print("\n| size | ours | nn.Transformer | ratio | ours tokens/s | torch tokens/s | ours MFU | torch MFU |\n|---|---|---|---|---|---|---|---|")
    for name in sizes: bench(name, SIZES[name], device, getattr(torch, a.dtype), a.compile, a.rounds, a.steps, peak)


if __name__ == '__main__':
    main()
