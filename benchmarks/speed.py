"""Chapter 20's table in one run, and `transformer-tutorial train` timed from the command to its last line.

Usage:
  python benchmarks/speed.py steps [--device cpu|cuda] [--compile]   # one training step of the copy-task model, one change at a time
  python benchmarks/speed.py phases [--task copy] [--seed 0]         # where one `train` run's time goes, in this process
  python benchmarks/speed.py cli [--task copy] [--seeds 0 1 2] [--options lr=0.02,warmup=50,schedule_steps=300 [--only-options]] [--threads 1]
  python benchmarks/speed.py syncs [--device cuda]                   # where a training step makes the CPU wait for the GPU

`steps`: every variant is timed interleaved with the others (`transformer_tutorial.fast.time_steps`), so load from other
processes hits them alike; speed-up = default step / variant. `--compile` adds torch.compile (tens of seconds to compile
on a CPU); on a CUDA device it also adds mode="reduce-overhead" (CUDA graphs), and autocast uses bf16 there as on the CPU.
On a CUDA device `steps` also times chapter 20's `GraphedModel` (the forward and backward passes recorded as CUDA graphs,
the loss, clipping and a foreach AdamW outside them), in float32 and under bf16 autocast.
`syncs`: one training step of the copy task under `torch.cuda.set_sync_debug_mode('warn')`, eager and graphed: each
place where the CPU waits for the GPU, counted.
`cli`: each seed runs the command as a fresh process (start-up and imports included) and reports the wall time, the
held-out exact match and the steps; with `--options`, each seed also runs with the task's registered training options
(cli.TASKS) changed as given, interleaved with the unchanged command.
"""
import argparse, os, platform, re, shutil, statistics, subprocess, sys, tempfile, time
import torch


def header(device):
    "The device, versions, threads and load a number was measured with."
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else platform.processor() or 'CPU'
    load = ' '.join(f'{x:.2f}' for x in os.getloadavg()) if hasattr(os, 'getloadavg') else 'unknown'
    return (f"device {device} ({name}), torch {torch.__version__}, Python {platform.python_version()}, "
            f"{torch.get_num_threads()} threads, {os.cpu_count()} cores, load average {load}")


def steps(a):
    from transformer_tutorial.copy_task import CopyTask, task_model
    from transformer_tutorial.training import PAD, train_step, record_attention
    from transformer_tutorial.fast import time_steps, compile_model
    device = torch.device(a.device)
    task = CopyTask()
    def setup(batch_size=128, **adamw):
        model = task_model(task, seed=0).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9, **adamw)
        return model, opt, task.batches(batch_size, seed=0)().to(device)
    def plain(model, opt, batch, amp=None): return lambda: train_step(model, batch, opt, PAD, amp=amp)
    def formula_norms(model, opt, batch):
        from transformer_tutorial.layer_norm import LayerNorm
        for m in model.modules():
            if isinstance(m, LayerNorm): m.fused = False  # chapter 5's formula, step by step
        return model, opt, batch
    def hand(model, opt, batch):
        def step():
            with record_attention(model): train_step(model, batch, opt, PAD)
        return step
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    variants = {'default step (fused attention, for-loop AdamW)': plain(*setup(foreach=False)),
                'hand-written attention (weights kept)': hand(*setup(foreach=False)),
                'layer norm step by step (fused=False)': plain(*formula_norms(*setup(foreach=False))),
                'foreach AdamW': plain(*setup(foreach=True)),
                'fused AdamW': plain(*setup(fused=True)),
                'bf16 autocast': plain(*setup(foreach=False), amp=autocast()),
                'batch 256 (time per 128 sequences)': plain(*setup(256, foreach=False))}
    if device.type == 'cuda':
        from transformer_tutorial.fast import GraphedModel
        for name, dtype in (('CUDA graphs, float32 (foreach AdamW)', None), ('CUDA graphs, bf16 autocast (foreach AdamW)', torch.bfloat16)):
            model, opt, batch = setup(foreach=True)
            graphed = GraphedModel(model, batch.logits(lambda *args: args), dtype)
            amp = torch.autocast('cuda', dtype=dtype, cache_enabled=False) if dtype else None
            variants[name] = plain(graphed, opt, batch, amp)
    modes = ([None] + (['reduce-overhead'] if device.type == 'cuda' else [])) if a.compile else []
    for mode in modes:
        model, opt, batch = setup(foreach=False)
        compiled = compile_model(model, mode=mode)
        t = time.perf_counter(); train_step(compiled, batch, opt, PAD)
        print(f"torch.compile(mode={mode!r}): first step {time.perf_counter() - t:.1f} s (compiling included)", flush=True)
        variants[f'torch.compile(mode={mode!r})'] = plain(compiled, opt, batch)
    print(header(device), flush=True)
    times = time_steps(variants, rounds=a.rounds, min_run_time=a.min_run_time)
    times['batch 256 (time per 128 sequences)'] /= 2
    base = next(iter(times.values()))
    print(f"\n| variant | ms/step | speed-up |\n|---|---|---|")
    for name, s in times.items(): print(f"| {name} | {1000 * s:.2f} | {base / s:.2f}x |")
    print(header(device))


