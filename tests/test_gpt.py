"The GPT of chapters 17, 17a and 17b: parity with transformers' GPT-2, the sampling filters, generation with and without the cache, the Shakespeare task through the one training loop, model files, the old import paths, and the bad input a user gives."
import json, math
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformer_tutorial.shakespeare import ShakespeareTask
from transformer_tutorial.gpt import GPT, GPTConfig, gpt_flops_per_token, gpt_parameter_count
from transformer_tutorial.sampling import generate, gpt_decode_step, sample_next, top_k_filter, top_p_filter
from transformer_tutorial.gpt2 import from_gpt2, gpt2_config, load_gpt2_state
from transformer_tutorial.decoding import KVCache
from transformer_tutorial.training import record_attention

transformers = pytest.importorskip('transformers')  # a test dependency (settings.ini dev_requirements), never a runtime one
from transformers import GPT2Config, GPT2LMHeadModel

SIZES = [  # vocab, positions, width, heads, layers, activation, inner width
    (101, 32, 64, 4, 2, 'gelu_new', None), (50, 40, 48, 3, 3, 'relu', None), (77, 24, 32, 2, 1, 'gelu', 80),
    (64, 16, 24, 6, 2, 'gelu_pytorch_tanh', 40)]


def random_gpt2(V, P, d, H, N, act, inner, seed=0, dtype=torch.float32):
    "A transformers GPT2LMHeadModel of that size with every weight moved off its initialization (a swapped tensor cannot hide)."
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V, n_positions=P, n_embd=d, n_head=H, n_layer=N, activation_function=act, n_inner=inner,
                     resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, bos_token_id=0, eos_token_id=0, layer_norm_epsilon=1e-5 * (seed + 1))
    model = GPT2LMHeadModel(cfg).eval().to(dtype)
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('dtype,tol', [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_logits_equal_transformers_gpt2(size, dtype, tol):
    theirs = random_gpt2(*size, seed=SIZES.index(size), dtype=dtype)
    ours = from_gpt2(theirs)
    assert next(ours.parameters()).dtype == dtype and not ours.training
    assert ours.head.weight is ours.embed.weight and ours.config.layer_norm_eps == theirs.config.layer_norm_epsilon
    idx = torch.randint(0, size[0], (3, size[1]), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(): ours_logits, their_logits = ours(idx), theirs(idx).logits
    assert (ours_logits - their_logits).abs().max().item() < tol


def test_an_untied_gpt2_gets_its_own_output_layer():
    theirs = random_gpt2(*SIZES[0], seed=5)
    theirs.config.tie_word_embeddings = False
    untied = GPT2LMHeadModel(theirs.config).eval()
    with torch.no_grad():
        for p in untied.parameters(): p.add_(0.1 * torch.randn_like(p))
    assert untied.lm_head.weight.data_ptr() != untied.transformer.wte.weight.data_ptr()
    ours = from_gpt2(untied)
    assert not ours.config.tie_embeddings and ours.head.weight is not ours.embed.weight
    idx = torch.randint(0, SIZES[0][0], (2, 20))
    with torch.no_grad(): assert (ours(idx) - untied(idx).logits).abs().max() < 1e-5


def test_greedy_continuations_equal_transformers_generate_with_and_without_the_cache():
    theirs = random_gpt2(97, 80, 48, 4, 3, 'gelu_new', None, seed=3)
    ours = from_gpt2(theirs)
    prompt = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(2))
    expected = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=50, do_sample=False,
                               pad_token_id=0, eos_token_id=None)
    assert expected.shape == (2, 62)
    for use_cache in (True, False):
        assert torch.equal(generate(ours, prompt, 50, temperature=0, use_cache=use_cache), expected)


def test_from_gpt2_reads_a_state_dict_and_a_saved_folder_without_pickle(tmp_path):
    theirs = random_gpt2(*SIZES[0], seed=4)
    idx = torch.randint(0, SIZES[0][0], (2, 20))
    with torch.no_grad(): want = theirs(idx).logits
    by_state = from_gpt2(theirs.state_dict(), config=theirs.config)
    by_dict = from_gpt2({k.removeprefix('transformer.'): v for k, v in theirs.state_dict().items()}, config=theirs.config.to_dict())
    theirs.save_pretrained(tmp_path)                       # transformers writes config.json and model.safetensors
    assert (tmp_path / 'model.safetensors').is_file() and not list(tmp_path.glob('*.bin'))
    by_folder = from_gpt2(str(tmp_path))
    for model in (by_state, by_dict, by_folder):
        with torch.no_grad(): torch.testing.assert_close(model(idx), want, atol=1e-5, rtol=0)


def test_from_gpt2_refuses_what_it_cannot_hold(tmp_path):
    theirs = random_gpt2(*SIZES[1])
    state, cfg = theirs.state_dict(), theirs.config.to_dict()
    with pytest.raises(ValueError, match=r"lacks 'h.1.mlp.c_fc.weight' \(expected shape \(48, 192\)\)"):
        from_gpt2({k: v for k, v in state.items() if k != 'transformer.h.1.mlp.c_fc.weight'}, config=cfg)
    with pytest.raises(ValueError, match=r"'h.0.attn.c_attn.weight' has shape \(48, 96\), expected \(48, 144\)"):
        from_gpt2({**state, 'transformer.h.0.attn.c_attn.weight': torch.zeros(48, 96)}, config=cfg)
    with pytest.raises(ValueError, match="does not say how many heads.*pass config="): from_gpt2(state)
    with pytest.raises(ValueError, match="describes a 'bert' model; from_gpt2 reads GPT-2"): gpt2_config({**cfg, 'model_type': 'bert'})
    with pytest.raises(ValueError, match=r"GPT-2 tensor 'lm_head.weight' has shape \(50, 47\), expected \(50, 48\)"):
        from_gpt2({**state, 'lm_head.weight': torch.zeros(50, 47)}, config={**cfg, 'tie_word_embeddings': False})
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"): gpt2_config({**cfg, 'scale_attn_by_inverse_layer_idx': True})
    with pytest.raises(ValueError, match="activation_function 'tanh'"): gpt2_config({**cfg, 'activation_function': 'tanh'})
    with pytest.raises(ValueError, match="lacks n_head"): gpt2_config({k: v for k, v in cfg.items() if k != 'n_head'})
    (tmp_path / 'config.json').write_text(json.dumps(cfg))
    (tmp_path / 'model.safetensors').write_bytes(b'\x80\x04not safetensors')   # a pickle under the safetensors name
    with pytest.raises(ValueError, match="is a pickle"): from_gpt2(str(tmp_path))


def test_a_gpt_is_the_course_blocks_causal_and_counted():
    from transformer_tutorial.layers import EncoderLayer
    from transformer_tutorial.multi_head import MultiHeadAttention
    torch.manual_seed(0)
    for cfg in (GPTConfig(50, 16, 32, 4, 2, 128), GPTConfig(83, 64, 96, 3, 3, 200, positions='sinusoidal', activation='relu')):
        model = GPT.from_config(cfg).eval()
        assert all(type(l) is EncoderLayer and type(l.self_attn) is MultiHeadAttention and l.norm_first for l in model.layers)
        assert gpt_parameter_count(cfg) == sum(p.numel() for p in model.parameters())
        with record_attention(model), FlopCounterMode(display=False) as counter:  # the teaching path: attention in explicit matmuls
            model(torch.zeros(1, cfg.max_len, dtype=torch.long))
        assert counter.get_total_flops() == cfg.max_len * gpt_flops_per_token(cfg)
        idx = torch.randint(0, cfg.vocab_size, (2, 12))
        later = idx.clone(); later[:, 6:] = (idx[:, 6:] + 1) % cfg.vocab_size
        torch.testing.assert_close(model(later)[:, :6], model(idx)[:, :6])   # positions 0..5 do not read 6..11
        assert not torch.allclose(model(later)[:, 6], model(idx)[:, 6])
    with pytest.raises(ValueError, match="positions must be one of learned, sinusoidal, rope, got 'alibi'"): GPT(10, positions='alibi')
    with pytest.raises(ValueError, match="17 tokens, more than the model's context of max_len=16"): GPT(10, 16, 16, 2, 1, 32)(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 10\)"): GPT(10, 16, 16, 2, 1, 32)(torch.full((1, 3), 10))


def test_the_names_that_moved_are_still_importable_from_gpt():
    "sampling (chapter 17a) and gpt2 (chapter 17b) were part of gpt.py: its old names are the new modules' objects."
    import transformer_tutorial, transformer_tutorial.gpt as gpt, transformer_tutorial.sampling as sampling, transformer_tutorial.gpt2 as gpt2
    from transformer_tutorial.gpt import generate as old_generate, from_gpt2 as old_from_gpt2
    assert old_generate is sampling.generate and old_from_gpt2 is gpt2.from_gpt2
    for name in ('top_k_filter', 'top_p_filter', 'sample_next', 'gpt_decode_step'): assert getattr(gpt, name) is getattr(sampling, name)
    for name in ('gpt2_config', 'load_gpt2_state'): assert getattr(gpt, name) is getattr(gpt2, name)
    assert transformer_tutorial.generate is sampling.generate and transformer_tutorial.from_llama.__module__ == 'transformer_tutorial.llama'
    with pytest.raises(AttributeError, match="module 'transformer_tutorial.gpt' has no attribute 'generat'"): gpt.generat


def test_top_k_keeps_k_and_top_p_keeps_the_smallest_set_reaching_p():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(200, 30, generator=g) * 3
    for k in (1, 5, 30):
        kept = top_k_filter(logits, k).isfinite()
        assert (kept.sum(-1) == k).all()
        assert torch.equal(kept, torch.zeros_like(kept).scatter(-1, logits.topk(k, -1).indices, True))
    probs = logits.softmax(-1)
    for p in (0.1, 0.5, 0.9, 0.999):
        kept = top_p_filter(logits, p).isfinite()
        n = kept.sum(-1)
        csum = probs.sort(-1, descending=True).values.cumsum(-1)          # (200, 30): the mass of the m most likely, at m - 1
        mass = lambda m: torch.where(m > 0, csum.gather(-1, (m - 1).clamp(min=0)[:, None])[:, 0], torch.zeros(()))
        assert (mass(n) >= p - 1e-6).all() and (mass(n - 1) < p).all()       # reaches p, and one fewer would not
        assert torch.equal(kept, probs >= probs.where(kept, 2).min(-1, keepdim=True).values)   # the kept are the most likely
    assert torch.equal(top_p_filter(logits, 1.0), logits)


def test_sampling_one_seed_one_text_and_temperature_zero_is_greedy():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]]).expand(4000, -1)
    draw = lambda seed, **kw: sample_next(logits, generator=torch.Generator().manual_seed(seed), **kw)
    assert torch.equal(draw(0), draw(0)) and not torch.equal(draw(0), draw(1))
    torch.testing.assert_close(torch.bincount(draw(0), minlength=5) / 4000., logits[0].softmax(-1), atol=0.03, rtol=0)
    assert set(draw(0, top_k=2).tolist()) == {0, 1} and set(draw(0, top_p=0.01).tolist()) == {0}
    assert (draw(0, temperature=0) == 0).all()
    hot, cold = draw(0, temperature=5.0), draw(0, temperature=0.2)
    assert (hot != 0).float().mean() > 0.6 > 0.1 > (cold != 0).float().mean()


