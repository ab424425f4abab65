"""Chapter 17d's Gemma, Gemma 2 and Gemma 3 (text) against transformers' GemmaForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM.

Small random models built offline from a config, every weight (the norms' stored g - 1 included) moved off its
initialization: logits, greedy tokens past the sliding window with and without the cache, folders read as transformers
5 writes them and as the Hub's published files spell them, the round trip back, the switches on their own, and what is
refused by name.
"""
import json
import pytest
import torch

from transformer_tutorial.gpt import GPT, gpt_parameter_count
from transformer_tutorial.llama import FAMILIES, LLAMA_BLOCK, llama_config, from_llama
from transformer_tutorial.llama_families import to_llama, from_gemma, from_gemma2, from_gemma3, to_gemma, to_gemma2, to_gemma3
from transformer_tutorial.multi_head import MultiHeadAttention
from transformer_tutorial.layer_norm import SublayerConnection
from transformer_tutorial.modern_blocks import SwiGLUFeedForward
from transformer_tutorial.sampling import generate

transformers = pytest.importorskip('transformers')

KINDS = {'gemma': (from_gemma, to_gemma, 'GemmaConfig', 'GemmaForCausalLM'),
         'gemma2': (from_gemma2, to_gemma2, 'Gemma2Config', 'Gemma2ForCausalLM'),
         'gemma3_text': (from_gemma3, to_gemma3, 'Gemma3TextConfig', 'Gemma3ForCausalLM')}
SMALL = dict(vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             max_position_embeddings=64, bos_token_id=2, eos_token_id=1, pad_token_id=0)
CASES = [('gemma', dict(hidden_act='gelu')),
         ('gemma2', dict(sliding_window=7)),                                                       # Gemma-2-2B's caps, s = d_head
         ('gemma2', dict(sliding_window=7, query_pre_attn_scalar=12, attn_logit_softcapping=2.0, final_logit_softcapping=1.5, tie_word_embeddings=False)),
         ('gemma3_text', dict(sliding_window=7, sliding_window_pattern=3, rope_local_base_freq=100.0)),
         ('gemma3_text', dict(sliding_window=7, sliding_window_pattern=2, rope_theta=50000.0, rope_scaling={'rope_type': 'linear', 'factor': 4.0},
                              query_pre_attn_scalar=20, attention_bias=True))]
IDS = ['gemma', 'gemma2', 'gemma2-caps-scale-untied', 'gemma3', 'gemma3-linear-bias']
IDX = torch.randint(3, 97, (2, 64), generator=torch.Generator().manual_seed(1))


def random_gemma(kind, seed=0, **options):
    Config, Model = (getattr(transformers, n) for n in KINDS[kind][2:])
    torch.manual_seed(seed)
    model = Model(Config(**{**SMALL, **options})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters(): p.add_((0.3 if 'norm' in name else 0.1) * torch.randn_like(p))
    return model


@pytest.mark.parametrize('kind, options', CASES, ids=IDS)
def test_gemmas_equal_transformers_past_the_window_with_the_cache_and_round_trip(kind, options, tmp_path):
    load, write, _, model_class = KINDS[kind]
    theirs = random_gemma(kind, **options)
    theirs.save_pretrained(tmp_path / 'hub')                              # config.json as transformers 5 writes it
    ours = load(tmp_path / 'hub')
    with torch.no_grad(): expected = theirs(IDX).logits
    with torch.no_grad(): torch.testing.assert_close(ours(IDX), expected, atol=1e-4, rtol=0)
    prompt = IDX[:1, :6]
    greedy = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False, eos_token_id=None)
    for cache in (True, False): assert torch.equal(generate(ours, prompt, 30, temperature=0, use_cache=cache), greedy)
    write(ours, tmp_path / 'back')
    back = getattr(transformers, model_class).from_pretrained(tmp_path / 'back').eval()
    with torch.no_grad(): torch.testing.assert_close(back(IDX).logits, expected, atol=1e-4, rtol=0)
    assert json.loads((tmp_path / 'back' / 'config.json').read_text())['eos_token_id'] == 1


