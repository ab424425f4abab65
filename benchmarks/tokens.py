"""Chapter 16a's byte-pair encoding measured: training time against Hugging Face tokenizers, encoding speed against tiktoken, the memory of streaming a large file, and the Shakespeare GPT on characters and on subwords at equal wall time.

Usage: python benchmarks/tokens.py [--part train encode stream formats gpt] [--seconds 150] [--sizes 0 512 1000 2000]   (0: characters)

- train: a 1,000-token vocabulary on the 4.4 MB of training plays, this course's trainer (pure Python) and tokenizers'
  BpeTrainer (Rust) with GPT-2's pre-tokenizer, median of 3 runs each, interleaved.
- encode: the training plays encoded with GPT-2's vocabulary, the course's encoder (a fresh tokenizer, so its cache of
  pieces starts empty, and once more warm) against tiktoken's, median of 3; MB/s and the ratio.
- stream: a 100 MB file (the training plays repeated) encoded with encode_iterable line by line: its wall time, then the
  peak of tracemalloc's traced memory in a second pass (tracing slows Python's allocations, so it is not timed).
- formats: chapter 16b's reader of tokenizer.json against the `tokenizers` library (Rust) encoding the validation plays,
  for GPT-2's published file and for each family's file of chapter 16c (4,000 tokens learned from the first 1 MB of the
  training plays): the course's encoder with an empty cache and warm, tokenizers' `encode` of the same text, median of 3
  interleaved; MB/s, the ratio, and the ids checked equal.
- gpt: the chapter-17 model (4 blocks, d_model 128, 4 heads, d_ff 512, context 64 tokens, batch 32, lr 6e-3, the CLI's
  schedule fitted to the steps the time holds, measured on the first 20) trained for `--seconds` of wall time each on
  characters and on BPE tokens of each size (tokenizers trained on the training plays), in one process, one after
  another; each scored on every validation character (chapter 16's fair score over tokens) in bits per character.
"""
import argparse, gzip, math, statistics, sys, tempfile, time, tracemalloc
from pathlib import Path
import torch
from transformer_tutorial.shakespeare import load_shakespeare, ShakespeareTask
from transformer_tutorial.tokenizer import BPETokenizer, GPT2_PATTERN, gpt2_tokenizer, read_gpt2_files
from transformer_tutorial.training import train_step, warmup_inverse_sqrt


