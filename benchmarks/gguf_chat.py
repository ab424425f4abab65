"""SmolLM2-135M-Instruct from its GGUF file (chapter 17f, issue 48): the course against transformers reading the same file.

Usage: python benchmarks/gguf_chat.py --file SmolLM2-135M-Instruct.Q4_1.gguf [--part load prompts speed quantize] [--max-new 64]

- load: seconds to read the file into a model and tokenizer (course: `load_gguf`; transformers: `from_pretrained(gguf_file=...)`
  and `AutoTokenizer`), and the command's time to its first printed character (`transformer-tutorial chat --message`).
- prompts: the 20 prompts of tests/test_gguf.py through the chat template, greedy, at most --max-new new tokens: each reply,
  its token count, whether it ended with the end token, and whether the course's ids equal transformers' (a Markdown table).
- speed: greedy generation tokens/s of both, batch 1, --max-new tokens past a chat prompt, no end-of-sequence stop, float32,
  the two taking turns for 3 rounds after a warm-up round; the ratio is transformers' tokens/s over the course's.
- quantize: every matrix of the dequantized model stored again as Q8_0, Q4_1 and Q4_0 by the course's quantizer and read
  back: the largest logit change and the mean KL divergence of the next-token distributions over the 20 chat prompts,
  against the file's own weights, and the greedy replies that stay the same.
"""
import argparse, statistics, subprocess, sys, time
from pathlib import Path
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformer_tutorial.gguf import BLOCKS, dequantize, load_gguf, quantize
from transformer_tutorial.llama import _continue
from transformer_tutorial.sampling import generate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'tests'))
from test_gguf import PROMPTS                                                          # noqa: E402


def timed(fn):
    t0 = time.perf_counter(); out = fn(); return time.perf_counter() - t0, out


def chat_ids(m, prompt):
    return m.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}], add_generation_prompt=True, tokenize=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--file', required=True); ap.add_argument('--part', nargs='+', default=['load', 'prompts', 'speed', 'quantize'])
    ap.add_argument('--max-new', type=int, default=64)
    a = ap.parse_args()
    path = Path(a.file)
    t_ours, ours = timed(lambda: load_gguf(path))
    t_theirs, theirs = timed(lambda: AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval())
    t_tok, tok = timed(lambda: AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name))
    print(f"{torch.get_num_threads()} CPU threads, torch {torch.__version__}")
    if 'load' in a.part:
        print(f"load: course {t_ours:.1f} s (model and tokenizer); transformers {t_theirs:.1f} s (model) + {t_tok:.1f} s (tokenizer)")
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, '-m', 'transformer_tutorial.cli', 'chat', '--model', str(path), '--message', PROMPTS[0]],
                             stdout=subprocess.PIPE, text=True)
        first = p.stdout.read(1); t_first = time.perf_counter() - t0
        rest = p.stdout.read(); p.wait(); t_all = time.perf_counter() - t0
        print(f"command: first character after {t_first:.1f} s, the whole reply after {t_all:.1f} s: {(first + rest).strip()!r}")
    if 'prompts' in a.part:
        print("\n| # | prompt | the course's reply | new tokens | ended | equal to transformers |\n|---|---|---|---|---|---|")
        for i, prompt in enumerate(PROMPTS, 1):
            ids = chat_ids(ours, prompt)
            mine = _continue(ours, ids, a.max_new, 0, {})
            with torch.no_grad():
                out = theirs.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), max_new_tokens=a.max_new,
                                      do_sample=False)[0, len(ids):].tolist()
            text = ours.tokenizer.decode(mine, skip_special_tokens=True).replace('\n', ' ').replace('|', '\\|')
            print(f"| {i} | {prompt} | {text[:90] + ('…' if len(text) > 90 else '')} | {len(mine)} | "
                  f"{'yes' if mine and mine[-1] == ours.settings['eos_id'] else 'no'} | {'yes' if mine == out else 'NO'} |")
    if 'speed' in a.part:
        prompt = torch.tensor([chat_ids(ours, PROMPTS[0])])
        run = {'course': lambda: generate(ours.model, prompt, a.max_new, temperature=0.0),
               'transformers': lambda: theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=a.max_new,
                                                       min_new_tokens=a.max_new, do_sample=False, pad_token_id=2)}
        rates = {k: [] for k in run}
        with torch.inference_mode():
            for r in range(4):
                for k, fn in run.items():
                    t, _ = timed(fn)
                    if r: rates[k].append(a.max_new / t)
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"\nspeed, {a.max_new} new tokens: " + ', '.join(f"{k} {med[k]:.1f} tokens/s ({', '.join(f'{x:.1f}' for x in rates[k])})" for k in run)
              + f"; ratio transformers/course {med['transformers'] / med['course']:.2f}")
    if 'quantize' in a.part:
        base = {n: t.clone() for n, t in ours.model.state_dict().items()}
        prompts = [torch.tensor([chat_ids(ours, p)]) for p in PROMPTS]
        with torch.no_grad(): ref = [ours.model(x)[0] for x in prompts]
        replies = [_continue(ours, x[0].tolist(), 32, 0, {}) for x in prompts]
        print("\n| stored again as | largest logit change | mean KL (nats) | greedy replies unchanged (32 tokens) |\n|---|---|---|---|")
        for kind in BLOCKS:
            ours.model.load_state_dict({n: dequantize(quantize(t, kind), kind, t.shape) if t.dim() == 2 and t.size(-1) % 32 == 0 else t
                                        for n, t in base.items()})
            with torch.no_grad(): outs = [ours.model(x)[0] for x in prompts]
            change = max((o - r).abs().max().item() for o, r in zip(outs, ref))
            kl = torch.cat([F.kl_div(o.log_softmax(-1), r.log_softmax(-1), log_target=True, reduction='none').sum(-1) for o, r in zip(outs, ref)]).mean()
            same = sum(_continue(ours, x[0].tolist(), 32, 0, {}) == y for x, y in zip(prompts, replies))
            print(f"| {kind} | {change:.3f} | {kl:.2e} | {same} of {len(prompts)} |")
        ours.model.load_state_dict(base)


if __name__ == '__main__':
    main()