def test_gemma3s_published_spelling_reads_as_transformers_reads_it(tmp_path):
    "The Hub's Gemma 3 files say rope_theta, rope_local_base_freq, rope_scaling and sliding_window_pattern, not transformers 5's layer_types and rope_parameters."
    options = dict(sliding_window=7, sliding_window_pattern=3, rope_local_base_freq=100.0, rope_theta=20000.0, rope_scaling={'rope_type': 'linear', 'factor': 2.0})
    theirs = random_gemma('gemma3_text', **options)
    theirs.save_pretrained(tmp_path)
    hf = json.loads((tmp_path / 'config.json').read_text())
    for k in ('layer_types', 'rope_parameters'): del hf[k]
    hf.update(options)
    (tmp_path / 'config.json').write_text(json.dumps(hf))
    ours = from_gemma3(tmp_path)
    assert ours.config.sliding_layers == [0, 1, 3, 4] and ours.config.rope_local_base == 100.0 and ours.config.rope_scaling['factor'] == 2.0
    with torch.no_grad(): torch.testing.assert_close(ours(IDX), theirs(IDX).logits, atol=1e-4, rtol=0)


def test_the_published_gemmas_count_as_transformers_builds_them():
    from transformer_tutorial.open_models import published_configs, family_switches
    configs = published_configs()
    for name, total in (('Gemma-2B', 2_506_172_416), ('Gemma-2-2B', 2_614_341_888), ('Gemma-3-1B', 999_885_952)):
        hf = configs[name]
        Config, Model = (getattr(transformers, n) for n in KINDS[hf['model_type']][2:])
        with torch.device('meta'): assert sum(p.numel() for p in Model(Config(**hf)).parameters()) == total
        assert gpt_parameter_count(llama_config(hf, hf['model_type'])) == total
    row = family_switches(configs['Gemma-2-2B'])
    assert (row['norm'], row['soft caps'], row['feed-forward'], row['window']) == ('RMSNorm, gain 1 + w, before and after each sublayer', 'scores 50, logits 30',
                                                                                   'GEGLU of 9,216', '4,096 in 13 of 26 layers')
    assert family_switches(configs['Gemma-3-1B'])['RoPE'] == 'base 1,000,000 (sliding layers 10,000)'


def test_the_switches_compute_what_they_say():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, scale=0.2, softcap=1.5).eval()
    x = torch.randn(2, 5, 32)
    out, weights = mha(x, x, x)
    q, k, v = mha.project(x, x, x)
    s = 1.5 * torch.tanh(q @ k.transpose(-2, -1) * 0.2 / 1.5)
    torch.testing.assert_close(weights, s.softmax(-1))
    torch.testing.assert_close(mha(x, x, x, need_weights=False)[0], out)                  # the production path computes the same
    plain = MultiHeadAttention(32, 4, scale=0.2).eval(); plain.load_state_dict(mha.state_dict())
    torch.testing.assert_close(plain(x, x, x, need_weights=False)[0], plain(x, x, x)[0])   # the fused kernel's scale= as the scores'
    ff = SwiGLUFeedForward(8, 12, gate='gelu_tanh')
    y = torch.randn(3, 8)
    torch.testing.assert_close(ff(y), ff.w_down(torch.nn.functional.gelu(ff.w_gate(y), approximate='tanh') * ff.w_up(y)))
    sub = SublayerConnection(8, norm_first=True, sandwich=True)
    with torch.no_grad(): sub.norm_after.weight.fill_(3.0)
    torch.testing.assert_close(sub(y, lambda z: 5 * z), y + 3 * torch.nn.functional.layer_norm(5 * sub.norm(y), (8,), eps=sub.norm_after.eps))
    m = GPT(50, 16, 16, 2, 1, 32, logit_softcap=0.5, scale_embeddings=True).eval()
    ids = torch.randint(0, 50, (1, 6))
    assert m(ids).abs().max() < 0.5
    torch.testing.assert_close(m.embed_tokens(ids), m.embed(ids) * 4.0)


