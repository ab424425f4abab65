"""Memory to load a model folder (issue 47): the course's `from_llama` against transformers' `from_pretrained`.

Usage: python benchmarks/load_memory.py [--dtype float32] [--layers 30]

Writes a folder as the Hub serves SmolLM2-135M (its published shapes, random weights, `save_pretrained`) into a
temporary folder, then loads it in a fresh Python process per loader and prints the peak resident memory that loading
added (Linux's peak resident size, VmHWM, reset once the libraries are imported, less the resident size then),
beside the size of the weights. Loading that holds one copy of the weights adds about 1x their size; building a model with
its own weights and then copying the checkpoint's in adds about 2x.
"""
import argparse, json, subprocess, sys, tempfile
from pathlib import Path

SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                    vocab_size=49152, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                    tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, hidden_act='silu')

LOAD = r"""
import json, sys, torch
from transformers import LlamaForCausalLM
from transformer_tutorial.llama import from_llama
def kib(field): return int(next(l for l in open('/proc/self/status') if l.startswith(field)).split()[1])
open('/proc/self/clear_refs', 'w').write('5')  # the peak (VmHWM) starts again from the present
before = kib('VmRSS')
folder, how = sys.argv[1], sys.argv[2]
model = from_llama(folder) if how == 'course' else LlamaForCausalLM.from_pretrained(folder)
print(json.dumps({'added_mib': (kib('VmHWM') - before) / 1024, 'dtype': str(next(model.parameters()).dtype)}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16'])
    ap.add_argument('--layers', type=int, default=30)
    a = ap.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**SMOLLM2_135M, num_hidden_layers=a.layers)).to(getattr(torch, a.dtype))
        model.save_pretrained(tmp)
        del model
        size = sum(p.stat().st_size for p in Path(tmp).glob('*.safetensors')) / 2 ** 20
        print(f"SmolLM2-135M's shapes, {a.layers} blocks, {a.dtype}: weights {size:.0f} MiB on disk")
        for how in ('course', 'transformers'):
            out = subprocess.run([sys.executable, '-c', LOAD, tmp, how], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {how:13s} loading added {r['added_mib']:6.0f} MiB peak = {r['added_mib'] / size:.2f}x the "
                  f"weights (loaded as {r['dtype']})")


if __name__ == '__main__':
    main()
