"""Steps to 100% held-out exact match for the copy and reverse tasks, over several seeds: the margin behind chapter 11's budget.

Usage: python benchmarks/steps_to_100.py [--seeds 0 1 2 3 4] [--tasks copy reverse] [--steps 1000] [--eval-every 25]
Each run is `train_task` with the course's defaults except a finer evaluation grid (`--eval-every`), so the step
at which the 1000 held-out sequences are first all right is measured to that resolution. Each row also gives
`cross_attention_alignment`: the share of cross-attention weight within one position of the token to copy, and how
often the largest weight is exactly on it. Prints a row per run, then a min / median / max table per task in Markdown.
"""
import argparse, statistics, sys, time
import torch
from transformer_tutorial.copy_task import train_task, cross_attention_alignment


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2, 3, 4])
    ap.add_argument('--tasks', nargs='+', default=['copy', 'reverse'], choices=['copy', 'reverse'])
    ap.add_argument('--steps', type=int, default=None, help='step budget (default: the course default)')
    ap.add_argument('--eval-every', type=int, default=25)
    ap.add_argument('--device', default='cpu')
    a = ap.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {a.device}", flush=True)
    table = {}
    for task in a.tasks:
        for seed in a.seeds:
            t = time.perf_counter()
            model, hist, m = train_task(task, steps=a.steps, device=a.device, seed=seed, eval_every=a.eval_every, progress=False)
            wall = time.perf_counter() - t
            reached = m['exact_match'] == 1.0
            table.setdefault(task, []).append(m['steps'] if reached else None)
            al = cross_attention_alignment(model, reverse=task == 'reverse')
            print(f"{task} seed {seed}: {'100% at step ' + str(m['steps']) if reached else 'NOT 100% (' + format(m['exact_match'], '.1%') + ')'}"
                  f", {wall:.1f} s; attention within one position {al['band_share']:.2f}, argmax on it {al['argmax_hit']:.2f}", flush=True)
    print("\n| task | seeds | reached 100% | min | median | max |\n|---|---|---|---|---|---|")
    ok = True
    for task, steps in table.items():
        got = [s for s in steps if s is not None]
        ok &= len(got) == len(steps)
        stats = (min(got), statistics.median(got), max(got)) if got else ('-',) * 3
        print(f"| {task} | {len(steps)} | {len(got)} | {stats[0]} | {stats[1]} | {stats[2]} |")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