def test_gemma_s_norm_equals_transformers_in_every_dtype_and_adding_1_at_load_does_not_in_bfloat16():
    "RMSNorm(unit_offset=True) holds the stored g - 1 and adds 1 in float32, as GemmaRMSNorm does; a plain RMSNorm given 1 + w rounds that sum in bfloat16."
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    from transformer_tutorial.modern_blocks import RMSNorm
    torch.manual_seed(0)
    w, x = 0.05 * torch.randn(64), 3 * torch.randn(4, 7, 64)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        theirs, ours, at_load = GemmaRMSNorm(64).to(dtype), RMSNorm(64, unit_offset=True).to(dtype), RMSNorm(64).to(dtype)
        with torch.no_grad(): theirs.weight.copy_(w); ours.weight.copy_(w); at_load.weight.copy_(1 + theirs.weight)
        assert torch.equal(ours(x.to(dtype)), theirs(x.to(dtype))), dtype
        if dtype == torch.bfloat16: assert not torch.equal(at_load(x.to(dtype)), theirs(x.to(dtype)))
    assert torch.equal(RMSNorm(64, unit_offset=True)(x), RMSNorm(64)(x))        # a new one: gain 1


@pytest.mark.parametrize('kind, options', [CASES[0], CASES[4]], ids=[IDS[0], IDS[4]])
def test_a_bfloat16_gemma_folder_runs_as_close_to_float32_as_transformers_runs_it(kind, options, tmp_path):
    "Loaded from a bfloat16 folder the model stays bfloat16; its logits' distance from the float32 model's is transformers' own bfloat16 distance (the gains rounded to 1 + w at load made it 1.15 and 1.27 times that)."
    theirs = random_gemma(kind, **options)
    with torch.no_grad(): exact = theirs(IDX).logits
    theirs.to(torch.bfloat16).save_pretrained(tmp_path)
    ours = KINDS[kind][0](tmp_path)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    with torch.no_grad(): ours_err, theirs_err = (((m(IDX) if m is ours else m(IDX).logits).float() - exact).abs().mean() for m in (ours, theirs))
    assert ours_err < 1.06 * theirs_err, (ours_err, theirs_err)


def test_what_a_gemma_cannot_be_is_named(tmp_path):
    good = dict(model_type='gemma2', **{k: v for k, v in SMALL.items() if 'token' not in k})
    with pytest.raises(ValueError, match=r"hidden_activation='silu': Gemma 2's GEGLU gates with GELU's tanh form"):
        llama_config({**good, 'hidden_activation': 'silu'}, 'gemma2')
    with pytest.raises(ValueError, match=r"attn_logit_softcapping=-1 in the Gemma 2 config: it must be a positive number"):
        llama_config({**good, 'attn_logit_softcapping': -1}, 'gemma2')
    with pytest.raises(ValueError, match=r"use_bidirectional_attention=true: an embedding model"):
        llama_config({**good, 'model_type': 'gemma3_text', 'use_bidirectional_attention': True}, 'gemma3_text')
    with pytest.raises(ValueError, match=r"query_pre_attn_scalar or attn_logit_softcapping, which Llama's code ignores"):
        llama_config({**good, 'model_type': 'llama', 'query_pre_attn_scalar': 256}, 'llama')
    with pytest.raises(ValueError, match=r"sandwich_norm=False: Gemma 2's block has sandwich_norm=True"):
        to_gemma2(GPT(97, 64, 48, 4, 1, 80, **{**LLAMA_BLOCK, 'activation': 'geglu', 'norm': 'rms_unit_offset'}, scale_embeddings=True), tmp_path)
    with pytest.raises(ValueError, match=r"norm='rms': Gemma's block has norm='rms_unit_offset'"):   # its gains would be read as g - 1
        to_gemma(GPT(97, 64, 48, 4, 1, 80, **{**LLAMA_BLOCK, 'activation': 'geglu'}, scale_embeddings=True), tmp_path)
    with pytest.raises(ValueError, match=r"norm='rms_unit_offset': Llama's block has norm='rms'"):
        to_llama(from_gemma(random_gemma('gemma')), tmp_path)
    with pytest.raises(ValueError, match=r"sandwich norms a pre-norm sublayer's output too"):
        SublayerConnection(8, norm_output=True, sandwich=True)
    with pytest.raises(ValueError, match=r"softcap must be a positive number or None, got 0"):
        MultiHeadAttention(32, 4, softcap=0)
    with pytest.raises(ValueError, match=r"rope_local_base=100.0 is the sliding blocks' RoPE base: it needs positions='rope' and a sliding_window"):
        GPT(50, 16, 16, 2, 1, 32, positions='rope', rope_local_base=100.0)


