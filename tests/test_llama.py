"""Chapter 17c: the Llama block of the course's GPT against transformers' LlamaForCausalLM and Qwen2ForCausalLM.

Small random models built offline from a config, every weight moved off its initialization so that a swapped tensor
cannot hide: logits (float32, and float64 with transformers' two float32 steps widened), greedy tokens against
generate(do_sample=False) with and without the cache, the round trips through folders, RoPE's two layouts, and what is
refused by name.
"""
import json, shutil, types
import pytest
import torch

from transformer_tutorial.gpt import GPT, GPTConfig, gpt_parameter_count, gpt_flops_per_token
from transformer_tutorial.llama import FAMILIES, LLAMA_BLOCK, llama_config, load_llama_state, from_llama, from_mistral, from_qwen2, _llama_names
from transformer_tutorial.llama_families import to_llama, to_mistral, to_qwen2, from_qwen3, from_phi3, from_olmo2, from_mixtral, from_qwen3_moe, to_qwen3, to_phi3, to_olmo2, to_mixtral, to_qwen3_moe
from transformer_tutorial.sampling import generate, gpt_decode_step
from transformer_tutorial.decoding import KVCache
from transformer_tutorial.training import record_attention
from transformer_tutorial.model_files import ModelFileError

transformers = pytest.importorskip('transformers')  # a test dependency (settings.ini dev_requirements), never a runtime one
from transformers import GemmaConfig, GemmaForCausalLM, Gemma2Config, Gemma2ForCausalLM, Gemma3TextConfig, Gemma3ForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM, Phi3Config, Phi3ForCausalLM, Olmo2Config, Olmo2ForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

SIZES = [  # family, width, heads, key/value heads, blocks, feed-forward, theta, eps, tied, extra config
    ('llama', 48, 6, 2, 3, 80, 5000.0, 1e-5, False, {}),
    ('llama', 64, 8, 1, 2, 96, 500000.0, 3e-6, True, {}),                            # multi-query, tied, Llama 3's base
    ('llama', 32, 4, 4, 2, 56, 10000.0, 1e-5, False, dict(attention_bias=True, mlp_bias=True)),  # every bias
    ('qwen2', 48, 6, 3, 2, 72, 1e6, 1e-6, True, {}),
    ('qwen2', 40, 4, 2, 3, 64, 7000.0, 2e-5, False, {}),
]


def random_hf(family, d, H, H_kv, N, f, theta, eps, tied, extra, seed=0, dtype=torch.float32, V=97, T=64):
    "A transformers LlamaForCausalLM or Qwen2ForCausalLM of that size with every weight moved off its initialization."
    Config, Model = (LlamaConfig, LlamaForCausalLM) if family == 'llama' else (Qwen2Config, Qwen2ForCausalLM)
    torch.manual_seed(seed)
    config = Config(vocab_size=V, hidden_size=d, intermediate_size=f, num_hidden_layers=N, num_attention_heads=H, num_key_value_heads=H_kv,
                    max_position_embeddings=T, rms_norm_eps=eps, rope_theta=theta, tie_word_embeddings=tied, bos_token_id=None,
                    eos_token_id=None, pad_token_id=None, **extra)
    model = Model(config).eval().to(dtype)
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.1 * torch.randn_like(p))
    return model


def float64_internals(model, theta):
    "transformers computes its RMSNorm's mean square and its rotary angles in float32 whatever the dtype: here in the model's dtype."
    norm_type, rotary = type(model.model.norm), model.model.rotary_emb
    def norm_forward(self, x): return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))
    for m in model.modules():
        if type(m) is norm_type: m.forward = types.MethodType(norm_forward, m)
    dim = 2 * rotary.inv_freq.numel()
    inv_freq = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    def rotary_forward(self, x, position_ids):
        angles = position_ids[..., None].to(x.dtype) * inv_freq.to(x.dtype)
        emb = torch.cat([angles, angles], -1)
        return emb.cos(), emb.sin()
    rotary.forward = types.MethodType(rotary_forward, rotary)
    return model


LOAD = {'llama': from_llama, 'qwen2': from_qwen2, 'mistral': from_mistral, 'qwen3': from_qwen3, 'phi3': from_phi3, 'olmo2': from_olmo2, 'mixtral': from_mixtral, 'qwen3_moe': from_qwen3_moe}
WRITE = {'llama': to_llama, 'qwen2': to_qwen2, 'mistral': to_mistral, 'qwen3': to_qwen3, 'phi3': to_phi3, 'olmo2': to_olmo2, 'mixtral': to_mixtral, 'qwen3_moe': to_qwen3_moe}
MODEL = {'llama': LlamaForCausalLM, 'qwen2': Qwen2ForCausalLM, 'mistral': MistralForCausalLM, 'qwen3': Qwen3ForCausalLM, 'phi3': Phi3ForCausalLM, 'olmo2': Olmo2ForCausalLM, 'mixtral': MixtralForCausalLM, 'qwen3_moe': Qwen3MoeForCausalLM, 'gemma': GemmaForCausalLM, 'gemma2': Gemma2ForCausalLM, 'gemma3_text': Gemma3ForCausalLM}
CONFIG = {'llama': LlamaConfig, 'qwen2': Qwen2Config, 'mistral': MistralConfig, 'qwen3': Qwen3Config, 'phi3': Phi3Config, 'olmo2': Olmo2Config, 'mixtral': MixtralConfig, 'qwen3_moe': Qwen3MoeConfig, 'gemma': GemmaConfig, 'gemma2': Gemma2Config, 'gemma3_text': Gemma3TextConfig}
IDX = torch.randint(0, 97, (3, 64), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize('size', SIZES, ids=lambda s: f'{s[0]}-{s[1]}-{s[2]}h-{s[3]}kv')
def test_logits_equal_transformers_in_float32(size):
    theirs = random_hf(*size, seed=SIZES.index(size))
    ours = LOAD[size[0]](theirs)
    c = ours.config
    assert (c.num_kv_heads, c.rope_base, c.layer_norm_eps, c.tie_embeddings) == (size[3], size[6], size[7], size[8]) and not ours.training
    assert (ours.head.weight is ours.embed.weight) == size[8]
    with torch.no_grad(): diff = (ours(IDX) - theirs(IDX).logits).abs().max().item()
    assert diff < 1e-5, diff


@pytest.mark.parametrize('size', SIZES, ids=lambda s: f'{s[0]}-{s[1]}-{s[2]}h-{s[3]}kv')
def test_logits_equal_transformers_in_float64(size):
    "To float64 rounding once transformers' float32 norm and angles are widened; only to float32 rounding as transformers stands."
    theirs = random_hf(*size, seed=SIZES.index(size), dtype=torch.float64)
    ours = LOAD[size[0]](theirs)
    assert next(ours.parameters()).dtype == torch.float64
    with torch.no_grad(): as_is = (ours(IDX) - theirs(IDX).logits).abs().max().item()
    float64_internals(theirs, size[6])
    with torch.no_grad(): widened = (ours(IDX) - theirs(IDX).logits).abs().max().item()
    assert widened < 1e-10 and as_is < 1e-5, (widened, as_is)


@pytest.mark.parametrize('size', [SIZES[0], SIZES[1], SIZES[3]], ids=['llama-gqa', 'llama-mqa-tied', 'qwen2'])
def test_greedy_tokens_equal_generate_with_and_without_the_cache(size):
    theirs = random_hf(*size, seed=7)
    ours = LOAD[size[0]](theirs)
    prompt = torch.randint(0, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    expected = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=45, do_sample=False)
    assert expected.shape == (2, 55)
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 45, temperature=0, use_cache=use_cache), expected)


def test_the_cache_equals_the_forward_pass_with_rope_and_grouped_query_attention():
    torch.manual_seed(0)
    model = GPT(50, 40, 48, 6, 2, 64, num_kv_heads=2, rope_base=300.0, **LLAMA_BLOCK).eval()
    seq = torch.randint(0, 50, (3, 40))
    cache = KVCache(model, None, 40, batch_size=3)
    assert cache.keys.shape == (2, 3, 2, 40, 8)                                    # two key/value heads cached, not six
    with torch.no_grad():
        steps = [gpt_decode_step(model, seq[:, :7], cache)] + [gpt_decode_step(model, seq[:, t:t + 1], cache) for t in range(7, 40)]
        torch.testing.assert_close(torch.cat(steps, 1), model(seq), atol=1e-5, rtol=1e-5)
    a = generate(model, seq[:, :4], 30, temperature=0.9, top_k=10, generator=3)
    assert torch.equal(a, generate(model, seq[:, :4], 30, temperature=0.9, top_k=10, generator=3, use_cache=False))


@pytest.mark.parametrize('family', ['llama', 'qwen2'])
def test_from_a_state_dict_and_from_a_folder_without_pickle(family, tmp_path):
    size = SIZES[0] if family == 'llama' else SIZES[3]
    theirs = random_hf(*size, seed=4)
    with torch.no_grad(): want = theirs(IDX).logits
    theirs.save_pretrained(tmp_path)                                                # config.json and model.safetensors
    assert (tmp_path / 'model.safetensors').is_file() and not list(tmp_path.glob('*.bin'))
    for ours in (LOAD[family](theirs.state_dict(), config=theirs.config), LOAD[family](theirs.state_dict(), config=theirs.config.to_dict()),
                 LOAD[family](str(tmp_path))):
        with torch.no_grad(): torch.testing.assert_close(ours(IDX), want, atol=1e-5, rtol=0)
    (tmp_path / 'model.safetensors').write_bytes(b'\x80\x04not safetensors')      # a pickle under the safetensors name
    with pytest.raises(ValueError, match='is a pickle'): LOAD[family](str(tmp_path))
    (tmp_path / 'model.safetensors').unlink()
    with pytest.raises(FileNotFoundError, match='has neither model.safetensors nor model.safetensors.index.json with its shards: pickle-based weights are never read here'): LOAD[family](str(tmp_path))
    (tmp_path / 'pytorch_model.bin').write_bytes(b'\x80\x04not read')                  # an older folder's pickle: named, never read
    with pytest.raises(FileNotFoundError, match=r'holds pytorch_model.bin but has neither model.safetensors .* save them as safetensors once'):
        LOAD[family](str(tmp_path))
    config = json.loads((tmp_path / 'config.json').read_text())                   # a quantized folder (AWQ) names its method
    (tmp_path / 'config.json').write_text(json.dumps({**config, 'quantization_config': {'quant_method': 'awq', 'bits': 4}}))
    with pytest.raises(ValueError, match=r"config.json: quantization_config \(quant_method 'awq'\): the weights are quantized"):
        LOAD[family](str(tmp_path))


