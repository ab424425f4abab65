"""Wall time to 100% exact match on 1000 held-out copy-task sequences, and peak memory.

Usage: python benchmarks/copy_task.py [--seeds 0 1 2] [--task copy|reverse] [--device cpu] [--fast] [--graphs on|off] [--fp32]
Each seed trains with `train_task` (the notebook's defaults, or with --fast the command line's `FAST_COPY` recipe) until
100% held-out exact match or the step budget; the wall time includes model construction, recording the CUDA graphs where
they are used, and every evaluation. On a GPU one short run first starts CUDA (its libraries and context), which a
learner's notebook or command pays once; the table times the runs after it. `--graphs` and `--fp32` change the GPU
defaults (CUDA graphs on, bf16 autocast) one at a time.
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
    ap.add_argument('--fast', action='store_true', help="the command line's recipe (FAST_COPY) instead of train_task's defaults")
    ap.add_argument('--graphs', choices=['on', 'off'], default=None, help='CUDA graphs (default: on a GPU, on)')
    ap.add_argument('--fp32', action='store_true', help='float32 on a GPU too (default there: bf16 autocast)')
    a = ap.parse_args()
    from transformer_tutorial.fast import FAST_COPY
    options = {**(FAST_COPY if a.fast else {}), 'graphs': {'on': True, 'off': False, None: None}[a.graphs], 'mixed_precision': not a.fp32}
    gpu = a.device.startswith('cuda')
    where = f" ({torch.cuda.get_device_name(a.device)}, CUDA {torch.version.cuda})" if gpu else ''
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {a.device}{where}, task {a.task}, "
          f"{'FAST_COPY' if a.fast else 'defaults'}, graphs {a.graphs or 'default'}, {'float32' if a.fp32 else 'default precision'}")
    if gpu:
        t = time.perf_counter()
        train_task(a.task, steps=20, device=a.device, seed=99, progress=False, **options)
        print(f"CUDA start-up and a 20-step run first: {time.perf_counter() - t:.1f} s", flush=True)
    walls, results = [], []
    for seed in a.seeds:
        t = time.perf_counter()
        model, hist, m = train_task(a.task, steps=a.steps, device=a.device, seed=seed, progress=False, **options)
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