@pytest.mark.parametrize('model_type, nearest', [('gemma3n', "Gemma 3 \\(model_type 'gemma3_text'\\)"), ('deepseek_v3', "Qwen3-MoE"),
                                                 ('gpt2', "from_gpt2 \\(chapter 17b\\) reads it")])
def test_an_architecture_the_course_lacks_is_named_with_the_nearest_it_has(model_type, nearest, tmp_path):
    from transformer_tutorial.open_models import load_open_model
    (tmp_path / 'config.json').write_text(json.dumps({'model_type': model_type}))
    with pytest.raises(ValueError, match=f"describes a '{model_type}' model; the course runs .*{nearest}"):
        load_open_model(tmp_path)
    assert 'gemma3_text' in FAMILIES


def test_a_gemma2_folder_chats_from_the_command_line_as_transformers_does(tmp_path, capsys):
    "A Gemma 2 folder as the Hub lays one out (chapter 16c's Gemma tokenizer and chat template, a greedy generation_config.json with Gemma's two end ids): the command's reply is transformers' own pipeline's."
    from transformer_tutorial.cli import main
    from transformer_tutorial.hub_families import write_family
    from transformer_tutorial.hub_tokenizer import HubTokenizer
    from transformer_tutorial.shakespeare import load_shakespeare
    folder = write_family(tmp_path / 'gemma2', 'gemma', load_shakespeare('train')[:60_000], 500)
    tok = HubTokenizer.from_files(folder)
    ends = [tok.special_tokens['<eos>'], tok.special_tokens['<end_of_turn>']]
    theirs = random_gemma('gemma2', vocab_size=len(tok), max_position_embeddings=256, sliding_window=16, bos_token_id=tok.special_tokens['<bos>'],
                          eos_token_id=ends, pad_token_id=tok.special_tokens['<pad>'])
    with torch.no_grad(): theirs.lm_head.weight[ends[1]] += 0.4                # the end of a turn likely within 40 tokens
    theirs.save_pretrained(folder)
    (folder / 'generation_config.json').write_text(json.dumps({'do_sample': False, 'eos_token_id': ends, 'pad_token_id': 0, 'max_new_tokens': 40}))
    capsys.readouterr()
    assert main(['chat', '--model', str(folder), '--message', 'Who art thou?']) == 0
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    ids = hf_tok.apply_chat_template([{'role': 'user', 'content': 'Who art thou?'}], add_generation_prompt=True, return_tensors='pt', return_dict=True)['input_ids']
    model = transformers.Gemma2ForCausalLM.from_pretrained(str(folder)).eval()
    out = model.generate(ids, attention_mask=torch.ones_like(ids))
    reply = hf_tok.decode(out[0, ids.size(1):], skip_special_tokens=True)
    assert capsys.readouterr().out == reply + "\n" and len(reply) > 3 and out[0, -1] in ends   # text, then the end of a turn


def random_gemma3_multimodal(**text):
    "A small transformers Gemma3ForConditionalGeneration (a SigLIP image encoder and a Gemma 3 text model), every weight moved."
    config = transformers.Gemma3Config(
        text_config={**SMALL, 'sliding_window': 7, 'sliding_window_pattern': 3, 'rope_local_base_freq': 100.0, **text},
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28, patch_size=14),
        mm_tokens_per_image=4, boi_token_index=94, eoi_token_index=95, image_token_index=96)
    torch.manual_seed(0)
    model = transformers.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters(): p.add_((0.3 if 'norm' in name else 0.1) * torch.randn_like(p))
    return model