@pytest.fixture(scope='module')
def small_gpt():
    torch.manual_seed(0)
    return GPT(40, 48, 32, 4, 2, 64).eval()


def test_generate_with_the_cache_equals_without_and_the_cache_equals_the_forward_pass(small_gpt):
    prompt = torch.randint(0, 40, (3, 7), generator=torch.Generator().manual_seed(0))
    for kw in ({'temperature': 0}, {'temperature': 0.9, 'top_k': 10}, {'temperature': 1.3, 'top_p': 0.8}):
        a = generate(small_gpt, prompt, 30, generator=5, **kw)
        assert a.shape == (3, 37) and torch.equal(a[:, :7], prompt)
        assert torch.equal(a, generate(small_gpt, prompt, 30, generator=5, use_cache=False, **kw))
        assert torch.equal(a, generate(small_gpt, prompt, 30, generator=torch.Generator().manual_seed(5), **kw))
    seq = generate(small_gpt, prompt, 41, temperature=0)
    cache = KVCache(small_gpt, None, 48, batch_size=3)
    steps = [gpt_decode_step(small_gpt, seq[:, :9], cache)] + [gpt_decode_step(small_gpt, seq[:, t:t + 1], cache) for t in range(9, 48)]
    with torch.no_grad(): torch.testing.assert_close(torch.cat(steps, 1), small_gpt(seq), atol=1e-5, rtol=1e-5)
    assert generate(small_gpt, prompt[0], 5).shape == (12,)                    # a 1-D prompt gives a 1-D text
    long = generate(small_gpt, prompt, 100, temperature=0.7, generator=1, slide=True)  # past the context of 48
    assert long.shape == (3, 107) and torch.equal(long[:, :48], generate(small_gpt, prompt, 41, temperature=0.7, generator=1))
    assert torch.equal(long, generate(small_gpt, prompt, 100, temperature=0.7, generator=1, slide=True, use_cache=False))
    greedy = generate(small_gpt, prompt, 100, temperature=0, slide=True)
    with torch.no_grad(): last = small_gpt(greedy[:, -49:-1])[:, -1]             # the last token: read from the 48 before it alone
    assert torch.equal(greedy[:, -1], last.argmax(-1))