@pytest.mark.parametrize('family,block', [('llama', {}), ('llama', dict(qkv_bias=True, out_bias=True, ff_bias=True, tie_embeddings=True)),
                                          ('qwen2', dict(qkv_bias=True)), ('qwen2', dict(qkv_bias=True, tie_embeddings=True))])
def test_a_folder_written_by_the_course_loads_in_transformers_with_equal_logits(family, block, tmp_path):
    torch.manual_seed(3)
    ours = GPT(97, 64, 48, 6, 2, 80, num_kv_heads=3, rope_base=2000.0, layer_norm_eps=4e-6, **{**LLAMA_BLOCK, **block}).eval()
    with torch.no_grad():
        for p in ours.parameters(): p.add_(0.1 * torch.randn_like(p))
    WRITE[family](ours, tmp_path)
    config = json.loads((tmp_path / 'config.json').read_text())
    assert config['model_type'] == family and config['num_key_value_heads'] == 3 and config['rope_theta'] == 2000.0
    theirs = MODEL[family].from_pretrained(tmp_path).eval()
    assert type(theirs) is MODEL[family] and theirs.config.rms_norm_eps == 4e-6
    with torch.no_grad():
        assert (theirs(IDX).logits - ours(IDX)).abs().max() < 1e-5
        assert torch.equal(LOAD[family](str(tmp_path))(IDX), ours(IDX))         # and back, exactly
    assert not list(tmp_path.glob('*.tmp*'))


def test_rows_of_each_head_are_reordered_from_halves_to_adjacent_pairs():
    "q_proj and k_proj (and their biases) are read with each head's rows reordered; v_proj, o_proj and the rest are not."
    theirs = random_hf(*SIZES[3], seed=5)
    ours = from_qwen2(theirs)
    q_hf, q = theirs.model.layers[0].self_attn.q_proj, ours.layers[0].self_attn.w_q
    head = lambda t, h: t[h * 8:(h + 1) * 8]
    for h in range(6):
        assert torch.equal(head(q.weight, h)[0::2], head(q_hf.weight, h)[:4]) and torch.equal(head(q.weight, h)[1::2], head(q_hf.weight, h)[4:])
        assert torch.equal(head(q.bias, h)[1::2], head(q_hf.bias, h)[4:])
    assert torch.equal(ours.layers[0].self_attn.w_v.weight, theirs.model.layers[0].self_attn.v_proj.weight)


def test_llama_config_reads_both_spellings_of_rope_and_refuses_what_it_cannot_compute():
    base = dict(model_type='llama', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=1, num_attention_heads=6,
                max_position_embeddings=64)
    assert llama_config({**base, 'rope_theta': 123.0}).rope_base == 123.0
    assert llama_config({**base, 'rope_parameters': {'rope_type': 'default', 'rope_theta': 456.0}}).rope_base == 456.0
    assert llama_config({**base, 'rope_scaling': None}).rope_base == 10000.0 and llama_config(base).num_kv_heads == 6
    assert llama_config({**base, 'rope_scaling': {'type': 'linear', 'factor': 2.0}}).rope_scaling == {'rope_type': 'linear', 'factor': 2.0}
    yarn = llama_config({**base, 'rope_parameters': {'rope_type': 'yarn', 'rope_theta': 1e4, 'original_max_position_embeddings': 16}}).rope_scaling
    assert yarn == {'rope_type': 'yarn', 'original_max_position_embeddings': 16, 'factor': 4.0}          # factor: 64 / 16, as transformers fills it
    assert llama_config({**base, 'original_max_position_embeddings': 32, 'rope_scaling': {'rope_type': 'yarn', 'factor': 2.0,
                         'original_max_position_embeddings': 16}}).rope_scaling['original_max_position_embeddings'] == 32   # the config's own key wins
    dynamic = llama_config({**base, 'rope_scaling': {'type': 'dynamic', 'factor': 2.0}})
    assert dynamic.rope_scaling == {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 64} and dynamic.max_len == 128
    cases = [({'rope_parameters': {'rope_type': 'proportional', 'rope_theta': 1e4}}, "RoPE scaling of type 'proportional' is not implemented; the course computes 'linear', 'llama3', 'yarn', 'dynamic', 'longrope'"),
             ({'rope_parameters': {'rope_type': 'longrope', 'rope_theta': 1e4}}, r"RoPE scaling 'longrope' needs the number\(s\) \['short_factor', 'long_factor'\]"),
             ({'rope_scaling': {'rope_type': 'llama3', 'factor': 8.0}}, r"RoPE scaling 'llama3' needs the number\(s\) \['low_freq_factor', 'high_freq_factor'\]"),
             ({'rope_scaling': {'type': 'linear'}}, r"RoPE scaling 'linear' needs the number\(s\) \['factor'\]"),
             ({'rope_scaling': {'type': 'linear', 'factor': -2.0}}, "RoPE scaling factor must be positive, got -2.0"),
             ({'rope_scaling': {'type': 'linear', 'factor': 2.0, 'partial_rotary_factor': 0.5}}, "partial_rotary_factor=0.5: the course rotates every feature pair"),
             ({'hidden_act': 'gelu'}, "hidden_act='gelu': Llama's SwiGLU gates with SiLU"),
             ({'pretraining_tp': 2}, "pretraining_tp=2"),
             ({'model_type': 'mistral'}, "describes a 'mistral' model; from_llama reads Llama"),
             ({'model_type': 'qwen2'}, "describes a 'qwen2' model; from_llama reads Llama .*; from_qwen2 reads that one"),
             ({'num_attention_heads': 5}, r"hidden_size=48 is not a multiple of num_attention_heads=5, and the config gives no head_dim"),
             ({'num_key_value_heads': 4}, r"num_kv_heads \(4\) must divide num_heads \(6\)"),
             ({'hidden_size': 30}, "RoPE rotates pairs of features, so d_head must be even, got 5")]
    for change, message in cases:
        with pytest.raises(ValueError, match=message): GPT.from_config(llama_config({**base, **change}))
    with pytest.raises(ValueError, match="lacks hidden_size"): llama_config({k: v for k, v in base.items() if k != 'hidden_size'})
    assert llama_config({**base, 'head_dim': 16}).head_dim == 16 and llama_config({**base, 'head_dim': 8}).head_dim is None   # 8: the even split
    qwen = {**base, 'model_type': 'qwen2'}
    assert llama_config({**qwen, 'use_sliding_window': True, 'max_window_layers': 0, 'sliding_window': 16}, 'qwen2').sliding_window == 16
    assert llama_config({**qwen, 'layer_types': ['sliding_attention'], 'sliding_window': 16}, 'qwen2').sliding_layers is None   # every layer
    c = llama_config({**qwen, 'use_sliding_window': False, 'sliding_window': 4096}, 'qwen2')   # a window that is not used
    assert (c.qkv_bias, c.out_bias, c.ff_bias) == (True, False, False)


def test_missing_or_misshapen_tensors_are_named_with_the_expected_shape():
    theirs = random_hf(*SIZES[0])
    state, cfg = theirs.state_dict(), theirs.config.to_dict()
    with pytest.raises(ValueError, match=r"lacks 'model.layers.2.mlp.up_proj.weight' \(expected shape \(80, 48\)\)"):
        from_llama({k: v for k, v in state.items() if k != 'model.layers.2.mlp.up_proj.weight'}, config=cfg)
    with pytest.raises(ValueError, match=r"'model.layers.0.self_attn.k_proj.weight' has shape \(48, 48\), expected \(16, 48\)"):
        from_llama({**state, 'model.layers.0.self_attn.k_proj.weight': torch.zeros(48, 48)}, config=cfg)
    with pytest.raises(ValueError, match=r"lacks 'lm_head.weight'"):
        from_llama({k: v for k, v in state.items() if k != 'lm_head.weight'}, config=cfg)       # untied: the head is needed
    with pytest.raises(ValueError, match="does not say how many heads.*pass config="): from_llama(state)


def test_to_llama_and_to_qwen2_refuse_a_block_they_cannot_hold(tmp_path):
    cases = [(to_llama, {}, "norm='layer': Llama's block has norm='rms'"),
             (to_llama, dict(LLAMA_BLOCK, positions='learned'), "positions='learned': Llama's block has positions='rope'"),
             (to_llama, dict(LLAMA_BLOCK, qkv_bias=True), "out_bias=False: Llama's block has out_bias=True .one attention_bias"),
             (to_qwen2, LLAMA_BLOCK, "qkv_bias=False: Qwen2's block has qkv_bias=True"),
             (to_qwen2, dict(LLAMA_BLOCK, qkv_bias=True, ff_bias=True), "ff_bias=True: Qwen2's block has ff_bias=False")]
    for write, block, message in cases:
        with pytest.raises(ValueError, match=message): write(GPT(20, 16, 16, 2, 1, 24, **block), tmp_path / 'out')
    assert not (tmp_path / 'out').exists()
    (tmp_path / 'file').write_text('x')
    with pytest.raises(NotADirectoryError, match='is a file'): to_llama(GPT(20, 16, 16, 2, 1, 24, **LLAMA_BLOCK), tmp_path / 'file')


