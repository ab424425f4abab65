"""The GPT on Shakespeare: the CLI's recipe from command to last line, the same model trained beside transformers' GPT-2, and generation speed.

Usage: python benchmarks/shakespeare.py [--part cli hf generate] [--steps 1400] [--device cpu]

- cli: `transformer-tutorial train --task shakespeare` run as a user runs it, timed from the command to its last line;
  then the validation loss of the folder it wrote on all of the validation plays (back-to-back windows).
- hf: the course's GPT and a `transformers` GPT2LMHeadModel of the same size, starting from the same weights (the course's
  copied from GPT-2's by `from_gpt2`), trained on the same batches with the same optimizer, schedule and clipping by the
  course's `train_step`, one step of each in turn; step times and validation losses side by side.
- generate: seconds for 256 and 1024 new characters with and without the key/value cache (a model of the same width
  with a 1100-position table; untrained, since the speed does not depend on the weights).
"""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time
import torch
from torch import nn
from transformer_tutorial.gpt import GPT, ShakespeareTask, from_gpt2, generate
from transformer_tutorial.model_files import from_pretrained
from transformer_tutorial.training import make_optimizer, train_step

RECIPE = dict(d_model=128, num_heads=4, num_layers=4, d_ff=512, batch_size=32, lr=6e-3, warmup=100)  # the CLI's (cli.TASKS)


def cli(a):
    "Run the command, time it, and score the folder on the whole validation text."
    out = os.path.join(tempfile.mkdtemp(), 'run')
    cmd = ['transformer-tutorial', 'train', '--task', 'shakespeare', '--out', out, '--device', a.device] + (['--steps', str(a.steps)] if a.steps else [])
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    print(done.stdout.strip()); assert done.returncode == 0, done.stderr
    task, model = ShakespeareTask(context=64), from_pretrained(out)
    full = task.evaluate(model, n=None)
    print(f"cli: {' '.join(cmd[:4])}: {wall:.1f} s from the command to the last line; validation loss on all {full['n']} windows of "
          f"the validation plays {full['loss']:.4f} nats per character ({full['bits_per_char']:.3f} bits)", flush=True)


class Logits(nn.Module):
    "A transformers causal LM that returns its logits tensor, as the course's step expects."
    def __init__(self, model): super().__init__(); self.model = model
    def forward(self, idx): return self.model(idx).logits


def side_by_side(a):
    "Train the course's GPT and transformers' GPT-2 from the same weights on the same batches, a step of each in turn."
    from transformers import GPT2Config, GPT2LMHeadModel
    task, steps = ShakespeareTask(context=64), a.steps or 1400
    torch.manual_seed(0)
    theirs = GPT2LMHeadModel(GPT2Config(vocab_size=len(task.vocab), n_positions=64, n_embd=128, n_head=4, n_layer=4, n_inner=512,
                                        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, bos_token_id=0, eos_token_id=0))
    ours = from_gpt2(theirs).to(a.device).train()
    theirs = Logits(theirs).to(a.device).train()
    runs = {}
    for name, model in (('ours', ours), ('transformers', theirs)):
        opt, sched = make_optimizer(model, RECIPE['lr'], RECIPE['warmup'], total=steps, cooldown=0.4, floor=0.05)
        runs[name] = dict(model=model, opt=opt, sched=sched, batches=task.batches(RECIPE['batch_size'], seed=0), times=[], loss=[], valid={})
    every = max(1, steps // 4)
    for step in range(1, steps + 1):
        for r in runs.values():
            batch = r['batches']()
            t = time.perf_counter()
            loss, _ = train_step(r['model'], batch, r['opt'], task.pad_id)
            if a.device.startswith('cuda'): torch.cuda.synchronize()
            r['times'].append(time.perf_counter() - t); r['loss'].append(loss); r['sched'].step()
        if step % every == 0 or step == steps:
            for name, r in runs.items():
                r['valid'][step] = task.evaluate(r['model'], n=None if step == steps else 200)['loss']; r['model'].train()
            print(f"step {step}: " + ', '.join(f"{n} train {r['loss'][-1]:.3f} valid {r['valid'][step]:.4f}" for n, r in runs.items()), flush=True)
    med = {n: statistics.median(r['times'][10:]) for n, r in runs.items()}
    print(f"side by side, {steps} steps: median step ours {1000 * med['ours']:.1f} ms, transformers {1000 * med['transformers']:.1f} ms "
          f"(ours / theirs {med['ours'] / med['transformers']:.3f}); total training ours {sum(runs['ours']['times']):.1f} s, "
          f"transformers {sum(runs['transformers']['times']):.1f} s; final validation loss (all validation windows) ours "
          f"{runs['ours']['valid'][steps]:.4f}, transformers {runs['transformers']['valid'][steps]:.4f}, difference "
          f"{runs['ours']['valid'][steps] - runs['transformers']['valid'][steps]:+.4f} nats", flush=True)
    print('curves: ' + json.dumps({n: r['valid'] for n, r in runs.items()}))


def generation(a):
    "Seconds for 256 and 1024 new characters, with and without the cache."
    torch.manual_seed(0)
    model = GPT(83, 1100, 128, 4, 4, 512).to(a.device).eval()
    prompt = torch.randint(0, 83, (1, 6))
    for n in (256, 1024):
        row = {}
        for use_cache in (True, False):
            generate(model, prompt, 8, generator=0, use_cache=use_cache)               # warm-up
            t = time.perf_counter()
            generate(model, prompt, n, generator=0, use_cache=use_cache)
            row[use_cache] = time.perf_counter() - t
        print(f"generate {n} characters: with the cache {row[True]:.2f} s ({1000 * row[True] / n:.1f} ms each), without "
              f"{row[False]:.2f} s ({1000 * row[False] / n:.1f} ms each): {row[False] / row[True]:.1f}x", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--part', nargs='+', default=['cli', 'hf', 'generate'], choices=['cli', 'hf', 'generate'])
    ap.add_argument('--steps', type=int, default=None, help='training steps (default: the CLI recipe, 1400)')
    ap.add_argument('--device', default='cpu')
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {a.device}"
          + (f" ({torch.cuda.get_device_name()})" if a.device.startswith('cuda') else ''), flush=True)
    for part in a.part: {'cli': cli, 'hf': side_by_side, 'generate': generation}[part](a)
    return 0


if __name__ == '__main__':
    sys.exit(main())
