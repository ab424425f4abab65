"The transformer-tutorial command line, in-process and as the installed console script."
import json, shutil, subprocess, sys, types
import pytest
from transformer_tutorial.cli import main, parse_tokens, UsageError


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp('cli') / 'run'
    return out


def test_train_writes_files_and_json(run_dir, capsys):
    rc = main(['train', '--steps', '20', '--out', str(run_dir), '--json', '--device', 'cpu', '--seed', '1'])
    out = capsys.readouterr().out
    assert rc == 0
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics['steps'] == 20 and metrics['n'] == 1000 and metrics['task'] == 'copy'
    assert 0 <= metrics['exact_match'] <= metrics['token_accuracy'] <= 1
    assert 'token accuracy' in out
    assert sorted(p.name for p in run_dir.iterdir()) == ['attention.png', 'config.json', 'loss.png', 'model.safetensors', 'training_state.safetensors']
    assert (run_dir / 'loss.png').read_bytes()[:4] == b'\x89PNG'


def test_decode_good_and_bad(run_dir, capsys):
    if not (run_dir / 'model.safetensors').exists(): main(['train', '--steps', '5', '--out', str(run_dir)])
    capsys.readouterr()
    assert main(['decode', '--checkpoint', str(run_dir), '3 5 7 12']) == 0
    assert all(t.isdigit() for t in capsys.readouterr().out.split())
    assert main(['decode', '--checkpoint', str(run_dir), '3 5 13']) == 2
    err = capsys.readouterr().err
    assert 'token 13 is outside the vocabulary; data tokens are 3..12' in err and 'Traceback' not in err
    assert main(['decode', '--checkpoint', str(run_dir), '3 2']) == 2
    assert 'special token' in capsys.readouterr().err
    assert main(['decode', '--checkpoint', str(run_dir / 'missing'), '3']) == 2
    assert 'no model folder or file at' in capsys.readouterr().err


def test_parse_tokens():
    assert parse_tokens('3 4, 12', 13, 10) == [3, 4, 12]
    with pytest.raises(UsageError, match='not an integer'): parse_tokens('3 x', 13, 10)
    with pytest.raises(UsageError, match='no tokens'): parse_tokens('  ', 13, 10)
    with pytest.raises(UsageError, match='at most 10'): parse_tokens(' '.join(['3'] * 11), 13, 10)


def test_make_assignments_is_wired(monkeypatch, tmp_path, capsys):
    calls = []
    fake = types.ModuleType('transformer_tutorial.assignments')
    fake.make_assignments = lambda out_dir, source=None, force=False: calls.append((out_dir, source, force)) or []
    monkeypatch.setitem(sys.modules, 'transformer_tutorial.assignments', fake)
    assert main(['make-assignments', str(tmp_path / 'a'), '--source', 'nbs', '--force']) == 0
    assert calls == [(str(tmp_path / 'a'), 'nbs', True)]


def test_console_script_bad_token_exit_code(run_dir):
    exe = shutil.which('transformer-tutorial')
    cmd = [exe] if exe else [sys.executable, '-c', 'import sys; from transformer_tutorial.cli import main; sys.exit(main())']
    r = subprocess.run(cmd + ['decode', '--checkpoint', str(run_dir / 'nope'), '3 99'], capture_output=True, text=True)
    assert r.returncode == 2 and 'no model folder or file at' in r.stderr and 'Traceback' not in r.stderr
    r = subprocess.run(cmd + ['train', '--task', 'sort'], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice: 'sort'" in r.stderr


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
    import transformer_tutorial.data_parallel as dp  # the CLI trains through train_data_parallel
    def interrupt(*a, **kw): raise KeyboardInterrupt  # Ctrl-C right after the first 20 steps
    monkeypatch.setattr(dp, 'evaluate', interrupt)
    out = tmp_path / 'run'
    assert main(['train', '--steps', '20', '--out', str(out), '--device', 'cpu']) == 130
    err = capsys.readouterr().err
    assert 'interrupted after 20 steps' in err and f'saved in {out}' in err and 'Traceback' not in err
    from transformer_tutorial.model_files import load_checkpoint
    _, state = load_checkpoint(out)
    assert state['step'] == 20 and state['metrics']['interrupted']


def test_decode_with_a_beam(run_dir, capsys):
    if not (run_dir / 'model.safetensors').exists(): main(['train', '--steps', '5', '--out', str(run_dir)])
    capsys.readouterr()
    assert main(['decode', '--checkpoint', str(run_dir), '--beam', '4', '3 5 7 12']) == 0
    assert all(t.isdigit() for t in capsys.readouterr().out.split())
    assert main(['decode', '--checkpoint', str(run_dir), '--beam', '14', '3 5']) == 2
    assert 'beam_size=14 is larger than the target vocabulary (13 tokens)' in capsys.readouterr().err
    with pytest.raises(SystemExit): main(['decode', '--checkpoint', str(run_dir), '--beam', '0', '3 5'])
    assert 'must be a positive integer, got 0' in capsys.readouterr().err


def test_number_words_train_and_decode(tmp_path, capsys):
    "A number-words run: the folder records the task, decode takes a number and prints words, bad numbers are usage errors."
    out = tmp_path / 'nw'
    assert main(['train', '--task', 'number-words', '--steps', '20', '--out', str(out), '--device', 'cpu', '--json']) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics['task'] == 'number-words' and metrics['steps'] == 20
    config = json.loads((out / 'config.json').read_text())
    assert config['task'] == {'name': 'number_words', 'max_digits': 6} and config['num_layers'] == 2
    assert config['src_vocab_size'] == 13 and config['tgt_vocab_size'] == 33
    from transformer_tutorial.number_words import WORDS
    for beam in ('1', '3'):
        assert main(['decode', '--checkpoint', str(out), '--beam', beam, '1234']) == 0
        assert set(capsys.readouterr().out.split()) <= set(WORDS) | {'<?>'}
    for text, msg in (('12a', "holds characters other than the digits 0-9: 'a'"), ('1234567', 'has 7 digits'),
                      ('0042', 'without leading zeros')):
        assert main(['decode', '--checkpoint', str(out), text]) == 2
        err = capsys.readouterr().err
        assert msg in err and 'Traceback' not in err and err.startswith('transformer-tutorial decode: error:')