def test_the_block_options_are_counted_for_parameters_and_flops():
    "gpt_parameter_count and gpt_flops_per_token against PyTorch's count and FlopCounterMode, for every block option."
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    for block in ({}, dict(norm='rms'), dict(qkv_bias=False), dict(out_bias=False), dict(ff_bias=False), dict(activation='swiglu'),
                  dict(activation='swiglu', ff_bias=True), dict(positions='rope'), dict(num_kv_heads=2), dict(num_kv_heads=1, positions='sinusoidal'),
                  dict(tie_embeddings=False), {**LLAMA_BLOCK, 'num_kv_heads': 2}):
        cfg = GPTConfig(61, 24, 32, 4, 2, 40, **block)
        model = GPT.from_config(cfg).eval()
        assert gpt_parameter_count(cfg) == sum(p.numel() for p in model.parameters()), block
        with record_attention(model), FlopCounterMode(display=False) as counter: model(torch.zeros(1, 24, dtype=torch.long))
        assert counter.get_total_flops() == 24 * gpt_flops_per_token(cfg), block


def test_the_gpt_refuses_bad_blocks_by_name():
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by num_heads \(4\)"): GPT(10, 16, 30, 4, 1, 32)
    with pytest.raises(ValueError, match=r"num_kv_heads \(3\) must divide num_heads \(4\)"): GPT(10, 16, 32, 4, 1, 32, num_kv_heads=3)
    with pytest.raises(ValueError, match="d_head must be even, got 5"): GPT(10, 16, 20, 4, 1, 32, positions='rope')
    with pytest.raises(ValueError, match="norm must be one of layer, rms, rms_unit_offset, got 'batch'"): GPT(10, norm='batch')
    with pytest.raises(ValueError, match="activation must be one of relu, gelu, gelu_tanh, silu, swiglu, geglu, got 'reglu'"): GPT(10, activation='reglu')
    with pytest.raises(ValueError, match="the RoPE base must be a positive number, got 0.0"): GPT(10, 16, 32, 4, 1, 32, positions='rope', rope_base=0.0)
    model = GPT(10, 16, 32, 4, 1, 32, **LLAMA_BLOCK)
    with pytest.raises(ValueError, match=r"the prompt has 17 tokens, more than the model reads \(max_len=16\)"):
        generate(model, torch.zeros(1, 17, dtype=torch.long), 3)


# Published configurations, written out by hand from their config.json (the Hub is not reached from the tests).
SMOLLM2_135M = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 0,
                "hidden_act": "silu", "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
                "is_llama_config": True, "max_position_embeddings": 8192, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 9,
                "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": False,
                "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
                "transformers_version": "4.42.3", "use_cache": True, "vocab_size": 49152}
QWEN25_05B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
              "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
              "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
              "transformers_version": "4.40.1", "use_cache": True, "use_mrope": False, "use_sliding_window": False, "vocab_size": 151936}
LLAMA32_1B = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
              "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
              "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
              "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
              "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
                               "rope_type": "llama3"},
              "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
              "use_cache": True, "vocab_size": 128256}

DEEPSEEK_CODER_13B = {"architectures": ["LlamaForCausalLM"], "bos_token_id": 32013, "eos_token_id": 32014, "hidden_act": "silu", "hidden_size": 2048,
                      "initializer_range": 0.02, "intermediate_size": 5504, "max_position_embeddings": 16384, "model_type": "llama",
                      "num_attention_heads": 16, "num_hidden_layers": 24, "num_key_value_heads": 16, "pretraining_tp": 1, "rms_norm_eps": 1e-06,
                      "rope_scaling": {"factor": 4.0, "type": "linear"}, "rope_theta": 100000, "tie_word_embeddings": False,
                      "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": True, "vocab_size": 32256}
QWEN3_06B = {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
             "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
             "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
             "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
             "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
             "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}   # head_dim 128 with 16 heads: queries 2048 wide, the width 1024
PHI3_MINI = {"architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000,
             "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
             "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
             "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
             "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064}   # Phi-3-mini-4k-instruct: fused projections, a window of 2047
OLMO2_7B = {"architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257, "hidden_act": "silu",
            "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "olmo2",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06,
            "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
            "vocab_size": 100352}   # OLMo-2-1124-7B: each sublayer's output normed, q/k norms over all heads
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
                "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
                "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
                "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000}   # Mixtral-8x7B-v0.1
QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
                 "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
                 "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
                 "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
                 "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
                 "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                 "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}   # Qwen3-30B-A3B: 128 experts of width 768, 8 per token
QWEN25_05B_YARN = {**QWEN25_05B, "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}}  # the block Qwen2.5's model cards give for long texts


def test_published_configs_give_the_published_parameter_counts_and_llama_3_2s_scaled_rope():
    smol, qwen = llama_config(SMOLLM2_135M), llama_config(QWEN25_05B, 'qwen2')
    assert (smol.d_model, smol.num_heads, smol.num_kv_heads, smol.d_ff, smol.num_layers, smol.max_len) == (576, 9, 3, 1536, 30, 8192)
    assert (smol.rope_base, smol.layer_norm_eps, smol.tie_embeddings, smol.qkv_bias, smol.out_bias, smol.ff_bias) == (1e5, 1e-5, True, False, False, False)
    assert (qwen.rope_base, qwen.layer_norm_eps, qwen.num_kv_heads, qwen.qkv_bias, qwen.out_bias, qwen.ff_bias) == (1e6, 1e-6, 2, True, False, False)
    assert gpt_parameter_count(smol) == 134_515_008 and gpt_parameter_count(qwen) == 494_032_768   # the published sizes
    llama = llama_config(LLAMA32_1B)
    assert gpt_parameter_count(llama) == 1_235_814_400 and llama.rope_scaling == {**LLAMA32_1B['rope_scaling']}   # the 1B of its name


@pytest.mark.parametrize('name,hf,shrink', [('SmolLM2-135M', SMOLLM2_135M, dict(num_hidden_layers=2)),
                                            ('Qwen2.5-0.5B', QWEN25_05B, dict(num_hidden_layers=2, max_window_layers=2, vocab_size=1000)),
                                            ('Llama-3.2-1B', LLAMA32_1B, dict(num_hidden_layers=2, vocab_size=1000)),   # llama3 scaling
                                            ('deepseek-coder-1.3b', DEEPSEEK_CODER_13B, dict(num_hidden_layers=2, vocab_size=1000)),  # linear
                                            ('Qwen2.5-0.5B with YaRN', QWEN25_05B_YARN, dict(num_hidden_layers=2, max_window_layers=2, vocab_size=1000)),
                                            ('Qwen3-0.6B', QWEN3_06B, dict(num_hidden_layers=2, max_window_layers=2, vocab_size=1000)),   # q/k norms, head_dim 128
                                            ('Qwen3-0.6B, heads shrunk', QWEN3_06B, dict(num_hidden_layers=2, vocab_size=1000, hidden_size=96, head_dim=32,
                                                                                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=160)),
                                            ('Phi-3-mini-4k, heads shrunk', PHI3_MINI, dict(num_hidden_layers=2, vocab_size=1000, pad_token_id=None, hidden_size=96,
                                                                                            num_attention_heads=4, num_key_value_heads=4, intermediate_size=160)),
                                            ('OLMo-2-7B, heads shrunk', OLMO2_7B, dict(num_hidden_layers=2, vocab_size=1000, pad_token_id=None, hidden_size=96,
                                                                                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=160)),
                                            ('Mixtral-8x7B, shrunk', MIXTRAL_8X7B, dict(num_hidden_layers=2, vocab_size=1000, hidden_size=96, num_attention_heads=4,
                                                                                      num_key_value_heads=2, intermediate_size=160)),
                                            ('Qwen3-30B-A3B, shrunk', QWEN3_30B_A3B, dict(num_hidden_layers=2, vocab_size=1000, hidden_size=96, head_dim=32, num_experts=16,
                                                                                          num_attention_heads=4, num_key_value_heads=2, moe_intermediate_size=48))])
def test_published_configs_at_two_blocks_equal_transformers_with_and_without_the_cache(name, hf, shrink, tmp_path):
    "The published width, heads, key/value heads, RoPE base and epsilon; two blocks (and for Qwen2.5 a smaller vocabulary) to stay quick."
    family = hf['model_type']
    torch.manual_seed(0)
    theirs = MODEL[family](CONFIG[family](**{**hf, **shrink, 'torch_dtype': 'float32'})).float().eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.05 * torch.randn_like(p))
    (tmp_path / 'config.json').write_text(json.dumps({**hf, **shrink}))                        # the published file, two blocks
    ours = LOAD[family](theirs.state_dict(), config=json.loads((tmp_path / 'config.json').read_text()))
    assert ours.config.num_layers == 2 and ours.config.rope_base == hf['rope_theta']
    idx = torch.randint(0, ours.config.vocab_size, (2, 48), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(): assert (ours(idx) - theirs(idx).logits).abs().max() < 1e-4
    if hf.get('rope_scaling'):                                       # the scaling matters here: without it the logits differ
        plain = GPT.from_config({**ours.config.to_dict(), 'rope_scaling': None}).eval()
        plain.load_state_dict(ours.state_dict())
        with torch.no_grad(): assert (plain(idx) - theirs(idx).logits).abs().max() > 1e-3
    prompt = idx[:, :8]
    expected = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, do_sample=False, eos_token_id=None, pad_token_id=0)
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 16, temperature=0, use_cache=use_cache), expected), use_cache


