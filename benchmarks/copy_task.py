"""Wall time to 100% exact match on 1000 held-out copy-task sequences, and peak memory.

Usage: python benchmarks/copy_task.py [--seeds 0 1 2] [--task copy|reverse] [--device cpu]
Each seed trains with `train_task` (the CLI's and the notebook's defaults) until 100% held-out exact
match or the step budget; the wall time includes model construction and every evaluation.
"""
import argparse, resource, statistics, sys, time
import torch
from transformer_tutorial.copy_task import train_task


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    ap.add_argument('--task', default='copy', choices=['copy', 'reverse'])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--steps', type=int, default=None)
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {a.device}, task {a.task}")
    walls, results = [], []
    for seed in a.seeds:
        t = time.perf_counter()
        model, hist, m = train_task(a.task, steps=a.steps, device=a.device, seed=seed, progress=False)
        wall = time.perf_counter() - t
        walls.append(wall); results.append(m)
        print(f"seed {seed}: exact match {m['exact_match']:.1%}, token accuracy {m['token_accuracy']:.2%} on {m['n']} held-out "
              f"sequences after {m['steps']} steps, {wall:.1f} s ({1000 * wall / m['steps']:.1f} ms/step incl. evaluation)", flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
    ok = sum(m['exact_match'] == 1.0 for m in results)
    print(f"summary: {ok}/{len(results)} seeds reached 100% exact match; wall time median {statistics.median(walls):.1f} s, "
          f"max {max(walls):.1f} s; peak RSS {peak_mb:.0f} MiB")
    return 0 if ok == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