def train_part(a):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    plays = load_shakespeare('train')
    def ours(): BPETokenizer.train(plays, 1000)
    def theirs():
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        hf.train_from_iterator([plays], trainers.BpeTrainer(vocab_size=1000, show_progress=False,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    times = {'course (Python)': [], 'tokenizers (Rust)': []}
    for _ in range(3):
        for name, f in (('course (Python)', ours), ('tokenizers (Rust)', theirs)):
            t = time.perf_counter(); f(); times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"training 1000 tokens on {len(plays) / 1e6:.1f} MB: course {med['course (Python)']:.2f} s, tokenizers {med['tokenizers (Rust)']:.2f} s "
          f"(course / tokenizers {med['course (Python)'] / med['tokenizers (Rust)']:.1f}x; medians of 3)", flush=True)


def tiktoken_gpt2():
    "tiktoken's GPT-2 encoding built from the package's copies of the files (offline)."
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from importlib import resources
    data = resources.files('transformer_tutorial') / 'data'
    with tempfile.TemporaryDirectory() as folder:
        for name in ('gpt2_vocab.bpe.gz', 'gpt2_encoder.json.gz'):
            Path(folder, name[5:-3]).write_bytes(gzip.decompress((data / name).read_bytes()))
        ranks = data_gym_to_mergeable_bpe_ranks(str(Path(folder, 'vocab.bpe')), str(Path(folder, 'encoder.json')))
    return tiktoken.Encoding('gpt2', pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={'<|endoftext|>': 50256})


def encode_part(a):
    plays = load_shakespeare('train')
    reference, base = tiktoken_gpt2(), gpt2_tokenizer()
    mb = len(plays.encode('utf-8')) / 1e6
    cold, warm, theirs = [], [], []
    for _ in range(3):
        fresh = BPETokenizer(base.vocab, base.merges, base.special_tokens)       # an empty cache of pieces
        t = time.perf_counter(); ids = fresh.encode(plays); cold.append(time.perf_counter() - t)
        t = time.perf_counter(); fresh.encode(plays); warm.append(time.perf_counter() - t)
        t = time.perf_counter(); ref = reference.encode_ordinary(plays); theirs.append(time.perf_counter() - t)
    assert ids == ref
    c, w, r = (statistics.median(x) for x in (cold, warm, theirs))
    print(f"encoding the training plays ({mb:.1f} MB, {len(ids):,} GPT-2 tokens, the same ids): course {mb / c:.2f} MB/s with an empty cache, "
          f"{mb / w:.2f} MB/s warm; tiktoken {mb / r:.2f} MB/s; tiktoken is {c / r:.1f}x (empty cache) and {w / r:.1f}x (warm) faster", flush=True)


def stream_part(a):
    plays, base = load_shakespeare('train'), gpt2_tokenizer()
    fresh = lambda: BPETokenizer(base.vocab, base.merges, base.special_tokens)   # each pass starts with an empty cache of pieces
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / 'big.txt'
        with open(path, 'w', encoding='utf-8') as f:
            while f.tell() < 100_000_000: f.write(plays)
        size = path.stat().st_size
        def stream():
            tok = fresh()
            with open(path, encoding='utf-8') as f: return sum(1 for _ in tok.encode_iterable(f))
        t = time.perf_counter(); n = stream(); wall = time.perf_counter() - t
        tracemalloc.start(); stream(); peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()   # again, traced (slower)
    print(f"encode_iterable over a {size / 1e6:.0f} MB file read line by line: {n:,} ids in {wall:.0f} s ({size / 1e6 / wall:.2f} MB/s); "
          f"peak traced memory in a second, traced pass {peak / 2**20:.1f} MiB (Python allocations while streaming: the held text, the cache "
          f"of pieces)", flush=True)


def formats_part(a):
    import json
    from tokenizers import Tokenizer
    from transformer_tutorial.hub_tokenizer import HubTokenizer
    from transformer_tutorial.hub_families import FAMILIES, family_tokenizer_json, gpt2_tokenizer_json
    plays, valid = load_shakespeare('train')[:1_000_000], load_shakespeare('valid')
    mb = len(valid.encode('utf-8')) / 1e6
    specs = {'gpt2 (published, 50,257)': gpt2_tokenizer_json()}
    specs.update({f'{f} (4,000)': family_tokenizer_json(f, plays, 4000) for f in FAMILIES if f != 'gpt2'})
    print(f"encoding the validation plays ({mb:.2f} MB), medians of 3:", flush=True)
    print("| file | course, empty cache (MB/s) | course, warm (MB/s) | tokenizers (MB/s) | course / tokenizers, empty cache | warm |", flush=True)
    print("|---|---|---|---|---|---|", flush=True)
    for name, spec in specs.items():
        ref = Tokenizer.from_str(json.dumps(spec))
        cold, warm, theirs = [], [], []
        for _ in range(3):
            ours = HubTokenizer(spec)                                          # an empty cache of pieces
            t = time.perf_counter(); ids = ours.encode(valid); cold.append(time.perf_counter() - t)
            t = time.perf_counter(); ours.encode(valid); warm.append(time.perf_counter() - t)
            t = time.perf_counter(); want = ref.encode(valid).ids; theirs.append(time.perf_counter() - t)
        assert ids == want, name
        c, w, r = (statistics.median(x) for x in (cold, warm, theirs))
        print(f"| {name} | {mb / c:.2f} | {mb / w:.2f} | {mb / r:.2f} | {c / r:.1f}x | {w / r:.1f}x |", flush=True)


def gpt_part(a):
    plays = load_shakespeare('train')
    runs = [('characters', None) if v == 0 else (f'BPE {v}', v) for v in a.sizes]
    print(f"{a.seconds:.0f} s of training each, 2 threads: the CLI's model and recipe, context 64 tokens", flush=True)
    for name, size in runs:
        tokenizer = BPETokenizer.train(plays, size) if size else None
        task = ShakespeareTask(context=64, tokenizer=tokenizer)
        chars_per_token = len(plays) / len(task.train_ids)
        model = task.make_model(seed=0, d_model=128, num_heads=4, num_layers=4, d_ff=512)
        total = [10 ** 9]                                  # the steps the time holds, set from the pace of the first 20
        opt = torch.optim.AdamW(model.parameters(), lr=6e-3, betas=(0.9, 0.98), eps=1e-9)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: warmup_inverse_sqrt(100, total[0], 0.4, 0.05)(step))
        batches, t0, steps = task.batches(32, seed=0), time.perf_counter(), 0
        while time.perf_counter() - t0 < a.seconds and steps < total[0]:
            train_step(model, batches(), opt, task.pad_id); sched.step(); steps += 1
            if steps == 20: total[0] = int(a.seconds / ((time.perf_counter() - t0) / 20))
        m = task.evaluate(model, n=None)
        print(f"| {name} | {len(task.vocab)} | {chars_per_token:.2f} | {64 * chars_per_token:.0f} | {steps} | "
              f"{sum(p.numel() for p in model.parameters()):,} | {m['bits_per_char']:.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--part', nargs='+', default=['train', 'encode', 'stream'], choices=['train', 'encode', 'stream', 'formats', 'gpt'])
    ap.add_argument('--seconds', type=float, default=150)
    ap.add_argument('--sizes', type=int, nargs='+', default=[0, 512, 1000, 2000], help='vocabulary sizes; 0: characters')
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    for part in a.part: {'train': train_part, 'encode': encode_part, 'stream': stream_part, 'formats': formats_part, 'gpt': gpt_part}[part](a)
    return 0


if __name__ == '__main__':
    sys.exit(main())