@pytest.mark.parametrize('layers, use, window, first', [(2, True, 4096, 2), (2, True, 4096, 5), (2, True, None, 0), (2, False, 4096, 0),
                                                         (4, True, 4096, 2), (3, True, 4096, 0), (2, True, 'absent', 1), (2, True, 4096, 'absent')])
def test_the_layers_that_slide_are_those_transformers_slides(layers, use, window, first):
    "transformers' Qwen2Config decides which layers slide (use_sliding_window, sliding_window not null, i >= max_window_layers) and how far they read: the GPT's windows are those."
    hf = dict(model_type='qwen2', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=layers, num_attention_heads=6,
              max_position_embeddings=64, use_sliding_window=use)
    if window != 'absent': hf['sliding_window'] = window
    if first != 'absent': hf['max_window_layers'] = first
    theirs = Qwen2Config(**hf)
    want = [theirs.sliding_window if t == 'sliding_attention' else None for t in theirs.layer_types]
    assert GPT.from_config(llama_config(hf, 'qwen2')).windows == want


WINDOWED = [('mistral', MistralConfig, MistralForCausalLM, dict(sliding_window=8)),
            ('qwen2', Qwen2Config, Qwen2ForCausalLM, dict(use_sliding_window=True, sliding_window=8, max_window_layers=1))]


@pytest.mark.parametrize('family, Config, Model, window', WINDOWED, ids=['mistral', 'qwen2-last-two-layers'])
def test_sliding_windows_equal_transformers_past_the_window_with_the_cache_and_back(family, Config, Model, window, tmp_path):
    "A window of 8 positions, texts of 40: the logits, greedy tokens with and without the cache (30 tokens past the window), and the folder written back."
    torch.manual_seed(0)
    theirs = Model(Config(vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
                          max_position_embeddings=128, **window)).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.2 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / 'hub')
    ours = LOAD[family](tmp_path / 'hub')
    assert ours.windows == ([8, 8, 8] if family == 'mistral' else [None, 8, 8])
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs(idx).logits
        assert (ours(idx) - expected).abs().max() < 1e-4
        whole = GPT.from_config({**ours.config.to_dict(), 'sliding_window': None, 'sliding_layers': None}).eval()
        whole.load_state_dict(ours.state_dict())
        assert (whole(idx) - expected).abs().max() > 1e-3                        # the window is what makes them equal
    prompt = idx[:, :12]
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False, eos_token_id=None, pad_token_id=0)
    for use_cache in (True, False): assert torch.equal(generate(ours, prompt, 30, temperature=0, use_cache=use_cache), want), use_cache
    WRITE[family](ours, tmp_path / 'back')
    back = Model.from_pretrained(tmp_path / 'back').eval()
    with torch.no_grad(): assert (back(idx).logits - expected).abs().max() < 1e-5


def test_windows_a_family_cannot_hold_are_refused_by_name(tmp_path):
    base = dict(model_type='llama', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6, max_position_embeddings=64)
    with pytest.raises(ValueError, match="Llama's block reads the whole context: a windowed model is a Mistral"):
        llama_config({**base, 'layer_types': ['full_attention', 'sliding_attention', 'full_attention'], 'sliding_window': 4})
    with pytest.raises(ValueError, match="sliding_window=0: the window must be a positive number"):
        llama_config({**base, 'model_type': 'mistral', 'sliding_window': 0}, 'mistral')
    assert llama_config({**base, 'model_type': 'mistral', 'sliding_window': None}, 'mistral').sliding_window is None   # Mistral v0.2 on
    assert llama_config({**base, 'model_type': 'mistral'}, 'mistral').sliding_window == 4096                          # MistralConfig's default
    block = dict(LLAMA_BLOCK, num_kv_heads=2)
    cases = [(to_llama, dict(sliding_window=4), "Llama's block reads the whole context; write this GPT as Mistral"),
             (to_mistral, dict(sliding_window=4, sliding_layers=[2]), "Mistral slides every layer or none"),
             (to_qwen2, dict(sliding_window=4, sliding_layers=[0, 2], qkv_bias=True), "Qwen2 slides the layers from max_window_layers on")]
    for write, options, message in cases:
        with pytest.raises(ValueError, match=message): write(GPT(97, 64, 48, 6, 3, 80, **{**block, **options}), tmp_path / 'never')
    for options, message in ((dict(sliding_window=0), 'sliding_window must be a positive integer'),
                             (dict(sliding_layers=[1]), 'sliding_layers names blocks to slide, but sliding_window is None'),
                             (dict(sliding_window=4, sliding_layers=[3]), r'sliding_layers must be block indices 0 to 2, got 3')):
        with pytest.raises(ValueError, match=message): GPT(97, 64, 48, 6, 3, 80, **options)


def test_config_values_of_the_wrong_type_are_refused_by_field():
    base = dict(model_type='llama', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=1, num_attention_heads=6,
                max_position_embeddings=64)
    cases = [('num_attention_heads', 0, "num_attention_heads=0 in the Llama config: it must be a positive integer"),
             ('hidden_size', 48.0, "hidden_size=48.0 in the Llama config: it must be a positive integer"),
             ('vocab_size', True, "vocab_size=True in the Llama config: it must be a positive integer"),
             ('num_hidden_layers', '2', "num_hidden_layers='2' in the Llama config: it must be a positive integer"),
             ('num_key_value_heads', -2, "num_key_value_heads=-2 in the Llama config: it must be a positive integer"),
             ('rms_norm_eps', None, r"rms_norm_eps=None in the Llama config: it must be a positive number"),
             ('rms_norm_eps', 0, r"rms_norm_eps=0 in the Llama config: it must be a positive number"),
             ('rope_theta', '1e4', r"rope_theta='1e4': RoPE's base must be a positive number"),
             ('tie_word_embeddings', 'false', "tie_word_embeddings='false' in the Llama config: it must be a JSON boolean, true or false"),
             ('attention_bias', 1, "attention_bias=1 in the Llama config: it must be a JSON boolean"),
             ('mlp_bias', None, "mlp_bias=None in the Llama config: it must be a JSON boolean")]
    for field, value, message in cases:
        with pytest.raises(ValueError, match=message): llama_config({**base, field: value})
    assert llama_config({**base, 'num_key_value_heads': None}).num_kv_heads == 6 and llama_config({**base, 'rms_norm_eps': 1}).layer_norm_eps == 1
    for params, scaling in ((None, {'rope_type': 'linear', 'factor': 2.0}), ({'rope_type': 'linear', 'factor': 3.0, 'rope_theta': 7.0}, None),
                            ({'rope_type': 'default', 'rope_theta': 1e4}, {'rope_type': 'linear', 'factor': 2.0}),       # rope_scaling replaces the other
                            ({'rope_type': 'linear', 'factor': 3.0, 'rope_theta': 7.0}, {'rope_type': 'default'})):
        both = {**base, 'rope_theta': 5.0, 'rope_parameters': params, 'rope_scaling': scaling}
        theirs = LlamaConfig(**{k: v for k, v in both.items() if k != 'model_type'}).rope_parameters
        c = llama_config(both)
        assert (c.rope_base, c.rope_scaling) == (theirs['rope_theta'], None if theirs['rope_type'] == 'default' else
                                                 {k: v for k, v in theirs.items() if k not in ('rope_theta', 'type')}), (both, theirs)


def test_tensors_the_config_has_no_place_for_are_refused_and_a_tied_head_is_checked():
    theirs = random_hf(*SIZES[1])                                          # tied: its state_dict() holds lm_head.weight, the embedding
    state, cfg = theirs.state_dict(), theirs.config.to_dict()
    assert 'lm_head.weight' in state and torch.equal(from_llama(state, config=cfg).head.weight, state['model.embed_tokens.weight'])
    with pytest.raises(ValueError, match=r"holds 9 tensor\(s\) the config has no place for, the first 'model.layers.1.self_attn.q_proj.weight'"):
        from_llama(state, config={**cfg, 'num_hidden_layers': 1})
    with pytest.raises(ValueError, match="lm_head.weight differs from model.embed_tokens.weight"):
        from_llama({**state, 'lm_head.weight': state['lm_head.weight'] + 1}, config=cfg)
    old = {**state, 'model.layers.0.self_attn.rotary_emb.inv_freq': torch.ones(4)}   # a buffer older checkpoints hold
    assert from_llama(old, config=cfg).config.num_layers == 2
    untied = random_hf(*SIZES[0])
    with pytest.raises(ValueError, match="the first 'model.extra.weight'"):
        from_llama({**untied.state_dict(), 'model.extra.weight': torch.zeros(1)}, config=untied.config.to_dict())


SCALINGS = [('llama', {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0, 'original_max_position_embeddings': 64}),
            ('llama', {'type': 'linear', 'factor': 4.0}),
            ('qwen2', {'type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32}),
            ('qwen2', {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32, 'beta_fast': 16, 'mscale': 1.2, 'mscale_all_dim': 0.8}),
            ('llama', {'rope_type': 'yarn', 'factor': 2.0, 'original_max_position_embeddings': 48, 'attention_factor': 1.3, 'truncate': False})]


@pytest.mark.parametrize('family, scaling', SCALINGS, ids=lambda v: v if isinstance(v, str) else '-'.join(f'{k}={x}' for k, x in v.items() if k != 'original_max_position_embeddings'))
def test_scaled_rope_equals_transformers_from_a_folder_and_back(family, scaling, tmp_path):
    "Each scaling with its ramp's three regions inside d_head = 16 (wavelengths 6 to 20000 tokens against contexts of 32 to 64), 120 tokens past the context trained on; the folder transformers writes, and the folder the course writes back."
    torch.manual_seed(0)
    theirs = MODEL[family](CONFIG[family](vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=256, rope_theta=10000.0, rope_scaling=dict(scaling))).eval()
    with torch.no_grad():                                                       # norms, biases: off their initial 1 and 0
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / 'hub')
    ours = LOAD[family](tmp_path / 'hub')
    assert ours.config.rope_scaling['rope_type'] == scaling.get('rope_type', scaling.get('type'))
    idx = torch.randint(0, 97, (2, 120), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs(idx).logits
        assert (ours(idx) - expected).abs().max() < 1e-4
        plain = GPT.from_config({**ours.config.to_dict(), 'rope_scaling': None}).eval()
        plain.load_state_dict(ours.state_dict())
        assert (plain(idx) - expected).abs().max() > 1e-3                      # the scaling is what makes them equal
        WRITE[family](ours, tmp_path / 'back')
        back = MODEL[family].from_pretrained(tmp_path / 'back').eval()
        assert (back(idx).logits - expected).abs().max() < 1e-5
    prompt = idx[:1, :60]
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, 20, temperature=0, use_cache=True), want)