def test_a_multimodal_gemma3_folder_reads_as_its_text_model(tmp_path):
    "Gemma 3's 4B, 12B and 27B come as one multimodal checkpoint (model_type gemma3): from_gemma3 reads its text model, from the folder (sharded, the image encoder's tensors never read), from a text_config that states only what differs from Gemma3TextConfig's defaults (as the published ones do), and from the model itself; logits and greedy tokens are transformers' for a text."
    from transformer_tutorial.llama import _IMAGE_PARTS
    from transformer_tutorial.model_files import _foreign_source
    from transformer_tutorial.open_models import load_open_model
    theirs = random_gemma3_multimodal()
    theirs.save_pretrained(tmp_path / 'hub', max_shard_size='50KB')
    assert len(list((tmp_path / 'hub').glob('model-*.safetensors'))) > 1
    with torch.no_grad(): expected = theirs(input_ids=IDX).logits
    prompt = IDX[:1, :6]
    greedy = theirs.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False, eos_token_id=None)
    # the published files' text_config: only what differs from the defaults
    hf = json.loads((tmp_path / 'hub' / 'config.json').read_text())
    defaults = transformers.Gemma3TextConfig().to_dict()
    sparse = {**hf, 'text_config': {k: v for k, v in hf['text_config'].items() if k not in defaults or defaults[k] != v}}
    assert 'vocab_size' not in sparse['text_config'] or sparse['text_config']['vocab_size'] == 97
    (tmp_path / 'sparse').mkdir()
    for f in (tmp_path / 'hub').iterdir(): (tmp_path / 'sparse' / f.name).write_bytes(f.read_bytes())
    (tmp_path / 'sparse' / 'config.json').write_text(json.dumps(sparse))
    for source in (tmp_path / 'hub', tmp_path / 'sparse', theirs):
        ours = from_gemma3(source)
        assert ours.config.sliding_layers == [0, 1, 3, 4] and ours.config.rope_local_base == 100.0
        with torch.no_grad(): torch.testing.assert_close(ours(IDX), expected, atol=1e-4, rtol=0)
        for cache in (True, False): assert torch.equal(generate(ours, prompt, 30, temperature=0, use_cache=cache), greedy)
    hf_read, state = _foreign_source(tmp_path / 'hub', None, 'Gemma 3', skip=lambda hf: _IMAGE_PARTS)
    assert state and not [n for n in state if n.startswith(_IMAGE_PARTS)]
    assert any(n.startswith('vision_tower.') for n in _foreign_source(tmp_path / 'hub', None, 'Gemma 3')[1])
    # the folder's model_type routes to Gemma 3's text model; what is missing next is the tokenizer
    with pytest.raises(FileNotFoundError, match='tokenizer'):
        load_open_model(tmp_path / 'hub')
    bad = {**hf}; bad.pop('text_config')
    (tmp_path / 'sparse' / 'config.json').write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="a gemma3 config.json holds its text model's settings under 'text_config', which this one lacks"):
        from_gemma3(tmp_path / 'sparse')


# google/gemma-3-4b-it's config.json as the Hub serves it, written out by hand (every key): its text_config states only
# what differs from Gemma3TextConfig's defaults, its end-of-turn token (106) is in the top level's eos list
GEMMA_3_4B_IT = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False}}


def test_the_published_gemma_3_4b_it_config_reads_as_transformers_reads_it():
    "gemma-3-4b-it's own config.json, at full size: the course's block has transformers' shape (every layer's kind, both RoPE bases, the linear scaling of the full layers only, the heads) and the same 3,880,263,168 parameters, counted on the meta device; both end tokens of the top level's eos list kept."
    from transformer_tutorial.llama import _text_model, llama_config
    text, _ = _text_model(GEMMA_3_4B_IT, {})
    c = llama_config(text, 'gemma3_text')
    theirs = transformers.Gemma3Config(**GEMMA_3_4B_IT).text_config
    assert (c.vocab_size, c.d_model, c.d_ff, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.max_len) == (
        theirs.vocab_size, theirs.hidden_size, theirs.intermediate_size, theirs.num_hidden_layers,
        theirs.num_attention_heads, theirs.num_key_value_heads, theirs.head_dim, theirs.max_position_embeddings)
    assert c.sliding_window == theirs.sliding_window == 1024
    assert c.sliding_layers == [i for i, kind in enumerate(theirs.layer_types) if kind == 'sliding_attention']
    assert len(c.sliding_layers) == 29  # five sliding layers to every full one
    full, local = theirs.rope_parameters['full_attention'], theirs.rope_parameters['sliding_attention']
    assert (c.rope_base, c.rope_scaling) == (full['rope_theta'], {'rope_type': 'linear', 'factor': full['factor']})
    assert c.rope_local_base == local['rope_theta'] and local['rope_type'] == 'default'
    assert c.qk_norm and c.sandwich_norm and c.scale_embeddings and c.tie_embeddings and c.activation == 'geglu'
    assert text['eos_token_id'] == [1, 106]
    with torch.device('meta'):
        ours, hf_model = GPT.from_config(c), transformers.Gemma3ForCausalLM(theirs)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(ours) == count(hf_model) == 3_880_263_168
