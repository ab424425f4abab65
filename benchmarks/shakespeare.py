"""The GPT on Shakespeare: the CLI's recipe from command to last line, the same model trained beside transformers' GPT-2, and generation speed.

Usage: python benchmarks/shakespeare.py [--part cli hf generate] [--steps 1400] [--device cpu]
       python benchmarks/shakespeare.py --part blocks        # the command's run with GPT-2's block and with its own
       python benchmarks/shakespeare.py --part schedules     # the command's run with its schedule and with a cosine
       python benchmarks/shakespeare.py --part budget --device cuda [--seconds 180]
       python benchmarks/shakespeare.py --part pace          # the budget part's model: seconds per step here

- cli: `transformer-tutorial train --task shakespeare` run as a user runs it, timed from the command to its last line;
  then the validation loss of the folder it wrote on all of the validation plays (back-to-back windows).
- blocks: the command's run (`train --task shakespeare`: its tokens, sizes and recipe) in this process, twice: with
  GPT-2's block (chapter 17, feed-forward 512 wide) and with the command's `SHAKESPEARE_BLOCK` (chapter 17c's Llama
  block, tied, 344 wide: about as many parameters); each timed from the call to its end and scored as `cli` scores.
- schedules: the command's run (`train --task shakespeare`) in this process, twice: with its own schedule (warmup, then
  the inverse square root with a cooldown over the last 40 % to 5 %, chapter 10) and with warmup then a cosine to 10 % of
  the peak at the last step (GPT-3's, Llama's and nanoGPT's shape, chapter 10's `warmup_cosine`); the same steps, seed
  and batches; each timed from the call to its end and scored as `cli` scores.
- hf: the course's GPT and a `transformers` GPT2LMHeadModel of the same size, starting from the same weights (the course's
  copied from GPT-2's by `from_gpt2`), trained on the same batches with the same optimizer, schedule and clipping by the
  course's `train_step`, one step of each in turn; step times and validation losses side by side.
- generate: seconds for 256 and 1024 new characters with and without the key/value cache (a model of the same width
  with a 1100-position table; untrained, since the speed does not depend on the weights).
- budget (for a GPU): the chapter-17 GPT scaled up (6 blocks, d_model 384, 6 heads, context 256, dropout 0.2: nanoGPT's
  character model) and trained for a fixed wall-clock budget with nanoGPT's recipe for it (AdamW lr 1e-3, betas (0.9, 0.99),
  weight decay 0.1 on the matrices, 100 warmup steps, cosine decay to 1e-4 over the steps the budget holds, estimated
  from the pace of steps 20 to 50; clipping at 1; batch 64; bf16 autocast), in a loop that never waits for the GPU except to read the
  clock every 50 steps. Scored on every character of the validation plays with at least half the context before it
  (chapter 16's `eval_windows`), beside the best count model and the old back-to-back score; then generation speed with and without the cache, the
  draw on the CPU (an int seed) and on the GPU (a generator there).
"""
import argparse, contextlib, json, math, os, statistics, subprocess, sys, tempfile, time
import torch
from torch import nn
from transformer_tutorial.gpt import GPT
from transformer_tutorial.gpt2 import from_gpt2
from transformer_tutorial.sampling import generate
from transformer_tutorial.shakespeare import ShakespeareTask
from transformer_tutorial.model_files import from_pretrained
from transformer_tutorial.training import make_optimizer, train_step

RECIPE = dict(d_model=128, num_heads=4, num_layers=4, d_ff=512, batch_size=32, lr=6e-3, warmup=100)  # chapter 17's GPT-2 block, the CLI's recipe


def cli(a):
    "Run the command, time it, and score the folder on the whole validation text."
    out = os.path.join(tempfile.mkdtemp(), 'run')
    cmd = ['transformer-tutorial', 'train', '--task', 'shakespeare', '--out', out, '--device', a.device] + (['--steps', str(a.steps)] if a.steps else [])
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    print(done.stdout.strip()); assert done.returncode == 0, done.stderr
    from transformer_tutorial.cli import task_from_config
    from transformer_tutorial.model_files import read_config
    task, model = task_from_config(read_config(out)['task']), from_pretrained(out)   # its tokens, as the run recorded them
    full = task.evaluate(model, n=None)
    print(f"cli: {' '.join(cmd[:4])}: {wall:.1f} s from the command to the last line; on every token of the validation plays after "
          f"the first ({full['tokens']} tokens, {full['chars']} characters, {full['n']} windows): {task.describe(full)}", flush=True)
    counted = count_model_loss(task)
    gpt = full['bits_per_char'] * math.log(2)                      # nats per character, whatever the tokens
    print(f"the best count model (chapter 16: interpolated Kneser-Ney, order {COUNT_ORDER}) on every validation character after the "
          f"first: {counted:.4f} nats; the GPT is {abs(counted - gpt):.4f} nats per character {'better' if gpt < counted else 'worse'}", flush=True)


COUNT_ORDER = 7   # the best order of chapter 16's table