@pytest.mark.parametrize('kwargs,message', [
    ({'max_new_tokens': 0}, 'max_new_tokens must be a positive integer'),
    ({'max_new_tokens': 42}, r'a prompt of 7 tokens and 42 new ones need 49 positions.*at most 41 new tokens, or slide=True'),
    ({'temperature': -1.0}, r'temperature must be a number >= 0 \(0 means greedy\), got -1.0'),
    ({'temperature': float('nan')}, 'temperature must be a number >= 0'),
    ({'top_k': 0}, 'top_k must be a positive integer'),
    ({'top_k': 41}, r'top_k=41 is larger than the vocabulary \(40 tokens\): at most 40'),
    ({'top_p': 0.0}, r'top_p must be in \(0, 1\], got 0.0'),
    ({'top_p': 1.5}, r'top_p must be in \(0, 1\], got 1.5'),
])
def test_generate_refuses_bad_settings(small_gpt, kwargs, message):
    settings = {'max_new_tokens': 5, **kwargs}
    with pytest.raises(ValueError, match=message): generate(small_gpt, torch.zeros(1, 7, dtype=torch.long), **settings)


def test_generate_refuses_bad_prompts_and_recording_with_the_cache(small_gpt):
    with pytest.raises(ValueError, match=r'the prompt must be token ids shaped \(B, L\) with L >= 1, got \(1, 0\)'):
        generate(small_gpt, torch.zeros(1, 0, dtype=torch.long), 5)
    with pytest.raises(ValueError, match=r'outside the vocabulary \[0, 40\)'): generate(small_gpt, torch.tensor([[3, 40]]), 5)
    with record_attention(small_gpt) as maps:
        with pytest.raises(ValueError, match='inside record_attention.*use_cache=False'): generate(small_gpt, torch.tensor([[1, 2]]), 5)
        out = generate(small_gpt, torch.tensor([[1, 2]]), 5, temperature=0, use_cache=False)
    assert maps['layers.1.self_attn'].shape == (1, 4, 6, 6) and out.shape == (1, 7)