def test_a_folder_split_into_shards_loads_and_its_broken_copies_are_named(tmp_path):
    "transformers' save_pretrained with a small max_shard_size writes model.safetensors.index.json and several shards, as the Hub's 7B folders are."
    theirs = random_hf('qwen2', 48, 6, 3, 2, 72, 1e6, 1e-6, False, {})
    folder = tmp_path / 'hub'
    theirs.save_pretrained(folder, max_shard_size='40KB')
    shards = sorted(p.name for p in folder.glob('model-*.safetensors'))
    assert len(shards) >= 3 and not (folder / 'model.safetensors').exists(), shards
    with torch.no_grad(): assert (from_qwen2(folder)(IDX) - theirs(IDX).logits).abs().max() < 1e-4
    index = json.loads((folder / 'model.safetensors.index.json').read_text())
    def broken(name, change):
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        change(copy)
        with pytest.raises(ModelFileError) as e: from_qwen2(copy)
        return str(e.value)
    last = shards[-1]
    assert f"lists {last}, which the folder lacks" in broken('missing', lambda f: (f / last).unlink())
    assert "model-99999-of-99999.safetensors is a shard that model.safetensors.index.json does not list" in broken(
        'extra', lambda f: shutil.copy(f / last, f / 'model-99999-of-99999.safetensors'))
    moved = next(t for t, s in index['weight_map'].items() if s == last)
    def relist(f, to):
        wm = {**index['weight_map'], moved: to} if to else {t: s for t, s in index['weight_map'].items() if t != moved}
        (f / 'model.safetensors.index.json').write_text(json.dumps({**index, 'weight_map': wm}))
    assert f"holds {moved!r}, which model.safetensors.index.json does not list" in broken('unlisted', lambda f: relist(f, None))
    assert f"holds {moved!r}, which model.safetensors.index.json puts in {shards[0]}" in broken('elsewhere', lambda f: relist(f, shards[0]))
    assert "is not an index of shards" in broken('garbled', lambda f: (f / 'model.safetensors.index.json').write_text('{"metadata": {}}'))
    assert "which is not a file of the folder" in broken('outside', lambda f: relist(f, '../model.safetensors'))
    (folder / 'model.safetensors.index.json').unlink()
    with pytest.raises(FileNotFoundError, match="has neither model.safetensors nor model.safetensors.index.json"): from_qwen2(folder)


def test_generate_ends_rows_at_end_ids_and_stops_as_transformers_does():
    "Two end ids, met by two of three rows at different steps: those rows padded after their end, the run over when every row has ended (or at max_new_tokens), as generate(eos_token_id=[...], pad_token_id=...) returns."
    theirs = random_hf('llama', 48, 6, 2, 2, 80, 10000.0, 1e-5, False, {}, T=128)
    ours = from_llama(theirs)
    prompt = IDX[:, :6]
    free = generate(ours, prompt, 30, temperature=0)
    ends = [free[0, 9].item(), free[1, 14].item()]
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False, eos_token_id=ends, pad_token_id=0)
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 30, temperature=0, eos_id=ends, pad_id=0, use_cache=use_cache), want)
    every = generate(ours, prompt, 30, temperature=0, eos_id=sorted(set(free[:, 6].tolist())))   # every row ends at once
    assert every.shape == (3, 7) and torch.equal(every, free[:, :7])
    first = 6 + (free[0, 6:] == ends[0]).nonzero()[0].item()                                      # where row 0 first meets it
    one = generate(ours, prompt[0], 30, temperature=0, eos_id=ends[0])                            # one id, no pad given: the row stops
    assert torch.equal(one, free[0, :first + 1])
    for bad in (dict(eos_id=97), dict(eos_id=[1, -1]), dict(eos_id=1, pad_id=True)):
        with pytest.raises(ValueError, match=r"eos_id and pad_id must be token ids in \[0, 97\)"): generate(ours, prompt, 3, **bad)


@pytest.mark.parametrize('penalty', [1.3, 0.7])
def test_repetition_penalty_equals_transformers(penalty):
    "Greedy tokens under a repetition penalty (and under its inverse, which rewards repeats), against generate(repetition_penalty=...): every id of the row so far, the prompt's too."
    theirs = random_hf('qwen2', 48, 6, 3, 2, 72, 1e6, 1e-6, True, {}, T=128)
    ours = from_qwen2(theirs)
    prompt = IDX[:2, :10]
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False, repetition_penalty=penalty,
                           eos_token_id=None, pad_token_id=0)
    assert not torch.equal(generate(ours, prompt, 30, temperature=0), want)                    # the penalty changes these tokens
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 30, temperature=0, repetition_penalty=penalty, use_cache=use_cache), want)
    with pytest.raises(ValueError, match=r"repetition_penalty must be a positive number \(1: none\), got 0"): generate(ours, prompt, 3, repetition_penalty=0)


def test_a_folder_read_and_written_back_keeps_its_ids_keys_generation_config_and_dtype(tmp_path):
    "Qwen2.5-0.5B's published config at two blocks, in bfloat16 as published, with a generation_config.json: to_qwen2 writes back the end and start ids, max_window_layers and sliding_window, the generation settings and the dtype."
    torch.manual_seed(0)
    shrink = dict(num_hidden_layers=2, max_window_layers=2, vocab_size=1000)
    theirs = Qwen2ForCausalLM(Qwen2Config(**{**QWEN25_05B, **shrink})).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.05 * torch.randn_like(p))
    theirs = theirs.to(torch.bfloat16)
    theirs.save_pretrained(tmp_path / 'hub')
    generation = {'bos_token_id': 151643, 'do_sample': True, 'eos_token_id': [151645, 151643], 'pad_token_id': 151643, 'repetition_penalty': 1.1,
                  'temperature': 0.7, 'top_k': 20, 'top_p': 0.8}
    (tmp_path / 'hub' / 'generation_config.json').write_text(json.dumps(generation))
    ours = from_qwen2(tmp_path / 'hub')
    assert ours.embed.weight.dtype == torch.bfloat16
    to_qwen2(ours, tmp_path / 'back')
    written = json.loads((tmp_path / 'back' / 'config.json').read_text())
    read = json.loads((tmp_path / 'hub' / 'config.json').read_text())                # as transformers wrote it
    assert (written['bos_token_id'], written['eos_token_id'], written['max_window_layers']) == (151643, 151643, 2)
    for key in ('sliding_window', 'use_sliding_window'): assert written[key] == read[key], key
    assert json.loads((tmp_path / 'back' / 'generation_config.json').read_text()) == generation
    back = Qwen2ForCausalLM.from_pretrained(tmp_path / 'back').eval()
    assert back.dtype == torch.bfloat16 and back.generation_config.repetition_penalty == 1.1
    idx = torch.randint(0, 1000, (1, 16), generator=torch.Generator().manual_seed(0))
    first = Qwen2ForCausalLM.from_pretrained(tmp_path / 'hub').eval()           # read as transformers reads the folder (float32 angles)
    with torch.no_grad(): assert torch.equal(back(idx).logits, first(idx).logits)


def test_save_pretrained_and_from_pretrained_keep_bfloat16_unless_asked():
    import tempfile
    from transformer_tutorial.model_files import save_pretrained, from_pretrained
    model = GPT(40, 16, 16, 2, 1, 32).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as folder:
        save_pretrained(model, folder)
        assert from_pretrained(folder).embed.weight.dtype == torch.bfloat16
        assert from_pretrained(folder, dtype=torch.float32).embed.weight.dtype == torch.float32
        assert torch.equal(from_pretrained(folder).embed.weight, model.embed.weight)


def test_generation_settings_of_qwen25_instructs_published_file(tmp_path):
    "Qwen2.5-0.5B-Instruct's generation_config.json with every key it carries (written out by hand), beside its config.json: the settings generate takes, and what transformers reads from the same file."
    from transformers import GenerationConfig
    from transformer_tutorial.open_models import generation_settings
    from transformer_tutorial import llama
    assert llama.generation_settings is generation_settings   # its home before chapter 17e, still importable
    from transformer_tutorial import llama_families
    assert llama.to_llama is llama_families.to_llama and llama.from_gemma3 is llama_families.from_gemma3   # theirs before chapter 17d
    with pytest.raises(AttributeError, match="module 'transformer_tutorial.llama' has no attribute 'from_gemma4'"): llama.from_gemma4
    published = {"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "repetition_penalty": 1.1,
                 "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"}
    (tmp_path / 'config.json').write_text(json.dumps(QWEN25_05B))
    (tmp_path / 'generation_config.json').write_text(json.dumps(published))
    theirs = GenerationConfig.from_pretrained(tmp_path)
    assert generation_settings(tmp_path) == {'eos_id': theirs.eos_token_id, 'pad_id': theirs.pad_token_id, 'temperature': theirs.temperature,
                                             'top_k': theirs.top_k, 'top_p': theirs.top_p, 'repetition_penalty': theirs.repetition_penalty,
                                             'max_new_tokens': None}
    (tmp_path / 'generation_config.json').unlink()                        # no file: greedy, config.json's end id
    assert generation_settings(tmp_path) == {'eos_id': 151643, 'pad_id': None, 'temperature': 0.0, 'top_k': None, 'top_p': None,
                                             'repetition_penalty': 1.0, 'max_new_tokens': None}