def command_run(entry):
    "Run `train --task shakespeare` in this process with the command's task registry entry replaced by `entry` (task maker, options): (parameters, wall seconds from the call to its end, nats per character on every validation character after the first, the task)."
    from transformer_tutorial import cli as tt
    from transformer_tutorial.model_files import read_config
    saved, tt.TASKS['shakespeare'] = tt.TASKS['shakespeare'], entry
    out = os.path.join(tempfile.mkdtemp(), 'run')
    try:
        t = time.perf_counter()
        with contextlib.redirect_stdout(open(os.devnull, 'w')): tt.main(['train', '--task', 'shakespeare', '--out', out])
        wall = time.perf_counter() - t
    finally: tt.TASKS['shakespeare'] = saved
    task, model = tt.task_from_config(read_config(out)['task']), from_pretrained(out)
    nats = task.evaluate(model, n=None)['bits_per_char'] * math.log(2)
    return sum(p.numel() for p in model.parameters()), wall, nats, task


def blocks(a):
    "The command's run in this process with GPT-2's block, then with its own (`SHAKESPEARE_BLOCK`): parameters, wall time, the fair score against the count model."
    from transformer_tutorial import cli as tt
    make, options = tt.TASKS['shakespeare']
    counted = None
    print("| block | parameters | wall time | nats per character | against the count model |\n|---|---|---|---|---|", flush=True)
    for name, block, d_ff in (('GPT-2 (chapter 17)', {}, 512), ('Llama, tied (chapter 17c)', tt.SHAKESPEARE_BLOCK, options['d_ff'])):
        params, wall, nats, task = command_run((lambda block=block: ShakespeareTask(context=64, block=block), {**options, 'd_ff': d_ff}))
        counted = counted if counted is not None else count_model_loss(task)
        print(f"| {name} | {params:,} | {wall:.1f} s | {nats:.4f} | {abs(counted - nats):.3f} {'better' if nats < counted else 'worse'} |", flush=True)


def schedules(a):
    "The command's run in this process with its own schedule, then with a cosine to 10 % of the peak: the fair score of each."
    from transformer_tutorial import cli as tt
    make, options = tt.TASKS['shakespeare']
    counted = None
    print("| schedule after 100 warmup steps | steps | wall time | nats per character | against the count model |\n|---|---|---|---|---|", flush=True)
    for name, change in (("inverse square root, cooldown over the last 40 % to 5 % (the command's)", {}),
                         ('cosine to 10 % of the peak at the last step', {'schedule': 'cosine', 'lr_floor': 0.1})):
        _, wall, nats, task = command_run((make, {**options, **change}))
        counted = counted if counted is not None else count_model_loss(task)
        print(f"| {name} | {options['steps']} | {wall:.1f} s | {nats:.4f} | {abs(counted - nats):.3f} {'better' if nats < counted else 'worse'} |", flush=True)


def count_model_loss(task=None):
    "Chapter 16's best count model on characters, scored on every validation character after the first (nats per character)."
    from transformer_tutorial.shakespeare import KneserNey
    chars = ShakespeareTask(context=64)
    positions = torch.arange(1, len(chars.valid_ids))
    return -KneserNey(chars.train_ids, len(chars.vocab), COUNT_ORDER).log_probs(chars.valid_ids, positions).mean().item()


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


def back_to_back_loss(model, task, batch_size=64):
    "Mean cross-entropy of every character of back-to-back windows (each window's first characters predicted from little)."
    import torch.nn.functional as F
    device, starts = next(model.parameters()).device, torch.arange(0, len(task.valid_ids) - task.context - 1, task.context)
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(starts), batch_size):
            x, y = task._windows(task.valid_ids, starts[i:i + batch_size])
            total += F.cross_entropy(model(x.to(device)).float().flatten(0, 1), y.to(device).flatten(), reduction='sum').item()
    return total / (len(starts) * task.context)


def pace(a):
    "Seconds per training step of the budget part's model (6 blocks, d_model 384, context 256, batch 64) on this device, after one warm-up step."
    task = ShakespeareTask(context=256)
    torch.manual_seed(0)
    model = GPT(len(task.vocab), 256, a.d_model, a.heads, a.layers, 4 * a.d_model, dropout=0.2).to(a.device)
    opt, _ = make_optimizer(model, 1e-3, 10)
    batches = task.batches(64, seed=0)
    train_step(model, batches(), opt, task.pad_id)
    t = time.perf_counter()
    for _ in range(3): train_step(model, batches(), opt, task.pad_id)
    step = (time.perf_counter() - t) / 3
    print(f"the budget part's model on {a.device}: {step:.2f} s per step of 64 windows of 256 (float32, the mean of 3); "
          f"the 1800 steps the H100 made in 44 s would take {1800 * step / 3600:.1f} h here", flush=True)