@pytest.fixture(scope='module')
def task():
    return ShakespeareTask(context=32)


def test_the_shakespeare_task(task):
    from transformer_tutorial.shakespeare import load_shakespeare
    assert len(task.vocab) == 83 and task.vocab.chars == ''.join(sorted(set(load_shakespeare('train'))))
    b = task.batches(5, seed=1)()
    assert b.inputs.shape == b.targets.shape == (5, 32) and torch.equal(b.inputs[:, 1:], b.targets[:, :-1])
    assert torch.equal(task.batches(5, seed=1)().inputs, b.inputs) and task.pad_id == -1 and not task.solved({'loss': 0.0})
    text = task.decode(b.inputs[0]) + task.decode(b.targets[0, -1:])
    assert text in load_shakespeare('train')                                 # a window of the training plays, shifted by one
    again = ShakespeareTask.from_dict(task.to_dict())
    assert again.vocab.chars == task.vocab.chars and again.context == 32
    model = task.make_model(seed=0, d_model=32, num_heads=2, num_layers=1, d_ff=64)
    metrics = task.evaluate(model, n=50)
    assert metrics['n'] == 50 and abs(metrics['loss'] - math.log(83)) < 0.05   # an untrained model guesses uniformly
    assert metrics['bits_per_char'] == pytest.approx(metrics['loss'] / math.log(2))
    full = task.evaluate(model, n=None)                                      # every validation character after the first, once
    assert full['chars'] == len(task.valid_ids) - 1 and full['n'] == len(range(0, len(task.valid_ids) - 33, 16)) + 1
    with pytest.raises(ValueError, match="the prompt is empty"): task.encode('')
    with pytest.raises(ValueError, match=r"character\(s\) outside the vocabulary of 83: '€'"): task.encode('ROMEO€')


