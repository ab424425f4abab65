"""Time per training step of the copy task on 1 process and on N processes (data parallelism with torchrun).

Usage: python benchmarks/data_parallel.py [--device cpu|cuda] [--procs 1 2] [--steps 60] [--batch-size 128]
Each configuration is one `torchrun --standalone` job running `data_parallel_step` on the copy task's default model
(d_model 64, 1 layer) with the same global batch; 10 warm-up steps, then --steps timed steps between two barriers; rank 0
prints the mean ms/step. The jobs run one after another in this one invocation, and the table ends with each row's speed
relative to the first. On the CPU, torchrun gives each of N > 1 processes one thread; the 1-process rows are measured with
all cores and with one thread.
"""
import argparse, os, subprocess, sys, time
import torch


def worker(a):
    "One rank's part: build, warm up, time `a.steps` steps, print the mean on rank 0."
    import torch.distributed as dist
    from transformer_tutorial.copy_task import CopyTask, task_model
    from transformer_tutorial.training import PAD, make_optimizer
    from transformer_tutorial.data_parallel import init_distributed, sharded_batches, data_parallel_step, DDP
    env, device = init_distributed(a.device, timeout=120)
    task = CopyTask()
    model = task_model(task, seed=0).to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == 'cuda' else None) if env.world_size > 1 else model
    opt, _ = make_optimizer(model, 1e-3, warmup=100)
    batches = sharded_batches(task, a.batch_size, env, seed=0)
    sync = (lambda: dist.barrier()) if env.world_size > 1 else (lambda: None)
    for i in range(10 + a.steps):
        if i == 10:
            if device.type == 'cuda': torch.cuda.synchronize()
            sync(); t0 = time.perf_counter()
        data_parallel_step(ddp, [b.to(device) for b in batches()], opt, PAD)  # .item() inside waits for the device
    sync()
    if env.is_main: print(f"RESULT {1e3 * (time.perf_counter() - t0) / a.steps:.3f} {torch.get_num_threads()}", flush=True)
    if env.world_size > 1: dist.barrier(); dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--procs', type=int, nargs='+', default=[1, 2])
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--batch-size', type=int, default=128)
    ap.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker: return worker(a)
    configs = [(n, None) for n in a.procs]
    if a.device == 'cpu' and 1 in a.procs: configs.insert(a.procs.index(1) + 1, (1, '1'))  # one process, one thread
    name = torch.cuda.get_device_name() if a.device.startswith('cuda') else f'CPU, {os.cpu_count()} cores'
    print(f"torch {torch.__version__}, {name}; copy task, global batch {a.batch_size}, mean of {a.steps} steps")
    print("\n| processes | threads per process | ms/step | speed vs first row |\n|---|---|---|---|")
    first = None
    for n, threads in configs:
        env = dict(os.environ)
        if threads: env['OMP_NUM_THREADS'] = threads
        else: env.pop('OMP_NUM_THREADS', None)
        cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={n}', __file__, '--worker',
               '--device', a.device, '--steps', str(a.steps), '--batch-size', str(a.batch_size)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [l for l in r.stdout.splitlines() if l.startswith('RESULT')]
        if r.returncode or not lines: print(r.stderr[-3000:], file=sys.stderr); return 1
        ms, used = float(lines[0].split()[1]), lines[0].split()[2]
        first = first or ms
        print(f"| {n} | {used} | {ms:.1f} | {first / ms:.2f}x |", flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