def budget(a):
    "Train a larger GPT for a fixed wall-clock budget on a GPU (see the module's docstring), score it, time generation."
    import math as m
    from transformer_tutorial.gpt import gpt_flops_per_token
    device = torch.device(a.device)
    task = ShakespeareTask(context=256)
    torch.manual_seed(0)
    model = GPT(len(task.vocab), 256, a.d_model, a.heads, a.layers, 4 * a.d_model, dropout=0.2).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.1}, {'params': rest, 'weight_decay': 0.0}], lr=1e-3, betas=(0.9, 0.99),
                            fused=device.type == 'cuda')
    total = [10 ** 9]   # set once the first steps have been timed
    def factor(step):
        if step < 100: return (step + 1) / 100
        progress = min(1.0, (step - 100) / max(1, total[0] - 100))
        return 0.1 + 0.9 * 0.5 * (1 + m.cos(m.pi * progress))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    train_ids = task.train_ids.to(device)
    g = torch.Generator(device=device).manual_seed(0)
    offsets = torch.arange(257, device=device)
    amp = torch.autocast(device.type, dtype=torch.bfloat16) if device.type == 'cuda' else contextlib.nullcontext()
    flops_per_step = 3 * gpt_flops_per_token(model.config) * 64 * 256
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    losses, curve, step = [], {}, 0
    sync(); t0 = time.perf_counter()
    model.train()
    while True:
        w = train_ids[torch.randint(0, len(train_ids) - 257, (64,), device=device, generator=g)[:, None] + offsets]   # (64, 257)
        with amp: logits = model(w[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), w[:, 1:].flatten())
        opt.zero_grad(set_to_none=True); loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step(); sched.step(); step += 1
        if step % 50 == 0: losses.append(loss.detach())
        if step in (20, 50):
            sync(); spent = time.perf_counter() - t0
            if step == 20: t20 = spent
            else:   # steps 20-50 set the pace; the first ones also start cuBLAS and the allocator
                total[0] = max(50, int(50 + (a.seconds - spent) / ((spent - t20) / 30)))
                print(f"first 50 steps {spent:.1f} s ({1000 * (spent - t20) / 30:.1f} ms/step after the 20th); the schedule spans {total[0]} steps", flush=True)
        if step % 50 == 0:
            sync()
            if time.perf_counter() - t0 >= a.seconds or step >= total[0]: break
    sync(); wall = time.perf_counter() - t0
    print(f"trained {step} steps in {wall:.1f} s: {step * 64 * 256 / wall:,.0f} tokens/s, {1e3 * wall / step:.1f} ms/step, "
          f"{flops_per_step * step / wall / 1e12:.1f} TFLOP/s of model FLOPs (6 N per token plus attention); "
          f"training loss every 50 steps, last 5: {[round(x.item(), 3) for x in losses[-5:]]}", flush=True)
    model.eval()
    t = time.perf_counter(); fair = task.evaluate(model, n=None)['loss']
    t_fair = time.perf_counter() - t
    back = back_to_back_loss(model, task)
    print(f"validation plays, every character with at least 128 before it: {fair:.4f} nats per character ({fair / m.log(2):.3f} bits), "
          f"scored in {t_fair:.1f} s; back to back windows of 256 (the course's score before chapter 16's fair one): {back:.4f}; "
          f"the best count model on the same characters: {count_model_loss(task):.4f}", flush=True)
    prompt = task.encode('ROMEO:\n')
    for n_new in (240,):   # within the context of 256, where the cache applies
        for use_cache, gen in ((True, 0), (True, 'device'), (False, 0)):
            generator = torch.Generator(device=device).manual_seed(0) if gen == 'device' else gen
            generate(model, prompt, 8, generator=generator, use_cache=use_cache); sync()
            generator = torch.Generator(device=device).manual_seed(0) if gen == 'device' else gen
            t = time.perf_counter(); text = generate(model, prompt, n_new, generator=generator, use_cache=use_cache); sync()
            dt = time.perf_counter() - t
            print(f"generate {n_new} characters, {'with' if use_cache else 'without'} the cache, drawn on the "
                  f"{'GPU' if gen == 'device' else 'CPU'}: {dt:.2f} s, {n_new / dt:.0f} characters/s", flush=True)
    print("sample (cache, seed 0 on the CPU):\n" + task.decode(generate(model, prompt, 240, generator=0)[0].tolist()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--part', nargs='+', default=['cli', 'hf', 'generate'], choices=['cli', 'blocks', 'schedules', 'hf', 'generate', 'budget', 'pace'])
    ap.add_argument('--seconds', type=float, default=180, help='the budget part: seconds of training')
    ap.add_argument('--d-model', type=int, default=384); ap.add_argument('--layers', type=int, default=6); ap.add_argument('--heads', type=int, default=6)
    ap.add_argument('--steps', type=int, default=None, help='training steps (default: the CLI recipe, 1400)')
    ap.add_argument('--device', default='cpu')
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {a.device}"
          + (f" ({torch.cuda.get_device_name()})" if a.device.startswith('cuda') else ''), flush=True)
    for part in a.part: {'cli': cli, 'blocks': blocks, 'schedules': schedules, 'hf': side_by_side, 'generate': generation, 'budget': budget, 'pace': pace}[part](a)
    return 0


if __name__ == '__main__':
    sys.exit(main())