def test_the_gpt_learns_shakespeare_through_the_one_training_loop_and_resumes_exactly(task, tmp_path):
    from transformer_tutorial.copy_task import train_task
    from transformer_tutorial.model_files import from_pretrained, read_config
    sizes = dict(d_model=32, num_heads=2, num_layers=1, d_ff=64, batch_size=16, lr=1e-2, warmup=10, schedule_steps=40, n_eval=50,
                 eval_every=20, progress=False)
    model, history, metrics = train_task(task, steps=60, checkpoint=tmp_path / 'full', **sizes)
    assert isinstance(model, GPT) and history['eval_step'] == [20, 40, 60] and metrics['steps'] == 60
    assert history['eval_loss'][-1] < 3.3 < math.log(83) and 'eval_exact' not in history
    assert read_config(tmp_path / 'full')['model_type'] == 'transformer_tutorial_gpt'
    again = from_pretrained(tmp_path / 'full')
    assert type(again) is GPT and again.head.weight is again.embed.weight
    x = task.encode('ROMEO:')
    torch.testing.assert_close(again(x), model.eval()(x))
    train_task(task, steps=40, checkpoint=tmp_path / 'half', **sizes)
    resumed, resumed_history, _ = train_task(task, steps=60, resume=tmp_path / 'half', checkpoint=tmp_path / 'half', **sizes)
    assert resumed_history['loss'] == history['loss'] and resumed_history['eval_loss'] == history['eval_loss']
    for a, b in zip(resumed.state_dict().values(), model.state_dict().values()): assert torch.equal(a, b)


