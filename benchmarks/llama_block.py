"""GPT-2's block against Llama's on Shakespeare (chapter 17c), longer than the chapter can run, and the key/value cache per token.

Usage: python benchmarks/llama_block.py [--seconds 180] [--seeds 0 1] [--device cpu]

- blocks: chapter 17's GPT (4 blocks, width 128, 4 heads, context 64) with GPT-2's block (LayerNorm, biases, GELU feed-forward
  of 512, learned positions, multi-head attention, tied output layer) and with Llama's (RMSNorm, no biases, SwiGLU, RoPE,
  2 key/value heads, its own output layer, the feed-forward width that makes the parameter counts equal), trained with the
  same recipe on the same batches for the same time: a pace probe (the models taking turns) sets each model's number of
  steps to what fits in --seconds, then both train one step each in turn, so that both meet the same load. Validation on
  every character of the validation plays with at least half a window before it (chapter 16's score, `n=None`).
- cache: the bytes a `KVCache` holds per token for a model of width 512, 8 heads and 8 blocks with 8, 2 and 1 key/value heads.
"""
import argparse, json, time
import torch
from transformer_tutorial.gpt import GPT, GPTConfig, gpt_parameter_count
from transformer_tutorial.llama import LLAMA_BLOCK
from transformer_tutorial.shakespeare import ShakespeareTask
from transformer_tutorial.training import make_optimizer, train_step
from transformer_tutorial.decoding import KVCache

SIZE = dict(d_model=128, num_heads=4, num_layers=4)
RECIPE = dict(batch_size=32, lr=6e-3, warmup=100)               # chapter 17's (and the command line's), clipped at 1
BLOCKS = {'GPT-2 block': {},
          'Llama block': {**LLAMA_BLOCK, 'num_kv_heads': 2}}


def widths(vocab_size):
    "The feed-forward width of each block: 512 for GPT-2's, the one that matches its parameter count for Llama's."
    count = lambda block, f: gpt_parameter_count(GPTConfig(vocab_size, 64, d_ff=f, **SIZE, **block))
    target = count({}, 512)
    return {'GPT-2 block': 512, 'Llama block': min(range(256, 768), key=lambda f: abs(count(BLOCKS['Llama block'], f) - target))}


def build(name, vocab_size, d_ff, seed, device):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT(vocab_size, 64, d_ff=d_ff, **SIZE, **BLOCKS[name]).to(device)


def run(seed, seconds, device):
    task = ShakespeareTask(context=64)
    V, ff = len(task.vocab), widths(len(task.vocab))
    probe = {name: build(name, V, ff[name], seed, device) for name in BLOCKS}
    opts = {name: make_optimizer(m, RECIPE['lr'], 10, total=100)[0] for name, m in probe.items()}
    batches = {name: task.batches(RECIPE['batch_size'], seed + 1000) for name in BLOCKS}
    times = {name: [] for name in BLOCKS}
    for r in range(4):
        for name, m in probe.items():
            t0 = time.perf_counter()
            for _ in range(10): train_step(m, batches[name](), opts[name], task.pad_id)
            if device.type == 'cuda': torch.cuda.synchronize()
            if r: times[name].append((time.perf_counter() - t0) / 10)              # the first round warms up
    pace = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    steps = {name: int(seconds / p) for name, p in pace.items()}
    models = {name: build(name, V, ff[name], seed, device) for name in BLOCKS}
    sched = {name: make_optimizer(models[name], RECIPE['lr'], min(RECIPE['warmup'], steps[name]), total=steps[name], cooldown=0.4, floor=0.05)
             for name in BLOCKS}                                          # train_task's schedule
    batches = {name: task.batches(RECIPE['batch_size'], seed) for name in BLOCKS}   # the same batches, in the same order
    done, clock, curve = {n: 0 for n in BLOCKS}, {n: 0.0 for n in BLOCKS}, {n: [] for n in BLOCKS}
    while any(done[n] < steps[n] for n in BLOCKS):
        for name, model in models.items():
            if done[name] == steps[name]: continue
            opt, scheduler = sched[name]
            t0 = time.perf_counter()
            train_step(model, batches[name](), opt, task.pad_id)
            scheduler.step()
            if device.type == 'cuda': torch.cuda.synchronize()
            clock[name] += time.perf_counter() - t0
            done[name] += 1
            if done[name] % max(1, steps[name] // 6) == 0 or done[name] == steps[name]:
                curve[name].append((done[name], round(clock[name], 1), round(task.evaluate(model, n=200)['loss'], 4)))
    rows = []
    for name, model in models.items():
        final = task.evaluate(model, n=None)
        rows.append(dict(block=name, seed=seed, parameters=sum(p.numel() for p in model.parameters()), d_ff=ff[name], steps=steps[name],
                         seconds=round(clock[name], 1), ms_per_step=round(1000 * clock[name] / steps[name], 1),
                         valid_loss=round(final['loss'], 4), chars=final['chars'], curve=curve[name]))
    return rows


def cache_bytes():
    "Bytes per token of a float32 KVCache for width 512, 8 heads of 64, 8 blocks, with 8, 2 and 1 key/value heads."
    out = {}
    for kv in (8, 2, 1):
        model = GPT(100, 256, 512, 8, 8, 1024, positions='rope', num_kv_heads=kv)
        out[8 // kv] = KVCache(model, None, 256, batch_size=1).nbytes() // 256
    return out


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--seconds', type=float, default=180.0)
    ap.add_argument('--seeds', type=int, nargs='+', default=[0, 1])
    ap.add_argument('--device', default='cpu')
    args = ap.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {device}, {args.seconds:.0f} s per model")
    print('key/value cache, bytes per token (H/H_kv: bytes):', json.dumps(cache_bytes()))
    for seed in args.seeds:
        for row in run(seed, args.seconds, device): print(json.dumps(row), flush=True)
