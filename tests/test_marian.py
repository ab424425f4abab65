"MarianMT (opus-mt) in the course's Transformer and back: parity with transformers' MarianMTModel, greedy decoding against generate, the round trip, and the configurations and files it must refuse."
import json
import pytest
import torch
from transformer_tutorial.marian import from_marian, to_marian, marian_config, sinusoid_permutation
from transformer_tutorial.decoding import greedy_decode, beam_search
from transformer_tutorial.model import Transformer
from transformer_tutorial.positional import sinusoidal_positional_encoding

transformers = pytest.importorskip('transformers')  # a test dependency (settings.ini dev_requirements), never a runtime one
from transformers import MarianConfig, MarianMTModel

PAD, EOS = 1, 0  # Marian's ids in these tests: the pad id is also the decoder's start
SIZES = [  # vocab, decoder vocab (None: shared), width, heads, layers, ffn, activation, tied output
    (50, None, 32, 4, 2, 64, 'swish', True), (40, None, 24, 2, 1, 48, 'relu', True), (45, 37, 16, 2, 2, 40, 'gelu', True),
    (33, None, 48, 6, 1, 96, 'swish', False)]


def random_marian(V, V_dec, d, H, N, ffn, act, tied, seed=0, dtype=torch.float32):
    "A transformers MarianMTModel of that size with every weight moved off its initialization."
    torch.manual_seed(seed)
    cfg = MarianConfig(vocab_size=V, decoder_vocab_size=V_dec or V, share_encoder_decoder_embeddings=V_dec is None, tie_word_embeddings=tied,
                       d_model=d, encoder_layers=N, decoder_layers=N, encoder_attention_heads=H, decoder_attention_heads=H,
                       encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
                       decoder_start_token_id=PAD, forced_eos_token_id=None, scale_embedding=True, activation_function=act,
                       dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'embed_positions' not in name: p.add_(0.1 * torch.randn_like(p))
        model.final_logits_bias.normal_(0, 0.1)
    return model.to(dtype)


def batch(V, V_dec, seed=1):
    "Padded sources (3, 11) and decoder inputs (3, 8) starting with the start id."
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(2, V, (3, 11), generator=g); src[1, 7:] = PAD; src[2, 3:] = PAD
    tgt = torch.randint(2, V_dec or V, (3, 8), generator=g); tgt[:, 0] = PAD
    return src, tgt


def logits_of_both(ours, theirs, src, tgt):
    with torch.no_grad():
        a = ours(src, tgt, (src != PAD)[:, None, None, :], torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril())
        b = theirs(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
    return a, b


def test_the_sinusoids_are_a_permutation_of_the_course_s():
    j = torch.arange(64, dtype=torch.float64)
    angle = torch.arange(100, dtype=torch.float64)[:, None] / 10000 ** (2 * (j // 2) / 64)
    marian = torch.cat([angle[:, 0::2].sin(), angle[:, 1::2].cos()], 1)
    torch.testing.assert_close(marian[:, sinusoid_permutation(64)].float(), sinusoidal_positional_encoding(100, 64), atol=1e-5, rtol=0)
    assert sinusoid_permutation(6).tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(ValueError, match='d_model must be even'): sinusoid_permutation(7)


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('dtype,tol', [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_logits_equal_transformers_marian_with_padding(size, dtype, tol):
    theirs = random_marian(*size, seed=SIZES.index(size), dtype=dtype)
    ours = from_marian(theirs)
    assert not ours.config.norm_first and next(ours.parameters()).dtype == dtype and not ours.training
    assert (ours.output.weight is ours.tgt_embed.lut.weight) == size[-1]
    a, b = logits_of_both(ours, theirs, *batch(size[0], size[1]))
    assert (a - b).abs().max().item() < tol


@pytest.mark.parametrize('size', SIZES[:3])
def test_greedy_decoding_equals_generate(size):
    theirs = random_marian(*size, seed=7)
    ours = from_marian(theirs)
    src, _ = batch(size[0], size[1], seed=3)
    expected = theirs.generate(src, attention_mask=(src != PAD).long(), num_beams=1, do_sample=False, max_new_tokens=15)[:, 1:]
    got = greedy_decode(ours, src, 15, start_id=PAD, end_id=EOS, pad_id=PAD)
    width = max(got.size(1), expected.size(1))
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.size(1)), value=PAD)
    assert torch.equal(pad(got), pad(expected))


def test_beam_search_without_a_length_penalty_agrees_with_generate_on_most_sources():
    "Both rank by log-probability without a length penalty; they keep different hypotheses, so agreement is checked on most sources, and the course's scores are its outputs' log-probabilities."
    theirs = random_marian(*SIZES[0], seed=5)
    with torch.no_grad(): theirs.final_logits_bias[0, EOS] += 4.0          # outputs that end, at different lengths
    ours = from_marian(theirs)
    src = torch.randint(2, 50, (12, 8), generator=torch.Generator().manual_seed(4))
    hf = theirs.generate(src, attention_mask=torch.ones_like(src), num_beams=3, do_sample=False, max_new_tokens=10, length_penalty=0.0,
                         early_stopping=False)[:, 1:]
    out, scores = beam_search(ours, src, 10, beam_size=3, alpha=0.0, start_id=PAD, end_id=EOS, pad_id=PAD, return_scores=True)
    assert (out == EOS).any(1).float().mean() > 0.5                          # most outputs end: finished hypotheses were in play
    width = max(out.size(1), hf.size(1))
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.size(1)), value=PAD)
    assert (pad(out) == pad(hf)).all(1).float().mean() >= 0.75
    for s, y, score in zip(src, out, scores):                               # the reported score is log p(y | s)
        n = int((y == EOS).nonzero()[0, 0]) + 1 if (y == EOS).any() else len(y)
        ys = torch.cat([torch.tensor([PAD]), y[:n]])[None]
        with torch.no_grad():
            lp = ours(s[None], ys[:, :-1], (s != PAD)[None, None, None, :], torch.ones(n, n, dtype=torch.bool).tril()).log_softmax(-1)
        assert lp[0].gather(1, ys[0, 1:, None]).sum().item() == pytest.approx(score.item(), abs=1e-4)


def test_to_marian_loads_in_transformers_and_the_round_trip_is_exact(tmp_path):
    for i, size in enumerate(SIZES):
        theirs = random_marian(*size, seed=10 + i)
        ours = from_marian(theirs)
        folder = to_marian(ours, tmp_path / f'm{i}', pad_id=PAD, eos_id=EOS)
        assert sorted(p.name for p in folder.iterdir()) == ['config.json', 'model.safetensors']
        loaded = MarianMTModel.from_pretrained(folder).eval()
        src, tgt = batch(size[0], size[1])
        with torch.no_grad():
            a = loaded(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
            b = theirs(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits
        assert (a - b).abs().max().item() < 1e-5
        back = from_marian(folder)
        assert back.state_dict().keys() == ours.state_dict().keys()
        for (name, x), y in zip(ours.state_dict().items(), back.state_dict().values()): assert torch.equal(x, y), name
    course = Transformer(30, 30, d_model=16, num_heads=2, num_layers=1, d_ff=32, norm_first=False, activation='silu').eval()
    again = from_marian(to_marian(course, tmp_path / 'course'))
    for x, y in zip(course.state_dict().values(), again.state_dict().values()): assert torch.equal(x, y)


def test_from_marian_refuses_what_the_course_cannot_hold(tmp_path):
    theirs = random_marian(*SIZES[1])
    cfg, state = theirs.config.to_dict(), theirs.state_dict()
    for change, message in [({'model_type': 'bart'}, "describes a 'bart' model; from_marian reads MarianMT"),
                            ({'normalize_before': True}, 'normalize_before=True means pre-LN layers'),
                            ({'decoder_layers': 3}, 'encoder_layers=1 and decoder_layers=3 differ'),
                            ({'scale_embedding': False}, 'scale_embedding=False'),
                            ({'activation_function': 'tanh'}, "activation_function 'tanh'"),
                            ({'vocab_size': 41}, r"'model.encoder.embed_tokens.weight' has shape \(40, 24\), expected \(41, 24\)")]:
        with pytest.raises(ValueError, match=message): from_marian(state, config={**cfg, **change})
    with pytest.raises(ValueError, match=r"lacks 'model.decoder.layers.0.fc1.weight' \(expected shape \(48, 24\)\)"):
        from_marian({k: v for k, v in state.items() if k != 'model.decoder.layers.0.fc1.weight'}, config=cfg)
    with pytest.raises(ValueError, match=r"'model.encoder.layers.0.self_attn.q_proj.weight' has shape \(24, 12\), expected \(24, 24\)"):
        from_marian({**state, 'model.encoder.layers.0.self_attn.q_proj.weight': torch.zeros(24, 12)}, config=cfg)
    with pytest.raises(ValueError, match='does not say how many heads.*pass config='): from_marian(state)
    with pytest.raises(FileNotFoundError, match='has no config.json'): from_marian(str(tmp_path))
    (tmp_path / 'config.json').write_text(json.dumps(cfg))
    (tmp_path / 'model.safetensors').write_bytes(b'\x80\x04not safetensors')
    with pytest.raises(ValueError, match='is a pickle'): from_marian(str(tmp_path))


def test_to_marian_refuses_a_pre_ln_model_and_keeps_what_is_on_disk(tmp_path):
    pre_ln = Transformer(30, 30, d_model=16, num_heads=2, num_layers=1, d_ff=32, norm_first=True)
    with pytest.raises(ValueError, match=r"pre-LN \(norm_first=True\); Marian's layers normalize after the residual sum"):
        to_marian(pre_ln, tmp_path / 'out')
    assert not (tmp_path / 'out').exists()
    (tmp_path / 'file').write_text('mine')
    with pytest.raises(NotADirectoryError, match='is a file'): to_marian(Transformer(30, 30, 16, 2, 1, 32, norm_first=False), tmp_path / 'file')
    assert (tmp_path / 'file').read_text() == 'mine'


def test_cli_converts_to_and_from_marian(tmp_path, capsys):
    from transformer_tutorial.cli import main
    from transformer_tutorial.model_files import from_pretrained, read_config
    theirs = random_marian(*SIZES[0], seed=21)
    theirs.save_pretrained(tmp_path / 'hf')                      # transformers' own folder: config.json, model.safetensors
    assert main(['convert', '--from', 'marian', str(tmp_path / 'hf'), str(tmp_path / 'course')]) == 0
    course = from_pretrained(tmp_path / 'course')
    task = read_config(tmp_path / 'course')['task']
    assert {k: task[k] for k in ('name', 'pad_token_id', 'eos_token_id', 'decoder_start_token_id')} == {'name': 'marian', 'pad_token_id': PAD, 'eos_token_id': EOS, 'decoder_start_token_id': PAD}
    a, b = logits_of_both(course, theirs, *batch(50, None))
    assert (a - b).abs().max().item() < 1e-5
    assert main(['convert', '--to', 'marian', str(tmp_path / 'course'), str(tmp_path / 'back')]) == 0
    assert 'decoder start 1' in capsys.readouterr().out
    loaded = MarianMTModel.from_pretrained(tmp_path / 'back').eval()
    src, tgt = batch(50, None)
    with torch.no_grad(): diff = (loaded(input_ids=src, decoder_input_ids=tgt).logits - theirs(input_ids=src, decoder_input_ids=tgt).logits).abs().max()
    assert diff < 1e-5 and loaded.config.pad_token_id == PAD and loaded.config.eos_token_id == EOS
    assert main(['train', '--steps', '3', '--out', str(tmp_path / 'copy'), '--device', 'cpu']) == 0   # a pre-LN copy model
    capsys.readouterr()
    assert main(['convert', '--to', 'marian', str(tmp_path / 'copy'), str(tmp_path / 'nope')]) == 2
    err = capsys.readouterr().err
    assert "pre-LN (norm_first=True); Marian's layers normalize after the residual sum" in err and err.count('\n') == 1
    assert not (tmp_path / 'nope').exists()


def test_a_folder_without_safetensors_is_refused_with_the_way_out(tmp_path):
    theirs = random_marian(*SIZES[1])
    (tmp_path / 'config.json').write_text(json.dumps(theirs.config.to_dict()))
    (tmp_path / 'pytorch_model.bin').write_bytes(b'PK\x03\x04 a pickle-based checkpoint')
    with pytest.raises(FileNotFoundError, match=r"has no model.safetensors \(pickle-based weights are never read here\).*MarianMTModel.from_pretrained"):
        from_marian(str(tmp_path))


# Real opus-mt configurations: every key of the Hub's config.json and generation_config.json, the sizes shrunk.
from transformer_tutorial.marian import marian_generate, OPUS_MT_EN_DE, OPUS_MT_EN_DE_GENERATION

def real_config(family):
    """(config.json, generation_config.json) of a real opus-mt model with the sizes shrunk (58101 tokens -> 61, d_model 512 -> 32, 6 layers
    -> 2): 'en-de' is Helsinki-NLP/opus-mt-en-de's, every key; 'tc-big' the same keys with the values that set the opus-mt-tc-big family
    apart (relu, an end id other than 0, longer positions)."""
    V, pad = 61, 60
    cfg = {**OPUS_MT_EN_DE, 'd_model': 32, 'encoder_attention_heads': 4, 'decoder_attention_heads': 4, 'encoder_ffn_dim': 64,
           'decoder_ffn_dim': 64, 'encoder_layers': 2, 'decoder_layers': 2, 'num_hidden_layers': 2, 'vocab_size': V, 'decoder_vocab_size': V,
           'extra_pos_embeddings': V, 'pad_token_id': pad, 'decoder_start_token_id': pad, 'bad_words_ids': [[pad]]}
    generation = {**OPUS_MT_EN_DE_GENERATION, 'bad_words_ids': [[pad]], 'decoder_start_token_id': pad, 'pad_token_id': pad}
    if family == 'tc-big':
        cfg.update(activation_function='relu', eos_token_id=37, forced_eos_token_id=37, max_position_embeddings=1024,
                   _name_or_path='Helsinki-NLP/opus-mt-tc-big-fr-en')
        generation.update(eos_token_id=37, forced_eos_token_id=37)
    return cfg, generation


def real_folder(tmp_path, family, seed=0):
    "A folder as the Hub serves it: transformers' own weights file, the real config.json and generation_config.json; the weights perturbed, the pad id's bias raised (so that banning it matters)."
    cfg, generation = real_config(family)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**{k: v for k, v in cfg.items() if not k.startswith('_')})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'embed_positions' not in name: p.add_(0.1 * torch.randn_like(p))
        model.final_logits_bias.normal_(0, 0.1)
        model.final_logits_bias[0, cfg['pad_token_id']] += 3.0
    folder = tmp_path / family
    model.save_pretrained(folder)
    (folder / 'config.json').write_text(json.dumps(cfg, indent=2))
    (folder / 'generation_config.json').write_text(json.dumps(generation, indent=2))
    return folder, cfg


@pytest.mark.parametrize('family', ['en-de', 'tc-big'])
def test_a_real_opus_mt_folder_loads_and_translates_as_generate_does(tmp_path, family):
    folder, cfg = real_folder(tmp_path, family)
    theirs = MarianMTModel.from_pretrained(folder).eval()
    ours = from_marian(str(folder))
    assert set(json.loads((folder / 'config.json').read_text())) == set(cfg)             # every key of the real file was there
    src = torch.randint(1, 59, (6, 9), generator=torch.Generator().manual_seed(2)); src[2, 5:] = cfg['pad_token_id']
    tgt = torch.randint(1, 59, (6, 7), generator=torch.Generator().manual_seed(3)); tgt[:, 0] = cfg['pad_token_id']
    with torch.no_grad():
        a = ours(src, tgt, (src != cfg['pad_token_id'])[:, None, None, :], torch.ones(7, 7, dtype=torch.bool).tril())
        b = theirs(input_ids=src, attention_mask=(src != cfg['pad_token_id']).long(), decoder_input_ids=tgt).logits
    assert (a - b).abs().max().item() < 1e-5
    assert ours.marian_generation == {'decoder_start_token_id': 60, 'eos_token_id': cfg['eos_token_id'], 'pad_token_id': 60,
                                      'forced_eos_token_id': cfg['eos_token_id'], 'bad_words_ids': [[60]], 'num_beams': 4, 'max_length': 512}
    mask = (src != cfg['pad_token_id']).long()
    for n in (4, 12):       # a limit that cuts most translations (the forced end) and one that lets them end
        expected = theirs.generate(src, attention_mask=mask, num_beams=1, do_sample=False, max_new_tokens=n)[:, 1:]   # its own settings otherwise
        got = marian_generate(ours, src, max_new_tokens=n, num_beams=1)
        width = max(got.size(1), expected.size(1))
        pad = lambda t: torch.nn.functional.pad(t, (0, width - t.size(1)), value=cfg['pad_token_id'])
        assert torch.equal(pad(got), pad(expected)), (n, got, expected)
    plain = greedy_decode(ours, src, 4, start_id=60, end_id=cfg['eos_token_id'], pad_id=60)   # without the settings: another output
    assert not torch.equal(plain, marian_generate(ours, src, max_new_tokens=4, num_beams=1))
    assert marian_generate(ours, src, max_new_tokens=6).shape[0] == 6                          # the settings' 4 beams, the course's search


def test_the_cli_converts_a_real_folder_and_keeps_its_generation_settings(tmp_path):
    from transformer_tutorial.cli import main
    from transformer_tutorial.model_files import from_pretrained, read_config
    folder, cfg = real_folder(tmp_path, 'en-de', seed=4)
    assert main(['convert', '--from', 'marian', str(folder), str(tmp_path / 'course')]) == 0
    course, task = from_pretrained(tmp_path / 'course'), read_config(tmp_path / 'course')['task']
    assert task['name'] == 'marian' and task['forced_eos_token_id'] == 0 and task['bad_words_ids'] == [[60]]
    theirs = MarianMTModel.from_pretrained(folder).eval()
    src = torch.randint(1, 59, (4, 8), generator=torch.Generator().manual_seed(5))
    expected = theirs.generate(src, attention_mask=torch.ones_like(src), num_beams=1, do_sample=False, max_new_tokens=5)[:, 1:]
    assert torch.equal(marian_generate(course, src, 5, num_beams=1, settings=task), expected)


@pytest.mark.parametrize('key, value, message', [
    ('static_position_embeddings', False, "static_position_embeddings=False means a learned position table"),
    ('normalize_before', True, "normalize_before=True means pre-LN layers"),
    ('normalize_embedding', True, "normalize_embedding=True means a LayerNorm on the embeddings"),
    ('add_final_layer_norm', True, "add_final_layer_norm=True means a LayerNorm after each stack's last layer"),
    ('add_bias_logits', True, "add_bias_logits=True means a second bias on the logits"),
    ('scale_embedding', False, "scale_embedding=False means unscaled embeddings"),
    ('bad_words_ids', [[60], [3, 4]], r"bad_words_ids=\[\[60\], \[3, 4\]\]: the course's decoders ban single tokens")])
def test_a_real_config_with_a_value_the_course_cannot_compute_is_refused_by_name(tmp_path, key, value, message):
    folder, cfg = real_folder(tmp_path, 'en-de')
    (folder / 'config.json').write_text(json.dumps({**cfg, key: value}))
    if key == 'bad_words_ids': (folder / 'generation_config.json').unlink()
    with pytest.raises(ValueError, match=message): from_marian(str(folder))