@pytest.fixture(scope='module')
def shakespeare_run(tmp_path_factory):
    "`transformer-tutorial train --task shakespeare --steps 20`, the installed console script run from an empty folder: (folder, stdout)."
    import shutil, subprocess
    cwd = tmp_path_factory.mktemp('empty')
    exe = shutil.which('transformer-tutorial')
    assert exe, 'the console script is not installed'
    done = subprocess.run([exe, 'train', '--task', 'shakespeare', '--tokenizer', 'char', '--steps', '20', '--device', 'cpu', '--json'],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return cwd / 'runs' / 'shakespeare', done.stdout


@pytest.fixture(scope='module')
def shakespeare_bpe_run(tmp_path_factory):
    "The default `transformer-tutorial train --task shakespeare --steps 20`: byte-pair tokens (cli.TOKENIZERS), from an empty folder."
    import shutil, subprocess
    cwd = tmp_path_factory.mktemp('empty')
    done = subprocess.run([shutil.which('transformer-tutorial'), 'train', '--task', 'shakespeare', '--steps', '20', '--device', 'cpu', '--json'],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return cwd / 'runs' / 'shakespeare', done.stdout


def test_cli_trains_on_byte_pair_tokens_by_default_and_scores_characters(shakespeare_bpe_run, capsys):
    from transformer_tutorial.cli import TOKENIZERS
    out, printed = shakespeare_bpe_run
    vocab_size = TOKENIZERS['shakespeare'][1]
    metrics = json.loads(printed.strip().splitlines()[-1])
    assert metrics['steps'] == 20 and metrics['valid_tokens'] < metrics['valid_chars']                     # a token holds several characters
    assert metrics['valid_bits_per_char'] == pytest.approx(metrics['valid_loss'] * metrics['valid_tokens'] / metrics['valid_chars'] / math.log(2))
    assert 'nats per token' in printed and 'bits per character' in printed
    cfg = json.loads((out / 'config.json').read_text())
    assert cfg['vocab_size'] == vocab_size and 'tokenizer' in cfg['task']
    folder = str(out)
    rc, text, _ = generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO€ 🙂', '--max-new-tokens', '30', '--seed', '3')
    assert rc == 0 and text.startswith('ROMEO€ 🙂')                                                   # bytes: no character is outside
    assert generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO€ 🙂', '--max-new-tokens', '30', '--seed', '3')[1] == text
    rc, _, err = generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO', '--top-k', str(vocab_size + 1))
    assert rc == 2 and f'larger than the vocabulary ({vocab_size} tokens)' in err and err.count('\n') == 1


def test_cli_trains_the_language_model_from_an_empty_folder(shakespeare_run):
    out, printed = shakespeare_run
    assert sorted(p.name for p in out.iterdir()) == ['config.json', 'loss.png', 'model.safetensors', 'training_state.safetensors']
    metrics = json.loads(printed.strip().splitlines()[-1])
    assert metrics['task'] == 'shakespeare' and metrics['steps'] == 20 and metrics['n'] == 200 and 2.5 < metrics['valid_loss'] < math.log(83)
    assert 'loss' not in metrics and metrics['valid_chars'] == 200 * 32    # the validation loss, named so, on the second halves of 200 windows
    assert 'validation loss' in printed and 'nats per character' in printed and 'exact match' not in printed
    cfg = json.loads((out / 'config.json').read_text())
    assert cfg['model_type'] == 'transformer_tutorial_gpt' and cfg['max_len'] == 64 and cfg['task']['name'] == 'shakespeare'


def generated(capsys, *args):
    from transformer_tutorial.cli import main
    capsys.readouterr()
    rc = main(['generate', *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_cli_generate_one_seed_one_text(shakespeare_run, capsys):
    folder = str(shakespeare_run[0])
    rc, a, _ = generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO:', '--max-new-tokens', '40', '--temperature', '0.8',
                         '--top-k', '20', '--top-p', '0.95', '--seed', '3')
    assert rc == 0 and a.startswith('ROMEO:') and len(a) == len('ROMEO:') + 40 + 1
    assert generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO:', '--max-new-tokens', '40', '--temperature', '0.8',
                     '--top-k', '20', '--top-p', '0.95', '--seed', '3')[1] == a
    assert generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO:', '--max-new-tokens', '40', '--temperature', '0.8',
                     '--seed', '4')[1] != a
    greedy = [generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO:', '--max-new-tokens', '20', '--temperature', '0',
                        '--seed', s)[1] for s in ('1', '2')]
    assert greedy[0] == greedy[1]                               # temperature 0 is greedy: the seed does not matter
    rc, long_text, _ = generated(capsys, '--checkpoint', folder, '--prompt', 'ROMEO:', '--max-new-tokens', '100', '--seed', '1')
    assert rc == 0 and len(long_text) == 6 + 100 + 1            # past the 64-character context (and print's newline): it slides by default, as nanoGPT crops