LAUNCH = "import sys, json; from transformer_tutorial import cli; opts, task = json.loads(sys.argv[1]), sys.argv[sys.argv.index('--task') + 1]; " \
         "make, o = cli.TASKS[task]; cli.TASKS[task] = (make, {**o, **opts}); sys.exit(cli.main(sys.argv[2:]))"


def run_cli(task, seed, options, threads=None):
    "Wall seconds of one `transformer-tutorial train` process, its held-out exact match and its steps."
    import json
    out = tempfile.mkdtemp(prefix='speed-')
    cmd = [sys.executable, '-c', LAUNCH, json.dumps(options), 'train', '--task', task, '--seed', str(seed), '--out', out]
    t = time.perf_counter()
    env = {**os.environ, **({'OMP_NUM_THREADS': str(threads)} if threads else {})}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    if r.returncode: raise SystemExit(f"{' '.join(cmd[3:])} failed:\n{r.stderr[-2000:]}")
    m = re.search(r"held-out exact match ([\d.]+)%.* after (\d+) steps", r.stdout)
    return wall, float(m.group(1)), int(m.group(2))


def cli(a):
    options = dict((k, type_of(v)) for k, v in (kv.split('=') for kv in a.options.split(','))) if a.options else None
    runs = {**({} if a.only_options else {'command as it is': {}}), **({f'with {a.options}': options} if options else {})}
    print(header(torch.device('cpu')) + (f"; the runs on {a.threads} thread(s) (OMP_NUM_THREADS)" if a.threads else ''), flush=True)
    rows = {name: [] for name in runs}
    for seed in a.seeds:
        for name, opts in runs.items():  # interleaved: load from other processes hits both alike
            wall, exact, n = run_cli(a.task, seed, opts, a.threads)
            rows[name].append((wall, exact, n))
            print(f"{name}, seed {seed}: {wall:.1f} s, held-out exact match {exact:.1f}% after {n} steps", flush=True)
    print(f"\n| {a.task} | seeds at 100% | steps (min-max) | wall s (median, min-max) |\n|---|---|---|---|")
    for name, r in rows.items():
        walls = [w for w, _, _ in r]
        print(f"| {name} | {sum(e == 100.0 for _, e, _ in r)} of {len(r)} | {min(n for *_, n in r)}-{max(n for *_, n in r)} "
              f"| {statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f}) |")
    print(header(torch.device('cpu')))


