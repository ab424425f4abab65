"""One training step (forward + loss + backward) of this course's Transformer against torch.nn.Transformer.

Usage: python benchmarks/step_vs_torch.py [--rounds 15] [--steps 5]
Both models get identical embeddings, positional encoding and output head; only the encoder-decoder stacks
differ (ours: pre-LN, boolean masks, F.scaled_dot_product_attention; torch: nn.Transformer(norm_first=True,
batch_first=True) with key-padding and causal masks). Timings are interleaved (ours, torch, ours, ...) so that
load from other processes hits both alike; the ratio is of the medians. CPU, float32, dropout 0.
"""
import argparse, statistics, time, warnings
import torch
import torch.nn.functional as F
from torch import nn
from transformer_tutorial.model import Transformer
from transformer_tutorial.masks import padding_mask, target_mask

PAD = 0
warnings.filterwarnings("ignore", message="enable_nested_tensor")


class TorchStack(nn.Module):
    "Our embeddings, positional encoding and output head around torch.nn.Transformer."
    def __init__(self, ours, d_model, heads, layers, d_ff):
        super().__init__()
        self.src_embed, self.tgt_embed, self.positional, self.output = ours.src_embed, ours.tgt_embed, ours.positional, ours.output
        self.stack = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, src, tgt):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), dtype=torch.bool)  # True = masked (torch's convention)
        h = self.stack(self.positional(self.src_embed(src)), self.positional(self.tgt_embed(tgt)), tgt_mask=causal,
                       src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD,
                       tgt_is_causal=True)
        return self.output(h)


def data(batch, length, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=g)
    tgt = torch.randint(3, vocab, (batch, length), generator=g)
    lens = torch.randint(length // 2, length + 1, (batch,), generator=g)
    pad = torch.arange(length)[None] >= lens[:, None]
    src[pad] = PAD; tgt[pad] = PAD; tgt[:, 0] = 1
    return src, tgt


def bench(cfg, rounds, steps):
    d, h, L, ff, B, T, V = cfg
    torch.manual_seed(0)
    ours = Transformer(V, V, d_model=d, num_heads=h, num_layers=L, d_ff=ff, dropout=0.0, max_len=T + 1)
    theirs = TorchStack(ours, d, h, L, ff)
    src, tgt = data(B, T, V)
    labels = torch.roll(tgt, -1, 1)
    sm, tm = padding_mask(src, PAD), target_mask(tgt, PAD)
    def step_ours():
        ours.zero_grad(set_to_none=True)
        F.cross_entropy(ours(src, tgt, sm, tm).flatten(0, 1), labels.flatten(), ignore_index=PAD).backward()
    def step_torch():
        theirs.zero_grad(set_to_none=True)
        F.cross_entropy(theirs(src, tgt).flatten(0, 1), labels.flatten(), ignore_index=PAD).backward()
    for f in (step_ours, step_torch, step_ours, step_torch): f()  # warm-up
    t_ours, t_torch = [], []
    for _ in range(rounds):
        for f, acc in ((step_ours, t_ours), (step_torch, t_torch)):
            t = time.perf_counter()
            for _ in range(steps): f()
            acc.append((time.perf_counter() - t) / steps)
    mo, mt = statistics.median(t_ours), statistics.median(t_torch)
    print(f"d_model={d} heads={h} layers={L} d_ff={ff} batch={B} len={T}: ours {1000 * mo:.2f} ms, "
          f"nn.Transformer {1000 * mt:.2f} ms, ratio {mo / mt:.3f}", flush=True)
    return mo / mt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=15); ap.add_argument('--steps', type=int, default=5)
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU, float32")
    # the copy task's configuration, and a mid-sized one where the matrix products dominate
    for cfg in [(64, 4, 1, 128, 128, 11, 13), (256, 4, 2, 1024, 32, 32, 1000)]:
        bench(cfg, a.rounds, a.steps)


if __name__ == '__main__':
    main()