def test_qwen3s_published_config_gives_its_published_size_and_transformers_count():
    "Qwen3-0.6B: 0.6B parameters, 0.44B without the embedding (its model card), and exactly what transformers builds."
    ours = llama_config(QWEN3_06B, 'qwen3')
    assert (ours.head_dim, ours.qk_norm, ours.num_kv_heads, ours.qkv_bias, ours.out_bias) == (128, True, 8, False, False)
    with torch.device('meta'): theirs = Qwen3ForCausalLM(Qwen3Config(**QWEN3_06B))
    n = gpt_parameter_count(ours)
    assert n == sum(p.numel() for p in theirs.parameters()) == 596_049_920
    assert round((n - 151936 * 1024) / 1e9, 2) == 0.44
    with torch.device('meta'): model = GPT.from_config(ours)
    assert sum(p.numel() for p in model.parameters()) == n


@pytest.mark.parametrize('block', [dict(), dict(tie_embeddings=True, qkv_bias=True, out_bias=True)])
def test_a_qwen3_written_by_the_course_loads_in_transformers_with_equal_logits(block, tmp_path):
    torch.manual_seed(4)
    ours = GPT(97, 64, 48, 4, 2, 80, num_kv_heads=2, head_dim=16, qk_norm=True, **{**LLAMA_BLOCK, **block}).eval()
    with torch.no_grad():
        for p in ours.parameters(): p.add_(0.1 * torch.randn_like(p))
    to_qwen3(ours, tmp_path)
    theirs = Qwen3ForCausalLM.from_pretrained(tmp_path).eval()
    assert theirs.config.head_dim == 16 and theirs.model.layers[0].self_attn.q_proj.weight.shape == (64, 48)
    with torch.no_grad():
        assert (theirs(IDX).logits - ours(IDX)).abs().max() < 1e-5
        assert torch.equal(from_qwen3(str(tmp_path))(IDX), ours(IDX))
    with pytest.raises(ValueError, match="qk_norm=True: Llama's block has qk_norm=False"): to_llama(ours, tmp_path / 'llama')
    with pytest.raises(ValueError, match="qk_norm=False: Qwen3's block has qk_norm=True"):
        to_qwen3(GPT(97, 64, 48, 4, 1, 80, **LLAMA_BLOCK), tmp_path / 'plain')


def test_qwen3_slides_as_transformers_decides_past_the_window():
    hf = dict(model_type='qwen3', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=4, head_dim=16,
              num_key_value_heads=2, max_position_embeddings=64, use_sliding_window=True, sliding_window=8, max_window_layers=1)
    theirs = Qwen3Config(**hf)
    assert GPT.from_config(llama_config(hf, 'qwen3')).windows == [theirs.sliding_window if t == 'sliding_attention' else None for t in theirs.layer_types]
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(theirs).eval()
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.05 * torch.randn_like(p))
    ours = from_qwen3(model.state_dict(), config=hf)
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad(): assert (ours(idx) - model(idx).logits).abs().max() < 1e-4
    prompt = idx[:, :6]
    want = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(generate(ours, prompt, 20, temperature=0), want)


def test_bad_head_dims_are_named():
    base = dict(model_type='qwen3', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=1, num_attention_heads=5,
                max_position_embeddings=64)
    with pytest.raises(ValueError, match=r"hidden_size=48 is not a multiple of num_attention_heads=5, and the config gives no head_dim"):
        llama_config(base, 'qwen3')
    with pytest.raises(ValueError, match=r"head_dim=7 in the Qwen3 config: it must be an even positive integer"):
        llama_config({**base, 'head_dim': 7}, 'qwen3')
    assert llama_config({**base, 'head_dim': 16}, 'qwen3').head_dim == 16


def test_phi3s_published_config_gives_its_size_and_transformers_count():
    "Phi-3-mini-4k-instruct: 3.8B parameters (its model card), exactly what transformers builds; every layer reads through a window of 2047, norms with eps 1e-5, no biases."
    ours = llama_config(PHI3_MINI, 'phi3')
    assert (ours.sliding_window, ours.sliding_layers, ours.layer_norm_eps, ours.qkv_bias, ours.out_bias, ours.ff_bias) == (2047, None, 1e-5, False, False, False)
    with torch.device('meta'): theirs = Phi3ForCausalLM(Phi3Config(**PHI3_MINI))
    assert gpt_parameter_count(ours) == sum(p.numel() for p in theirs.parameters()) == 3_821_079_552
    assert llama_config({k: v for k, v in PHI3_MINI.items() if k not in ('rms_norm_eps', 'sliding_window')}, 'phi3').layer_norm_eps == 1e-5
    assert llama_config({k: v for k, v in PHI3_MINI.items() if k != 'sliding_window'}, 'phi3').sliding_window is None   # Phi3Config's default


def _random_phi3(**options):
    torch.manual_seed(0)
    hf = dict(model_type='phi3', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6,
              num_key_value_heads=2, max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None, sliding_window=None)
    hf.update(options)
    theirs = Phi3ForCausalLM(Phi3Config(**hf)).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    return hf, theirs


@pytest.mark.parametrize('window', [None, 7])
def test_phi3_equals_transformers_past_its_window_and_round_trips_fused(window, tmp_path):
    "The fused projections split on the way in (q, k, v rows in that order; the gate before up) and joined on the way out; with a window of 7 the 40 generated tokens run far past it."
    hf, theirs = _random_phi3(sliding_window=window)
    ours = from_phi3(theirs)
    assert ours.config.sliding_window == window and ours.config.sliding_layers is None
    with torch.no_grad(): assert (ours(IDX) - theirs(IDX).logits).abs().max() < 1e-5
    prompt = torch.randint(0, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40, do_sample=False)
    for use_cache in (True, False): assert torch.equal(generate(ours, prompt, 40, temperature=0, use_cache=use_cache), want)
    to_phi3(ours, tmp_path)
    from safetensors.torch import load_file
    written = load_file(tmp_path / 'model.safetensors')
    assert torch.equal(written['model.layers.0.self_attn.qkv_proj.weight'], theirs.state_dict()['model.layers.0.self_attn.qkv_proj.weight'])
    assert not any('q_proj' in k or 'gate_proj' in k for k in written)
    back = Phi3ForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(back(IDX).logits, theirs(IDX).logits)
        assert torch.equal(from_phi3(str(tmp_path))(IDX), ours(IDX))
    with pytest.raises(ValueError, match="qkv_bias=True: Phi-3's block has qkv_bias=False"):
        to_phi3(GPT(97, 64, 48, 4, 1, 80, **{**LLAMA_BLOCK, 'qkv_bias': True}), tmp_path / 'biased')


def test_a_fused_matrix_of_the_wrong_size_is_named():
    hf, theirs = _random_phi3()
    state = dict(theirs.state_dict())
    state['model.layers.1.self_attn.qkv_proj.weight'] = state['model.layers.1.self_attn.qkv_proj.weight'][:-8]
    with pytest.raises(ValueError, match=r"'model.layers.1.self_attn.qkv_proj.weight' has 72 rows, expected 80 from the config: 48 of queries, 16 of keys, 16 of values"):
        from_phi3(state, config=hf)
    with pytest.raises(ValueError, match=r"partial_rotary_factor=0.75: the course rotates every feature pair"):
        llama_config({**hf, 'partial_rotary_factor': 0.75}, 'phi3')


def test_olmo2s_published_config_gives_transformers_count():
    "OLMo-2-1124-7B: the 7.3B parameters transformers builds, the q/k norms 4096 wide (all heads at once), two norms per block after their sublayers."
    ours = llama_config(OLMO2_7B, 'olmo2')
    assert (ours.norm_output, ours.qk_norm, ours.qk_norm_per_head, ours.layer_norm_eps, ours.qkv_bias, ours.ff_bias) == (True, True, False, 1e-6, False, False)
    with torch.device('meta'): theirs, model = Olmo2ForCausalLM(Olmo2Config(**OLMO2_7B)), GPT.from_config(ours)
    assert gpt_parameter_count(ours) == sum(p.numel() for p in theirs.parameters()) == sum(p.numel() for p in model.parameters()) == 7_298_617_344
    assert model.layers[0].self_attn.q_norm.weight.shape == (4096,)


@pytest.mark.parametrize('bias', [False, True])
def test_olmo2_equals_transformers_with_the_cache_and_round_trips(bias, tmp_path):
    "Norms after each sublayer, and q/k norms over all heads (their gains reordered with the rows of W_Q and W_K): logits, 40 greedy tokens with and without the cache, and the folder both ways."
    torch.manual_seed(0)
    hf = dict(model_type='olmo2', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
              max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None, attention_bias=bias)
    theirs = Olmo2ForCausalLM(Olmo2Config(**hf)).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))      # the norms' gains off 1 too
    ours = from_olmo2(theirs)
    with torch.no_grad(): assert (ours(IDX) - theirs(IDX).logits).abs().max() < 1e-5
    prompt = torch.randint(0, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40, do_sample=False)
    for use_cache in (True, False): assert torch.equal(generate(ours, prompt, 40, temperature=0, use_cache=use_cache), want)
    to_olmo2(ours, tmp_path)
    back = Olmo2ForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(back(IDX).logits, theirs(IDX).logits)
        assert torch.equal(from_olmo2(str(tmp_path))(IDX), ours(IDX))
    with pytest.raises(ValueError, match="qk_norm=True: Llama's block has qk_norm=False"): to_llama(ours, tmp_path / 'llama')
    with pytest.raises(ValueError, match="norm_output=True: Llama's block has norm_output=False"):
        to_llama(GPT(97, 64, 48, 4, 1, 80, norm_output=True, **LLAMA_BLOCK), tmp_path / 'after')
    with pytest.raises(ValueError, match="norm_output=False: OLMo 2's block has norm_output=True"):
        to_olmo2(GPT(97, 64, 48, 4, 1, 80, qk_norm=True, qk_norm_per_head=False, **LLAMA_BLOCK), tmp_path / 'before')
    with pytest.raises(ValueError, match="qk_norm_per_head=False: Qwen3's block has qk_norm_per_head=True"): to_qwen3(ours, tmp_path / 'qwen3')


