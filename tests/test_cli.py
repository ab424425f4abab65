"The transformer-tutorial command line, in-process and as the installed console script."
import contextlib, io, json, shutil, subprocess, sys, types
from dataclasses import dataclass
import pytest, torch
from transformer_tutorial.cli import main, UsageError
from transformer_tutorial.copy_task import CopyTask
from transformer_tutorial.training import PAD, END, Task


@pytest.fixture(scope='module')
def twenty_steps(tmp_path_factory):
    "A copy run of 20 steps (seed 1), half trained: its folder and what `train --json` printed."
    out, printed = tmp_path_factory.mktemp('cli') / 'run', io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = main(['train', '--steps', '20', '--out', str(out), '--json', '--device', 'cpu', '--seed', '1'])
    assert rc == 0
    return out, printed.getvalue()


@pytest.fixture(scope='module')
def run_dir(twenty_steps): return twenty_steps[0]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    "A copy model trained by the CLI to 100% held-out exact match (about 15 s)."
    out = tmp_path_factory.mktemp('cli') / 'copy'
    assert main(['train', '--out', str(out), '--device', 'cpu']) == 0
    return out


def decoded(capsys, *args):
    "What `transformer-tutorial decode ARGS` prints, after checking that it succeeded."
    capsys.readouterr()
    assert main(['decode', *args]) == 0
    return capsys.readouterr().out


def test_train_writes_files_and_json(twenty_steps):
    run_dir, out = twenty_steps
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics['steps'] == 20 and metrics['n'] == 1000 and metrics['task'] == 'copy'
    assert 0 <= metrics['exact_match'] <= metrics['token_accuracy'] <= 1
    assert 'token accuracy' in out
    assert sorted(p.name for p in run_dir.iterdir()) == ['attention.png', 'config.json', 'loss.png', 'model.safetensors', 'training_state.safetensors']
    assert (run_dir / 'loss.png').read_bytes()[:4] == b'\x89PNG'


def test_decode_good_and_bad(trained, run_dir, capsys):
    "A trained copy model decodes what it is given back; tokens it cannot take are one-line usage errors."
    for tokens in ('3 5 7 12', '12 11 10 9 8 7 6 5 4 3', '4'):
        assert decoded(capsys, '--checkpoint', str(trained), tokens) == tokens + '\n'
    assert decoded(capsys, '--checkpoint', str(trained), '3, 5,7') == '3 5 7\n'
    assert main(['decode', '--checkpoint', str(run_dir), '3 5 13']) == 2
    err = capsys.readouterr().err
    assert 'token 13 is outside the vocabulary; data tokens are 3..12' in err and 'Traceback' not in err
    assert main(['decode', '--checkpoint', str(run_dir), '3 2']) == 2
    assert 'special token' in capsys.readouterr().err
    assert main(['decode', '--checkpoint', str(run_dir / 'missing'), '3']) == 2
    assert 'no model folder or file at' in capsys.readouterr().err


def test_copy_task_reads_typed_tokens():
    "What a person types at `decode` for a copy model: the task's `encode`, with messages naming the bad token."
    task = CopyTask()
    assert task.encode('3 4, 12').tolist() == [[3, 4, 12]]
    for text, msg in (('3 x', "token 'x' is not an integer; data tokens are 3..12"), ('  ', 'no tokens given'),
                      (' '.join(['3'] * 11), '11 tokens given; this model was trained on at most 10'),
                      ('3 1', 'token 1 is a special token (0 pad, 1 start, 2 end); data tokens are 3..12')):
        with pytest.raises(ValueError) as e: task.encode(text)
        assert msg in str(e.value)


def test_make_assignments_is_wired(monkeypatch, tmp_path, capsys):
    calls = []
    fake = types.ModuleType('transformer_tutorial.assignments')
    fake.make_assignments = lambda out_dir, source=None, force=False: calls.append((out_dir, source, force)) or []
    monkeypatch.setitem(sys.modules, 'transformer_tutorial.assignments', fake)
    assert main(['make-assignments', str(tmp_path / 'a'), '--source', 'nbs', '--force']) == 0
    assert calls == [(str(tmp_path / 'a'), 'nbs', True)]