def phases(a):
    "Time `transformer-tutorial train` in this process, split into imports, the first optimizer, training steps, evaluations, saving and plots."
    code = ("import time; t = time.perf_counter(); import transformer_tutorial.cli, transformer_tutorial.data_parallel; "
            "print(time.perf_counter() - t)")  # torch is loaded here already: time the imports in a fresh process
    spent = {'import the package and torch (a fresh process)':
             float(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)}
    from transformer_tutorial import cli as command, copy_task
    def timed(module, name, label):
        f = getattr(module, name)
        def g(*args, **kwargs):
            t = time.perf_counter()
            try: return f(*args, **kwargs)
            finally: spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
        setattr(module, name, g)
    for name, label in (('make_optimizer', 'make the optimizer (imports torch._dynamo)'), ('train', 'training steps'),
                        ('evaluate', 'evaluations (greedy decoding, 1000 sequences)'), ('save_checkpoint', 'checkpoints')):
        timed(copy_task, name, label)
    timed(command, '_save_plots', 'plots')
    out = tempfile.mkdtemp(prefix='speed-')
    t = time.perf_counter()
    command.main(['train', '--task', a.task, '--seed', str(a.seed), '--out', out])
    total = time.perf_counter() - t + spent['import the package and torch (a fresh process)']
    shutil.rmtree(out, ignore_errors=True)
    print(header(torch.device('cpu')))
    print(f"\n| part of `train --task {a.task}` | seconds |\n|---|---|")
    for label, sec in spent.items(): print(f"| {label} | {sec:.2f} |")
    print(f"| everything else (model, logs) | {total - sum(spent.values()):.2f} |\n| total, after Python started | {total:.2f} |")


def syncs(a):
    "Count the synchronizing calls of one copy-task training step, eager (as train_task runs it on a GPU without graphs) and graphed."
    import warnings
    from collections import Counter
    from transformer_tutorial.copy_task import CopyTask, task_model
    from transformer_tutorial.training import PAD, train_step, make_optimizer, _autocast
    from transformer_tutorial.fast import graph_model
    device = torch.device(a.device)
    task = CopyTask()
    print(header(device), flush=True)
    for graphed in (False, True):
        model = task_model(task, seed=0).to(device)
        opt, _ = make_optimizer(model, 1e-3, 10)
        precision = _autocast(device)
        next_batch = task.batches(128, seed=0)
        trained = graph_model(model, next_batch().to(device), precision) if graphed else model
        for _ in range(3): train_step(trained, next_batch(), opt, PAD, amp=precision[0], scaler=precision[1])   # warm-up
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode('warn')
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            train_step(trained, next_batch(), opt, PAD, amp=precision[0], scaler=precision[1])
        torch.cuda.set_sync_debug_mode(0)
        where = Counter(f"{os.path.relpath(w.filename)}:{w.lineno}" for w in caught if 'synchroniz' in str(w.message))
        print(f"{'graphed' if graphed else 'eager'} step: {sum(where.values())} synchronizations: "
              + '; '.join(f"{k} ({n}x)" for k, n in where.most_common()), flush=True)


def type_of(v):
    "A number from an --options value where it is one."
    for cast in (int, float):
        try: return cast(v)
        except ValueError: pass
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest='what', required=True)
    s = sub.add_parser('steps'); s.add_argument('--device', default='cpu'); s.add_argument('--compile', action='store_true')
    s.add_argument('--rounds', type=int, default=7); s.add_argument('--min-run-time', type=float, default=0.3)
    c = sub.add_parser('cli'); c.add_argument('--task', default='copy', choices=['copy', 'reverse'])
    c.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2]); c.add_argument('--options', default=None)
    c.add_argument('--only-options', action='store_true', help='leave out the runs of the unchanged command')
    c.add_argument('--threads', type=int, default=None, help="OMP_NUM_THREADS for the runs (default: torch's choice)")
    y = sub.add_parser('syncs'); y.add_argument('--device', default='cuda')
    p = sub.add_parser('phases'); p.add_argument('--task', default='copy', choices=['copy', 'reverse'])
    p.add_argument('--seed', type=int, default=0)
    a = ap.parse_args(argv)
    {'steps': steps, 'cli': cli, 'phases': phases, 'syncs': syncs}[a.what](a)


if __name__ == '__main__':
    main()