def test_the_norms_placement_is_what_olmo2_computes():
    "x + norm(f(x)): the residual path is never normed, so a sublayer that outputs zeros leaves x as it was; the pre-norm block's f reads norm(x) instead."
    from transformer_tutorial.layer_norm import SublayerConnection
    from transformer_tutorial.modern_blocks import RMSNorm
    x = torch.randn(2, 5, 8) * 10
    after = SublayerConnection(8, norm=RMSNorm, norm_output=True)
    assert torch.equal(after(x, torch.zeros_like), x)
    seen = []
    after(x, lambda y: seen.append(y) or y)
    assert torch.equal(seen[0], x)                                          # the sublayer reads x itself, not a normed x
    torch.testing.assert_close(after(x, lambda y: y) - x, RMSNorm(8)(x))   # what it adds is normed


@pytest.mark.parametrize('hf,total,active', [(MIXTRAL_8X7B, 46_702_792_704, 12_879_925_248), (QWEN3_30B_A3B, 30_532_122_624, 3_353_032_704)],
                         ids=['Mixtral-8x7B', 'Qwen3-30B-A3B'])
def test_mixtures_published_configs_give_transformers_count_and_the_active_parameters_of_their_names(hf, total, active):
    "Mixtral-8x7B: 47B parameters, 13B used per token (its paper); Qwen3-30B-A3B: 30.5B, 3.3B active (its name). The count is transformers'."
    family = hf['model_type']
    ours = llama_config(hf, family)
    with torch.device('meta'): theirs = MODEL[family](CONFIG[family](**hf))
    assert gpt_parameter_count(ours) == sum(p.numel() for p in theirs.parameters()) == total
    unused = ours.num_layers * (ours.num_experts - ours.experts_per_token) * 3 * ours.d_model * ours.d_ff
    assert total - unused == active and ours.renormalize_experts


def _random_moe(family, seed=0, **options):
    torch.manual_seed(seed)
    hf = dict(model_type=family, vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
              num_experts_per_tok=2, max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None,
              **({'num_local_experts': 4} if family == 'mixtral' else {'num_experts': 4, 'moe_intermediate_size': 24, 'head_dim': 8}))
    hf.update(options)
    theirs = MODEL[family](CONFIG[family](**hf)).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    return hf, theirs


@pytest.mark.parametrize('family,options', [('mixtral', {}), ('mixtral', {'sliding_window': 7}), ('qwen3_moe', {'norm_topk_prob': False}),
                                            ('qwen3_moe', {'norm_topk_prob': True})], ids=['mixtral', 'mixtral-window-7', 'qwen3_moe', 'qwen3_moe-renormalized'])
def test_mixtures_equal_transformers_with_the_cache_and_round_trip(family, options, tmp_path):
    "Each token's experts chosen as transformers chooses them: logits, 40 greedy tokens with and without the cache, the Hub's per-expert names written back."
    hf, theirs = _random_moe(family, **options)
    ours = LOAD[family](theirs)                                              # transformers 5's 3-D expert tensors, split by expert
    assert ours.config.num_experts == 4 and ours.config.renormalize_experts == (family == 'mixtral' or options['norm_topk_prob'])
    with torch.no_grad(): assert (ours(IDX) - theirs(IDX).logits).abs().max() < 1e-5
    prompt = torch.randint(0, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40, do_sample=False)
    for use_cache in (True, False): assert torch.equal(generate(ours, prompt, 40, temperature=0, use_cache=use_cache), want)
    WRITE[family](ours, tmp_path)
    from safetensors.torch import load_file
    names = set(load_file(tmp_path / 'model.safetensors'))
    assert ('model.layers.1.block_sparse_moe.experts.3.w2.weight' if family == 'mixtral' else 'model.layers.1.mlp.experts.3.down_proj.weight') in names
    back = MODEL[family].from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(back(IDX).logits, theirs(IDX).logits)
        assert torch.equal(LOAD[family](str(tmp_path))(IDX), ours(IDX))  # the Hub's names read back


@pytest.mark.parametrize('family', ['mixtral', 'qwen3_moe'])
def test_tied_router_scores_choose_the_experts_transformers_chooses(family):
    "Two experts with the same router row tie on every token; top-1 and top-2 pick the same of them on both sides."
    for k in (1, 2):
        hf, theirs = _random_moe(family, seed=3, num_experts_per_tok=k)
        with torch.no_grad():
            for layer in theirs.model.layers: layer.mlp.gate.weight[1] = layer.mlp.gate.weight[0]
        ours = LOAD[family](theirs)
        _, chosen = ours.layers[0].feed_forward.route(torch.randn(64, 48))
        assert ((chosen[:, 0] == 0) | (chosen[:, 0] == 1)).any()              # the tie is at the top for some tokens
        with torch.no_grad(): assert (ours(IDX) - theirs(IDX).logits).abs().max() < 1e-5


def test_what_a_mixture_cannot_be_is_named(tmp_path):
    base = dict(model_type='qwen3_moe', vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
                max_position_embeddings=64, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24, head_dim=8)
    with pytest.raises(ValueError, match=r"num_experts_per_tok=5 but num_experts=4: a token cannot run more experts than there are"):
        llama_config({**base, 'num_experts_per_tok': 5}, 'qwen3_moe')
    with pytest.raises(ValueError, match=r"mlp_only_layers=\[1\]: the course makes every layer a mixture of experts"):
        llama_config({**base, 'mlp_only_layers': [1]}, 'qwen3_moe')
    with pytest.raises(ValueError, match=r"the Qwen3-MoE config lacks moe_intermediate_size"):
        llama_config({k: v for k, v in base.items() if k != 'moe_intermediate_size'}, 'qwen3_moe')
    moe = GPT(97, 64, 48, 4, 1, 80, num_experts=4, **LLAMA_BLOCK)
    with pytest.raises(ValueError, match=r"num_experts=4: Llama's feed-forward is one SwiGLU, not a mixture; .*\(write a mixture as Mixtral or Qwen3-MoE\)"):
        to_llama(moe, tmp_path / 'llama')
    with pytest.raises(ValueError, match=r"renormalize_experts=False: Mixtral's block has renormalize_experts=True"):
        to_mixtral(GPT(97, 64, 48, 4, 1, 80, num_experts=4, renormalize_experts=False, **LLAMA_BLOCK), tmp_path / 'mixtral')
    with pytest.raises(ValueError, match=r"num_experts=4: the experts are SwiGLU feed-forwards; set activation='swiglu'"):
        GPT(97, 64, 48, 4, 1, 80, num_experts=4)


def test_the_shipped_published_configs_cover_every_family_and_count_as_transformers_builds():
    "Chapter 17e's table reads these: each family the course loads appears, and each model's size is what transformers builds from the same file."
    from transformer_tutorial.open_models import published_configs, family_switches
    configs = published_configs()
    assert len(configs) == 12 and {hf['model_type'] for hf in configs.values()} == set(FAMILIES)
    for name, hf in configs.items():
        family = hf['model_type']
        with torch.device('meta'): theirs = MODEL[family](CONFIG[family](**hf))
        row = family_switches(hf)
        assert row['parameters'].startswith(f"{sum(p.numel() for p in theirs.parameters()) / 1e9:.2f}B"), (name, row)
        assert row['family'] == FAMILIES[family][0]
    assert family_switches(configs['OLMo-2-1124-7B'])['norm'] == "RMSNorm on each sublayer's output"
    assert family_switches(configs['Mixtral-8x7B-v0.1'])['feed-forward'] == "8 SwiGLU experts of 14,336, 2 per token"
    assert family_switches(configs['Mistral-7B-v0.1'])['window'] == "4,096 in every layer"


def test_dynamic_rope_equals_transformers_past_the_trained_context(tmp_path):
    "transformers' dynamic NTK scaling raises RoPE's base once a text is longer than max_position_embeddings (n_0 = 24 here): the course's model reads up to factor x n_0, equal to a fresh transformers model below and past n_0, with and without the cache, and back."
    torch.manual_seed(0)
    theirs = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=24, rope_theta=10000.0, rope_scaling={'rope_type': 'dynamic', 'factor': 2.0},
                                          bos_token_id=None, eos_token_id=None, pad_token_id=None))
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / 'hub')
    fresh = lambda folder: LlamaForCausalLM.from_pretrained(folder).eval()      # transformers keeps the longest length seen: a new model each time
    ours = from_llama(tmp_path / 'hub')
    assert ours.config.max_len == 48 and ours.config.rope_scaling == {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 24}
    idx = torch.randint(0, 97, (2, 44), generator=torch.Generator().manual_seed(0))
    plain = GPT.from_config({**ours.config.to_dict(), 'rope_scaling': None}).eval()
    plain.load_state_dict(ours.state_dict())
    with torch.no_grad():
        for n in (20, 44):                                                     # within n_0: plain RoPE; past it: the raised base
            expected = fresh(tmp_path / 'hub')(idx[:, :n]).logits
            assert (ours(idx[:, :n]) - expected).abs().max() < 1e-4
            assert ((plain(idx[:, :n]) - expected).abs().max() > 1e-3) == (n > 24)
    prompt = idx[:1, :16]
    want = fresh(tmp_path / 'hub').generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=28, do_sample=False, pad_token_id=0)
    for cache in (True, False): assert torch.equal(generate(ours, prompt, 28, temperature=0, use_cache=cache), want)
    to_llama(ours, tmp_path / 'back')
    assert json.loads((tmp_path / 'back' / 'config.json').read_text())['max_position_embeddings'] == 24
    with torch.no_grad(): assert (fresh(tmp_path / 'back')(idx).logits - fresh(tmp_path / 'hub')(idx).logits).abs().max() < 1e-5


