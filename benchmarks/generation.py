"""Generation speed of the course's model against transformers' `generate` (issue 47), at SmolLM2-135M's full size.

Usage: python benchmarks/generation.py [--device cpu] [--dtype float32] [--new 256] [--prompt 32] [--rounds 3] [--batch 1]

Both models hold the same random weights in SmolLM2-135M's published shapes (30 blocks, width 576, 9 heads, 3 key/value
heads, vocabulary 49152, tied embeddings): transformers' `LlamaForCausalLM` built from the config, the course's `GPT`
from it by `from_llama`. Each round times one greedy generation of each, in turn, with the key/value cache, no end of
sequence (every row runs the full --new tokens), the same prompt; the first round warms up and is not counted. Printed:
each side's median tokens per second, the ratio (transformers' tokens/s over the course's: above 1 means the course is
slower), and how many of the new tokens the two agree on (all of them in float32; in bfloat16 the two sum in different
orders and may part ways once two logits tie at bf16's precision).
"""
import argparse, statistics, time
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformer_tutorial.llama import from_llama
from transformer_tutorial.sampling import generate

SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3, num_hidden_layers=30,
                    vocab_size=49152, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                    bos_token_id=0, eos_token_id=0, hidden_act='silu')      # its published config.json, the keys that shape the model


def timed(fn, device):
    if device.type == 'cuda': torch.cuda.synchronize()
    t0 = time.perf_counter(); out = fn()
    if device.type == 'cuda': torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--device', default='cpu'); ap.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--new', type=int, default=256); ap.add_argument('--prompt', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=3); ap.add_argument('--batch', type=int, default=1)
    a = ap.parse_args()
    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    torch.manual_seed(0)
    theirs = LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M)).eval()
    ours = from_llama(theirs).eval()
    theirs, ours = theirs.to(device, dtype), ours.to(device, dtype)
    prompt = torch.randint(0, SMOLLM2_135M['vocab_size'], (a.batch, a.prompt), generator=torch.Generator().manual_seed(1)).to(device)
    run = {'course': lambda: generate(ours, prompt, a.new, temperature=0.0)[:, a.prompt:],
           'transformers': lambda: theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=a.new,
                                                   min_new_tokens=a.new, do_sample=False, pad_token_id=0)[:, a.prompt:]}
    rates, outs = {k: [] for k in run}, {}
    with torch.inference_mode():
        for r in range(a.rounds + 1):
            for name, fn in run.items():
                t, outs[name] = timed(fn, device)
                if r: rates[name].append(a.batch * a.new / t)
    med = {k: statistics.median(v) for k, v in rates.items()}
    same = (outs['course'] == outs['transformers']).cumprod(1).sum(1).tolist()      # the new tokens equal before the first difference
    name = torch.cuda.get_device_name() if device.type == 'cuda' else f'{torch.get_num_threads()} CPU threads'
    print(f"{name}, torch {torch.__version__}, {a.dtype}, batch {a.batch}, prompt {a.prompt}, {a.new} new tokens, {a.rounds} rounds")
    for k in run: print(f"  {k:13s} {med[k]:8.1f} tokens/s  (rounds: {', '.join(f'{x:.1f}' for x in rates[k])})")
    print(f"  ratio transformers/course {med['transformers'] / med['course']:.2f}; equal new tokens before the first difference: {same} of {a.new}")


if __name__ == '__main__':
    main()