def test_console_script_bad_token_exit_code(trained):
    "The installed console script: a token the vocabulary lacks, a missing folder and an unknown task exit with 2 and one message."
    exe = shutil.which('transformer-tutorial')
    assert exe, "the console script transformer-tutorial is not on PATH: install the package (pip install -e .)"
    r = subprocess.run([exe, 'decode', '--checkpoint', str(trained), '3 99'], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (2, '') and 'Traceback' not in r.stderr
    assert r.stderr == 'transformer-tutorial decode: error: token 99 is outside the vocabulary; data tokens are 3..12\n'
    r = subprocess.run([exe, 'decode', '--checkpoint', str(trained / 'nope'), '3'], capture_output=True, text=True)
    assert r.returncode == 2 and 'no model folder or file at' in r.stderr and 'Traceback' not in r.stderr
    r = subprocess.run([exe, 'train', '--task', 'translate'], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (2, "transformer-tutorial train: error: unknown task 'translate'; the tasks are copy, reverse, number-words, shakespeare\n")
    r = subprocess.run([exe, 'decode', '--checkpoint', str(trained), '3 5 7'], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, '3 5 7\n')


@pytest.mark.parametrize('args, msg', [
    (['train', '--device', 'tpu'], "unknown device 'tpu'"),
    (['train', '--device', 'cuda:99' if __import__('torch').cuda.is_available() else 'cuda'], 'CUDA'),
    (['train', '--out', __file__], 'is a file; give a folder'),
])
def test_train_bad_arguments_get_one_line(args, msg, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert msg in err and 'Traceback' not in err and err.count('\n') == 1


@pytest.mark.parametrize('value, msg', [(str(2 ** 64), 'between 0 and 2**63 - 1'), ('-1', 'between 0'), ('x', 'not an integer')])
def test_seed_out_of_range_is_a_usage_error(value, msg, capsys):
    with pytest.raises(SystemExit) as e: main(['train', '--seed', value])
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_make_assignments_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / 'class'
    assert main(['make-assignments', str(out)]) == 0
    edited = out / 'ex01_attention.ipynb'
    edited.write_text(edited.read_text() + ' ')
    assert main(['make-assignments', str(out)]) == 2
    err = capsys.readouterr().err
    assert 'already holds ex01_attention.ipynb' in err and '--force' in err and 'Traceback' not in err
    assert main(['make-assignments', str(out), '--force']) == 0
    assert (out / 'ex01_attention.ipynb.bak').read_text().endswith(' ')  # the edited notebook is kept
    assert main(['make-assignments', str(edited)]) == 2
    assert 'is a file; give a folder' in capsys.readouterr().err


def test_ctrl_c_saves_progress(tmp_path, monkeypatch, capsys):
    "Ctrl-C during training: the progress is saved, the message says where, exit code 130."
    import transformer_tutorial.copy_task as loop  # the CLI trains through train_task, the one loop
    def interrupt(*a, **kw): raise KeyboardInterrupt  # Ctrl-C right after the first 20 steps
    monkeypatch.setattr(loop, 'evaluate', interrupt)
    out = tmp_path / 'run'
    assert main(['train', '--steps', '20', '--out', str(out), '--device', 'cpu']) == 130
    err = capsys.readouterr().err
    assert 'interrupted after 20 steps' in err and f'saved in {out}' in err and 'Traceback' not in err
    from transformer_tutorial.model_files import load_checkpoint
    _, state = load_checkpoint(out)
    assert state['step'] == 20 and state['metrics']['interrupted']


def test_decode_with_a_beam(trained, run_dir, capsys):
    "--beam N prints what `beam_search` with N beams gives: the input again for a trained copy model, its own mistakes for a half-trained one."
    from transformer_tutorial.decoding import beam_search
    from transformer_tutorial.model_files import from_pretrained
    assert decoded(capsys, '--checkpoint', str(trained), '--beam', '4', '3 5 7 12') == '3 5 7 12\n'
    model = from_pretrained(run_dir)  # 20 steps of training: it gets things wrong, and the CLI must print those mistakes
    def answers(src): return [' '.join(str(t) for t in beam_search(model, src, src.size(1) + 1, beam_size=k)[0].tolist()
                                       if t not in (PAD, END)) + '\n' for k in (1, 2, 3, 4)]
    g = torch.Generator().manual_seed(0)  # find an input where 1, 2, 3 and 4 beams give this model four different answers
    sources = (torch.randint(3, 13, (1, 8), generator=g) for _ in range(500))
    src, expected = next((s, a) for s in sources for a in [answers(s)] if len(set(a)) == 4)
    tokens = ' '.join(map(str, src[0].tolist()))
    assert [decoded(capsys, '--checkpoint', str(run_dir), '--beam', str(k), tokens) for k in (1, 2, 3, 4)] == expected
    assert main(['decode', '--checkpoint', str(run_dir), '--beam', '14', '3 5']) == 2
    assert 'beam_size=14 is larger than the target vocabulary (13 tokens)' in capsys.readouterr().err
    with pytest.raises(SystemExit): main(['decode', '--checkpoint', str(run_dir), '--beam', '0', '3 5'])
    assert 'must be a positive integer, got 0' in capsys.readouterr().err


def test_number_words_train_and_decode(tmp_path, capsys):
    "A number-words run to 100%: the folder records the task, decode prints the number in words, bad numbers are usage errors."
    out = tmp_path / 'nw'
    assert main(['train', '--task', 'number-words', '--out', str(out), '--device', 'cpu', '--json']) == 0  # about 25 s
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics['task'] == 'number-words' and metrics['exact_match'] == 1.0
    config = json.loads((out / 'config.json').read_text())
    assert config['task'] == {'name': 'number_words', 'max_digits': 6} and config['num_layers'] == 2
    assert config['src_vocab_size'] == 13 and config['tgt_vocab_size'] == 33
    from transformer_tutorial.number_words import number_to_words
    for number in ('7', '40', '1234', '999999'):
        for beam in ('1', '3'):
            assert decoded(capsys, '--checkpoint', str(out), '--beam', beam, number) == number_to_words(int(number)) + '\n'
    for text, msg in (('12a', "holds characters other than the digits 0-9: 'a'"), ('1234567', 'has 7 digits'),
                      ('0042', 'without leading zeros')):
        assert main(['decode', '--checkpoint', str(out), text]) == 2
        err = capsys.readouterr().err
        assert msg in err and 'Traceback' not in err and err.startswith('transformer-tutorial decode: error:')


@dataclass
class Sort(Task):
    "Sort up to `max_len` data tokens: a task added in one place, this class, and one line in the command line's registry."
    vocab_size: int = 10
    max_len: int = 6
    name = 'sort'

    def __post_init__(self):
        self.src_vocab_size = self.tgt_vocab_size = self.vocab_size
        self.max_src_len, self.max_tgt_len = self.max_len, self.max_len + 1

    def sample(self, batch_size, generator=None):
        n = torch.randint(1, self.max_len + 1, (batch_size,), generator=generator)
        data = torch.randint(3, self.vocab_size, (batch_size, self.max_len), generator=generator)
        pad = torch.arange(self.max_len)[None] >= n[:, None]                                 # (B, max_len)
        ordered = data.masked_fill(pad, self.vocab_size).sort(1).values.masked_fill(pad, PAD)  # the data first, in order
        tgt = torch.cat([ordered, torch.full((batch_size, 1), PAD)], 1)
        tgt[torch.arange(batch_size), n] = END
        return data.masked_fill(pad, PAD), tgt

    def to_dict(self): return {'name': 'sort', 'vocab_size': self.vocab_size, 'max_len': self.max_len}
    def encode(self, text): return torch.tensor([[int(t) for t in text.split()]])
    def decode(self, ids): return ' '.join(str(t) for t in (ids[:ids.index(END)] if END in ids else ids) if t != PAD)


def test_a_new_task_is_one_class_and_one_registry_line(monkeypatch, tmp_path, capsys):
    "Sorting, registered with one line, trains from the command line, is recorded in its folder, and decodes sorted."
    import transformer_tutorial.cli as cli
    monkeypatch.setitem(cli.TASKS, 'sort', (lambda: Sort(), {}))   # the one line
    out = tmp_path / 'sort'
    assert main(['train', '--task', 'sort', '--out', str(out), '--device', 'cpu', '--json']) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics['task'] == 'sort' and metrics['exact_match'] > 0.9, metrics
    assert json.loads((out / 'config.json').read_text())['task'] == {'name': 'sort', 'vocab_size': 10, 'max_len': 6}
    assert cli.task_from_config(Sort().to_dict()) == Sort()
    for text, expected in (('9 3 5', '3 5 9'), ('4 4 3 8 7 6', '3 4 4 6 7 8'), ('5', '5')):
        for beam in ('1', '3'): assert decoded(capsys, '--checkpoint', str(out), '--beam', beam, text) == expected + '\n'
    monkeypatch.delitem(cli.TASKS, 'sort')
    assert main(['decode', '--checkpoint', str(out), '3 4']) == 2
    assert "a task named 'sort', which this version does not know; it knows copy, number_words" in capsys.readouterr().err


def test_task_from_config():
    "A folder's task comes back through the registry, version 0.1's unnamed copy task too; a task that does not fit is one clear error."
    from transformer_tutorial.cli import task_from_config
    from transformer_tutorial.number_words import NumberWords
    assert task_from_config({'name': 'copy', 'vocab_size': 9, 'min_len': 2, 'max_len': 5, 'reverse': True}) == CopyTask(9, 2, 5, True)
    assert task_from_config({'name': 'number_words', 'max_digits': 3}) == NumberWords(3)
    assert task_from_config({'vocab_size': 13, 'max_len': 10}) == task_from_config(None) == CopyTask()
    with pytest.raises(ValueError, match=r"config.json's task .* does not fit CopyTask: .*'colour'"):
        task_from_config({'name': 'copy', 'colour': 3})


@pytest.mark.parametrize('task', ['copy', 'reverse'])
@pytest.mark.parametrize('flag', [[], ['--compile']])
def test_copy_tasks_train_with_the_fast_recipe(task, flag, monkeypatch, tmp_path):
    "`train --task copy` (and reverse) hands chapter 20's FAST_COPY and the --compile flag to the one training loop."
    import transformer_tutorial.data_parallel as dp
    from transformer_tutorial.fast import FAST_COPY
    class Stop(Exception): pass
    seen = {}
    def record(task, **kwargs): seen.update(kwargs); raise Stop
    monkeypatch.setattr(dp, 'train_data_parallel', record)
    with pytest.raises(Stop): main(['train', '--task', task, '--out', str(tmp_path / 'run'), *flag])
    assert {k: seen[k] for k in FAST_COPY} == FAST_COPY and seen['compile'] == bool(flag)


def test_compile_without_a_compiler_falls_back_with_one_line(tmp_path):
    "`--compile` where torch.compile cannot build (no C++ compiler): one line says it fell back, training goes on, no traceback."
    env = {**__import__('os').environ, 'CXX': str(tmp_path / 'no-such-compiler')}
    r = subprocess.run([sys.executable, '-m', 'transformer_tutorial.cli', 'train', '--steps', '5', '--compile', '--device', 'cpu',
                        '--out', str(tmp_path / 'run')], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    notes = [l for l in r.stdout.splitlines() if l.startswith('note: ')]
    assert len(notes) == 1 and notes[0].startswith('note: torch.compile fell back to the uncompiled model:'), r.stdout
    assert 'Traceback' not in r.stderr and 'after 5 steps' in r.stdout, r.stdout + r.stderr


@pytest.fixture(scope='module')
def qwen_folder(tmp_path_factory):
    "A Qwen2 folder laid out as the Hub serves one: transformers' save_pretrained of a small random model (shards and their index), chapter 16b's Qwen2 tokenizer with Qwen2.5's chat template, and a generation_config.json in the style of Qwen2.5 Instruct's, greedy so that the two libraries can be compared token for token."
    transformers = pytest.importorskip('transformers')
    from transformer_tutorial.hub_families import write_family
    from transformer_tutorial.hub_tokenizer import HubTokenizer
    from transformer_tutorial.shakespeare import load_shakespeare
    folder = tmp_path_factory.mktemp('hub') / 'qwen'
    write_family(folder, 'qwen2', load_shakespeare('train')[:100_000], 600, template='qwen2')
    tok = HubTokenizer.from_files(folder)
    ends = [tok.special_tokens['<|im_end|>'], tok.special_tokens['<|endoftext|>']]
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(vocab_size=len(tok), hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                                                                   num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256,
                                                                   tie_word_embeddings=True, eos_token_id=ends[0], bos_token_id=None))
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.2 * torch.randn_like(p))
        model.lm_head.weight[ends[0]] += 0.5 * model.model.norm.weight   # the end of a turn likely enough to come within 40 tokens
    model.save_pretrained(folder, max_shard_size='60KB')
    (folder / 'generation_config.json').write_text(json.dumps({'do_sample': False, 'eos_token_id': ends, 'pad_token_id': ends[1],
                                                                'repetition_penalty': 1.05, 'max_new_tokens': 40}))
    return folder


def transformers_reply(folder, messages=None, prompt=None):
    "What transformers' own pipeline gives: the tokenizer's chat template (or the prompt encoded), generate with the folder's generation_config, the new ids decoded."
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.Qwen2ForCausalLM.from_pretrained(str(folder)).eval()
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors='pt', return_dict=True)['input_ids'] if messages else \
          tok(prompt, return_tensors='pt')['input_ids']
    out = model.generate(ids, attention_mask=torch.ones_like(ids))
    return tok.decode(out[0, ids.size(1):], skip_special_tokens=True)


def test_chat_and_generate_with_a_hub_folder_say_what_transformers_says(qwen_folder, capsys, monkeypatch):
    assert len(list(qwen_folder.glob('model-*.safetensors'))) > 1
    capsys.readouterr()
    assert main(['chat', '--model', str(qwen_folder), '--message', 'Who art thou?']) == 0
    one = transformers_reply(qwen_folder, [{'role': 'user', 'content': 'Who art thou?'}])
    assert capsys.readouterr().out == one + '\n'
    monkeypatch.setattr(sys, 'stdin', io.StringIO('Who art thou?\nSpeak again.\n'))    # a conversation: the first reply is in the second turn's history
    assert main(['chat', '--model', str(qwen_folder), '--system', 'Answer in verse.']) == 0
    system = [{'role': 'system', 'content': 'Answer in verse.'}, {'role': 'user', 'content': 'Who art thou?'}]
    first = transformers_reply(qwen_folder, system)
    second = transformers_reply(qwen_folder, system + [{'role': 'assistant', 'content': first}, {'role': 'user', 'content': 'Speak again.'}])
    assert capsys.readouterr().out == f"{first}\n{second}\n"
    assert main(['generate', '--model', str(qwen_folder), '--prompt', 'ROMEO:']) == 0
    assert capsys.readouterr().out == 'ROMEO:' + transformers_reply(qwen_folder, prompt='ROMEO:') + '\n'


def test_a_hub_id_fetches_every_file_a_folder_is_read_from(qwen_folder, tmp_path, capsys, monkeypatch):
    "`--model OWNER/NAME` asks huggingface_hub (faked here: it serves the folder, keeping only the files the patterns name, as it filters) for the shards, their index, the tokenizer and the generation settings, and nothing else."
    import fnmatch
    hub = pytest.importorskip('huggingface_hub')
    asked = []
    def snapshot_download(repo_id, allow_patterns):
        asked.append(allow_patterns)
        snapshot = tmp_path / repo_id.replace('/', '--')
        snapshot.mkdir()
        for f in qwen_folder.iterdir():
            if any(fnmatch.fnmatch(f.name, p) for p in allow_patterns): shutil.copy(f, snapshot / f.name)
        return str(snapshot)
    monkeypatch.setattr(hub, 'snapshot_download', snapshot_download)
    (qwen_folder / 'pytorch_model.bin').write_bytes(b'not fetched')   # another format's weights, left on the Hub
    try:
        capsys.readouterr()
        assert main(['generate', '--model', 'Qwen/tiny', '--prompt', 'ROMEO:']) == 0
        assert capsys.readouterr().out == 'ROMEO:' + transformers_reply(qwen_folder, prompt='ROMEO:') + '\n'
    finally: (qwen_folder / 'pytorch_model.bin').unlink()
    fetched = {f.name for f in (tmp_path / 'Qwen--tiny').iterdir()}
    assert fetched == {f.name for f in qwen_folder.iterdir()} - {'pytorch_model.bin'} and len(asked) == 1


def test_chat_and_generate_refuse_what_they_cannot_run(qwen_folder, tmp_path, capsys):
    from transformer_tutorial.gpt import GPT
    from transformer_tutorial.model_files import save_pretrained
    save_pretrained(GPT(40, 16, 16, 2, 1, 32), tmp_path / 'gpt')                 # no task: nothing says how text becomes ids
    deepseek = tmp_path / 'deepseek'
    shutil.copytree(qwen_folder, deepseek)
    (deepseek / 'config.json').write_text(json.dumps({**json.loads((qwen_folder / 'config.json').read_text()), 'model_type': 'deepseek_v3'}))
    plain = tmp_path / 'plain'
    shutil.copytree(qwen_folder, plain)
    config = json.loads((plain / 'tokenizer_config.json').read_text())
    (plain / 'tokenizer_config.json').write_text(json.dumps({k: v for k, v in config.items() if k != 'chat_template'}))
    far = tmp_path / 'far'                                                       # an end id past the vocabulary
    shutil.copytree(qwen_folder, far)
    (far / 'generation_config.json').write_text(json.dumps({'eos_token_id': [5, 10 ** 6]}))
    V = json.loads((qwen_folder / 'config.json').read_text())['vocab_size']
    untyped = tmp_path / 'untyped'                                               # a config.json without model_type
    shutil.copytree(qwen_folder, untyped)
    (untyped / 'config.json').write_text(json.dumps({k: v for k, v in json.loads((qwen_folder / 'config.json').read_text()).items() if k != 'model_type'}))
    cases = [(['generate', '--checkpoint', str(tmp_path / 'gpt'), '--prompt', 'Hello'], 'holds a GPT whose config.json names no task'),
             (['generate', '--model', str(far), '--prompt', 'Hi'], rf"^transformer-tutorial generate: error: {far}/generation_config.json: eos_token_id 1000000 "
              rf"is not a token id of the model's vocabulary, 0 to {V - 1} \(config.json's vocab_size {V}\)\n$"),
             (['chat', '--model', str(deepseek), '--message', 'Hi'], "describes a 'deepseek_v3' model; the course runs Llama, Qwen2, Mistral, Qwen3, Phi-3, "
              r"OLMo 2, Mixtral, Qwen3-MoE, Gemma, Gemma 2, Gemma 3 folders .*; the nearest the course reads is Qwen3-MoE \(model_type 'qwen3_moe'\), "
              "without multi-head latent attention and shared experts"),
             (['chat', '--model', str(plain), '--message', 'Hi'], 'has no chat template'),
             (['generate', '--model', str(untyped), '--prompt', 'Hi'], r"untyped/config.json names no model_type; the course runs Llama, "),
             (['generate', '--model', str(qwen_folder / 'model.safetensors.index.json'), '--prompt', 'Hi'],
              rf"model.safetensors.index.json is a file: give the model's folder, {qwen_folder}, which holds config.json"),
             (['chat', '--model', str(qwen_folder), '--message', 'Hi', '--top-p', '2'], r'--top-p must be in \(0, 1\], got 2.0'),
             (['generate', '--model', str(qwen_folder), '--checkpoint', 'x', '--prompt', 'Hi'], 'not allowed with argument')]
    for args, message in cases:
        capsys.readouterr()
        with pytest.raises(SystemExit) if 'not allowed' in message else contextlib.nullcontext():
            assert main(args) == 2
        import re
        assert re.search(message, capsys.readouterr().err), (args, message)


def test_the_reply_streams_in_pieces_that_make_the_whole(qwen_folder):
    from transformer_tutorial.open_models import load_open_model, chat, complete
    m = load_open_model(qwen_folder)
    messages = [{'role': 'user', 'content': 'Who art thou?'}]
    for run in (lambda stream: chat(m, messages, stream=stream), lambda stream: complete(m, 'ROMEO:', stream=stream)):
        pieces = []
        whole = run(pieces.append)
        assert len(pieces) > 1 and ''.join(pieces) == whole == run(None)