@pytest.mark.parametrize('args,message', [
    (['--prompt', 'ROMEO€'], r"outside the vocabulary of 83: '€'"),
    (['--prompt', ''], 'the prompt is empty'),
    (['--temperature', '-1'], r'--temperature must be a number >= 0 \(0 means greedy\)'),
    (['--top-k', '84'], r'--top-k=84 is larger than the vocabulary \(83 tokens\): at most 83'),
    (['--top-p', '0'], r'--top-p must be in \(0, 1\], got 0.0'),
    (['--top-p', '1.5'], r'--top-p must be in \(0, 1\], got 1.5'),
    (['--max-new-tokens', '59', '--no-slide', None], r'a prompt of 6 tokens and 59 new ones need 65 positions, but the model reads at most '
                                                     r'max_len=64: ask for at most 58 new tokens, or leave out --no-slide to read only the last 64'),
    (['--prompt', 'A' * 65], r'the prompt has 65 tokens, more than the model reads \(max_len=64\)'),
])
def test_cli_generate_refuses_bad_input_in_one_line(shakespeare_run, capsys, args, message):
    import re
    base = {'--prompt': 'ROMEO:'}
    settings = dict(zip(args[::2], args[1::2]))
    flat = [x for k, v in {**base, **settings}.items() for x in ((k,) if v is None else (k, v))]   # None: a flag without a value
    before = sorted((p.name, p.stat().st_mtime_ns) for p in shakespeare_run[0].iterdir())
    rc, out, err = generated(capsys, '--checkpoint', str(shakespeare_run[0]), *flat)
    assert rc == 2 and out == '' and re.search(message, err) and err.count('\n') == 1 and 'Traceback' not in err, err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in shakespeare_run[0].iterdir()) == before   # nothing on disk touched


@pytest.mark.parametrize('args,message', [
    (['--max-new-tokens', '0'], 'argument --max-new-tokens: must be a positive integer, got 0'),
    (['--top-k', '0'], 'argument --top-k: must be a positive integer, got 0'),
])
def test_cli_generate_argparse_errors_exit_2(shakespeare_run, capsys, args, message):
    from transformer_tutorial.cli import main
    with pytest.raises(SystemExit) as e: main(['generate', '--checkpoint', str(shakespeare_run[0]), '--prompt', 'A', *args])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_cli_decode_and_generate_name_each_other(shakespeare_run, tmp_path, capsys):
    from transformer_tutorial.cli import main
    assert main(['decode', '--checkpoint', str(shakespeare_run[0]), 'ROMEO']) == 2
    err = capsys.readouterr().err
    assert 'holds a shakespeare language model' in err and 'transformer-tutorial generate --checkpoint' in err and err.count('\n') == 1
    assert main(['train', '--steps', '5', '--out', str(tmp_path / 'copy'), '--device', 'cpu']) == 0
    capsys.readouterr()
    rc, _, err = generated(capsys, '--checkpoint', str(tmp_path / 'copy'), '--prompt', '3 5')
    assert rc == 2 and 'holds a copy model, an encoder-decoder' in err and 'transformer-tutorial decode' in err


def test_the_language_model_trains_alike_in_one_process_and_as_a_data_parallel_job(task):
    from transformer_tutorial.copy_task import train_task
    from transformer_tutorial.data_parallel import train_data_parallel
    kw = dict(steps=20, eval_every=10, n_eval=50, progress=False, d_model=32, num_heads=2, num_layers=1, d_ff=64, batch_size=16, device='cpu')
    _, one, m1 = train_task(task, **kw)
    _, job, m2 = train_data_parallel(task, accumulate=2, **kw)     # one process, each batch in two micro-batches
    assert one['eval_step'] == job['eval_step'] == [10, 20] and one['lr'] == job['lr']
    assert one['loss'] == pytest.approx(job['loss'], rel=1e-4) and m1['loss'] == pytest.approx(m2['loss'], rel=1e-4)


def test_the_cli_trains_the_language_model_under_torchrun(tmp_path):
    from transformer_tutorial.data_parallel import run_torchrun
    from transformer_tutorial.model_files import load_training_state
    out = tmp_path / 'shakespeare-2'
    r = run_torchrun('-m', 'transformer_tutorial.cli', 'train', '--task', 'shakespeare', '--steps', '10', '--device', 'cpu', '--out', str(out),
                     '--json', nproc_per_node=2, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    metrics = json.loads(r.stdout.splitlines()[-1])
    assert metrics['task'] == 'shakespeare' and metrics['steps'] == 10 and r.stdout.count('training the shakespeare task') == 1
    state = load_training_state(out)
    assert state['world_size'] == 2 and state['run']['batch_size'] == 32 and len(state['history']['loss']) == 10