def test_longrope_equals_transformers_within_and_past_the_trained_context(tmp_path):
    "Phi-3's LongRoPE (Phi-3-mini-128k, Phi-3.5-mini): each feature pair divided by its own factor, the short set within original_max_position_embeddings (16 here), the long set past it, cos and sin times sqrt(1 + ln s / ln n_0). Logits on both sides, greedy tokens across n_0 with and without the cache (crossing n_0, transformers' Phi-3 recomputes its cache with the long set, and so does the course's generate), and back; 'su', its older name, read as LongRoPE as Phi3Config reads it."
    g = torch.Generator().manual_seed(3)
    short, long = (1 + torch.rand(4, generator=g)).tolist(), (1 + 3 * torch.rand(4, generator=g)).tolist()   # d_head = 8: 4 pairs
    torch.manual_seed(0)
    theirs = Phi3ForCausalLM(Phi3Config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=64, original_max_position_embeddings=16, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                                        rope_scaling={'type': 'longrope', 'short_factor': short, 'long_factor': long}))
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / 'hub')
    theirs = Phi3ForCausalLM.from_pretrained(tmp_path / 'hub').eval()
    ours = from_phi3(tmp_path / 'hub')
    assert ours.config.rope_scaling['rope_type'] == 'longrope' and ours.config.rope_scaling['factor'] == 4.0
    su = json.loads((tmp_path / 'hub' / 'config.json').read_text())
    su['rope_scaling'] = {'type': 'su', 'short_factor': short, 'long_factor': long}
    assert llama_config(su, 'phi3').rope_scaling == ours.config.rope_scaling
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(0))
    plain = GPT.from_config({**ours.config.to_dict(), 'rope_scaling': None}).eval()
    plain.load_state_dict(ours.state_dict())
    with torch.no_grad():
        for n in (12, 40):
            expected = theirs(idx[:, :n]).logits
            assert (ours(idx[:, :n]) - expected).abs().max() < 1e-4 and (plain(idx[:, :n]) - expected).abs().max() > 1e-3
    prompt = idx[:1, :10]
    for cache in (True, False):
        want = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, do_sample=False, pad_token_id=0, use_cache=cache)
        assert torch.equal(generate(ours, prompt, 20, temperature=0, use_cache=cache), want)
    to_phi3(ours, tmp_path / 'back')
    with torch.no_grad(): assert (Phi3ForCausalLM.from_pretrained(tmp_path / 'back').eval()(idx).logits - theirs(idx).logits).abs().max() < 1e-5


def test_a_course_built_longrope_gpt_goes_out_as_phi3_with_its_trained_context(tmp_path):
    "A LongRoPE GPT built by the course (no folder behind it) written by to_phi3: config.json says its original_max_position_embeddings at the top, where Phi3Config reads it (its default is 4096), and transformers computes the same logits within and past it."
    g = torch.Generator().manual_seed(5)
    scaling = {'rope_type': 'longrope', 'short_factor': (1 + torch.rand(4, generator=g)).tolist(),
               'long_factor': (1 + 3 * torch.rand(4, generator=g)).tolist(), 'original_max_position_embeddings': 16, 'factor': 4.0}
    torch.manual_seed(0)
    ours = GPT.from_config({**LLAMA_BLOCK, 'vocab_size': 97, 'd_model': 32, 'num_heads': 4, 'num_kv_heads': 2, 'num_layers': 2, 'd_ff': 64,
                            'max_len': 64, 'rope_scaling': scaling, 'layer_norm_eps': 1e-5}).eval()
    to_phi3(ours, tmp_path / 'out')
    written = json.loads((tmp_path / 'out' / 'config.json').read_text())
    assert written['original_max_position_embeddings'] == 16 and written['max_position_embeddings'] == 64
    theirs = Phi3ForCausalLM.from_pretrained(tmp_path / 'out').eval()
    idx = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for n in (12, 40): assert (ours(idx[:, :n]) - theirs(idx[:, :n]).logits).abs().max() < 1e-4
    assert from_phi3(tmp_path / 'out').config.rope_scaling == ours.config.rope_scaling


def test_longrope_factors_of_the_wrong_length_are_refused_when_the_folder_is_read(tmp_path):
    "Both factor lists are checked against d_head / 2 when the model is built, not only the one a text's length picks (the long set was once checked only past original_max_position_embeddings)."
    config = dict(model_type='phi3', vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, original_max_position_embeddings=16)
    for key, n in (('long_factor', 3), ('short_factor', 5)):
        factors = {'short_factor': [1.0] * 4, 'long_factor': [2.0] * 4, key: [1.5] * n}
        with pytest.raises(ValueError, match=rf"longrope's {key} must hold one number per feature pair, d_head/2 = 4, got {n}"):
            GPT.from_config(llama_config({**config, 'rope_scaling': {'type': 'longrope', **factors}}, 'phi3'))


def test_qwen25s_model_card_yarn_block_reads_four_times_its_stated_length_as_transformers_does(tmp_path):
    "Qwen2.5's model cards add rope_scaling {type yarn, factor 4, original_max_position_embeddings 32768} beside max_position_embeddings 32768: transformers runs texts past 32768. The course's context is 4 x 32768 (here 4 x 16); a text past the stated length equals transformers, and to_qwen2 writes the folder's own stated length back."
    torch.manual_seed(0)
    theirs = Qwen2ForCausalLM(Qwen2Config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, max_position_embeddings=16, bos_token_id=None, eos_token_id=None,
                                          rope_scaling={'type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16})).eval()
    with torch.no_grad():
        for p in theirs.parameters(): p.add_(0.1 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path / 'hub')
    ours = from_qwen2(tmp_path / 'hub')
    assert ours.config.max_len == 64
    idx = torch.randint(0, 97, (2, 60), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(): expected = theirs(idx).logits
    with torch.no_grad(): assert (ours(idx) - expected).abs().max() < 1e-4
    to_qwen2(ours, tmp_path / 'back')
    assert json.loads((tmp_path / 'back' / 'config.json').read_text())['max_position_embeddings'] == 16
    assert from_qwen2(tmp_path / 'back').config.max_len == 64
    built = GPT.from_config(ours.config)                         # no folder behind it: its context, stated
    built.load_state_dict(ours.state_dict())
    to_qwen2(built, tmp_path / 'built')
    assert json.loads((tmp_path / 'built' / 'config.json').read_text())['max_position_embeddings'] == 64
    with torch.no_grad():
        assert (Qwen2ForCausalLM.from_pretrained(tmp_path / 'built').eval()(idx).logits - expected).abs().max() < 1e-4


def test_a_folder_is_loaded_into_the_model_without_a_second_copy_and_a_model_passed_in_is_never_shared(tmp_path):
    "From a folder, the tensors read become the GPT's parameters (built on the meta device: one copy of the weights in memory); from a transformers model, the GPT gets copies, so that changing one never changes the other; both equal."
    torch.manual_seed(0)
    theirs = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)).eval()
    theirs.save_pretrained(tmp_path / 'hub')
    from transformer_tutorial import model_files
    read, real = {}, model_files._read_tensors
    def spy(path, skip=()):   # what the folder's reader hands over
        read.update(real(path, skip))
        return read
    model_files._read_tensors = spy
    try: folder = from_llama(tmp_path / 'hub')
    finally: model_files._read_tensors = real
    v = folder.layers[0].self_attn.w_v.weight
    assert v.data_ptr() == read['model.layers.0.self_attn.v_proj.weight'].data_ptr()   # the tensor read, not a copy
    assert folder.head.weight is folder.embed.weight and not any(p.is_meta for p in folder.parameters())
    passed = from_llama(theirs)
    assert passed.layers[0].self_attn.w_v.weight.data_ptr() != theirs.model.layers[0].self_attn.v_proj.weight.data_ptr()
    idx = torch.randint(0, 97, (1, 9))
    with torch.no_grad():
        assert torch.equal(folder(idx), passed(idx))
        passed.layers[0].self_attn.w_v.weight.add_(1.0)
        assert torch.equal(theirs.model.layers[0].self_attn.v_proj.weight, LlamaForCausalLM.from_pretrained(tmp_path / 'hub').model.layers[0].self_attn.v_proj.weight)


def test_a_folder_whose_config_disagrees_with_its_weights_names_the_file_and_its_sizes(tmp_path):
    import re
    random_hf(*SIZES[0], seed=4).save_pretrained(tmp_path)
    config = json.loads((tmp_path / 'config.json').read_text())
    d = config['hidden_size']
    (tmp_path / 'config.json').write_text(json.dumps({**config, 'hidden_size': 2 * d, 'head_dim': d // config['num_attention_heads']}))
    where = re.escape(str(tmp_path / 'config.json'))
    with pytest.raises(ValueError, match=rf"tensor 'model.embed_tokens.weight' has shape \(\d+, {d}\), expected \(\d+, {2 * d}\) from the config "
                                         rf"\({where}: vocab_size \d+, hidden_size {2 * d}, "):
        LOAD['llama'](str(tmp_path))
