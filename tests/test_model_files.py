"""Model files: safetensors weights and config.json, training state without pickle, atomic writes, and bad files.

Self-contained (no conftest, no repository files): tests/test_installed.py also runs this file in the wheel's
environments (oldest and newest torch), from an empty folder.
"""
import json, math, re, os, pickle, signal, subprocess, sys, textwrap
from pathlib import Path

import pytest
import torch

from transformer_tutorial.model import Transformer
from transformer_tutorial.model_files import (ModelFileError, save_pretrained, from_pretrained, read_header, read_config,
                                              load_weights, save_training_state, load_training_state, resume_training_state,
                                              save_checkpoint, load_checkpoint, load_legacy_checkpoint)
from transformer_tutorial.training import make_optimizer, train
from transformer_tutorial.copy_task import CopyTask, PAD
from transformer_tutorial.cli import main


def small(tie=False, norm_first=True, seed=0, d_model=32):
    torch.manual_seed(seed)
    return Transformer(13, 13, d_model, 4, 2, 64, dropout=0.1, max_len=32, norm_first=norm_first, tie_embeddings=tie)


def same_outputs(a, b):
    x, y = torch.randint(3, 13, (4, 9), generator=torch.Generator().manual_seed(1)), torch.randint(3, 13, (4, 7))
    a.eval(); b.eval()
    with torch.no_grad(): torch.testing.assert_close(a(x, y), b(x, y), atol=0, rtol=0)


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("norm_first", [True, False])
def test_round_trip(tmp_path, tie, norm_first):
    model = small(tie, norm_first)
    save_pretrained(model, tmp_path / "m", task={"vocab_size": 13})
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]
    loaded = from_pretrained(tmp_path / "m")
    same_outputs(model, loaded)
    assert not loaded.training and loaded.config == model.config and read_config(tmp_path / "m")["task"] == {"vocab_size": 13}
    names = [k for k in read_header(tmp_path / "m" / "model.safetensors") if k != "__metadata__"]
    assert ("output.weight" in names) is not tie and "tgt_embed.lut.weight" in names  # a tied tensor is stored once
    assert (loaded.output.weight is loaded.tgt_embed.lut.weight) is tie
    same_outputs(model, from_pretrained(tmp_path / "m" / "model.safetensors"))  # the file names its folder


def test_exact_resume_through_files(tmp_path):
    "Train 12 steps; or train 8, save, load into fresh objects and train 4: the same losses, dropout included."
    def start():
        model = small(seed=3)
        opt, sched = make_optimizer(model, 3e-3, warmup=5)
        return model, opt, sched, CopyTask().batches(16, seed=7)
    torch.manual_seed(11)
    m, o, s, nb = start()
    full = train(m, nb, 12, o, s, PAD, device="cpu", progress=False)
    torch.manual_seed(11)
    m, o, s, nb = start()
    half = train(m, nb, 8, o, s, PAD, device="cpu", progress=False)
    save_checkpoint(tmp_path / "run", m, o, s, half, nb.generator, task={"x": 1}, metrics={"exact": 0.5})
    torch.manual_seed(999)  # the saved RNG state, not this, must drive dropout after the resume
    m2, state = load_checkpoint(tmp_path / "run")
    o2, s2 = make_optimizer(m2, 3e-3, warmup=5)
    nb2 = CopyTask().batches(16, seed=12345)
    resume_training_state(state, o2, s2, nb2.generator)
    rest = train(m2, nb2, 4, o2, s2, PAD, device="cpu", history=state["history"], progress=False)
    assert rest["loss"] == full["loss"] and state["step"] == 8 and state["metrics"] == {"exact": 0.5}
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.json", "model.safetensors", "training_state.safetensors"]


def typed(x):
    "`x` with the type of every key and leaf beside it, so that == tells 1, 1.0 and True apart (and NaN equals NaN)."
    if isinstance(x, dict): return {(type(k), k): typed(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)): return type(x), [typed(v) for v in x]
    if isinstance(x, torch.Tensor): return type(x), x.dtype, tuple(x.shape), x.flatten().tolist()
    return type(x), "nan" if isinstance(x, float) and math.isnan(x) else x


def test_training_state_keeps_types(tmp_path):
    "Tuples, int keys, None, bools, ints, floats (NaN too) and 0-d tensors come back as they went in, types included."
    model = small()
    opt, sched = make_optimizer(model, 1e-3, warmup=3)
    train(model, CopyTask().batches(8), 2, opt, sched, PAD, device="cpu", progress=False)
    extra = {"n": 3, "ratio": 3.0, "done": True, "none": None, "pair": (1, 2.0), "by_id": {7: [False, 0.5]}}
    save_training_state(tmp_path, opt, sched, history={"loss": [float("nan"), 0.1]}, extra=extra)
    state = load_training_state(tmp_path)
    assert typed(state["optimizer"]) == typed(opt.state_dict()) and typed(state["scheduler"]) == typed(sched.state_dict())
    assert typed(state["extra"]) == typed(extra) and type(state["step"]) is int and state["step"] == 2
    nan, loss = state["history"]["loss"]
    assert type(nan) is float and math.isnan(nan) and type(loss) is float and loss == 0.1
    with pytest.raises(TypeError, match=r"state.extra is a object; training state holds tensors"):
        save_training_state(tmp_path, extra=object())


def test_two_files_from_different_steps_are_refused(tmp_path):
    model = small()
    opt, sched = make_optimizer(model, 1e-3, warmup=3)
    h = train(model, CopyTask().batches(8), 2, opt, sched, PAD, device="cpu", progress=False)
    save_checkpoint(tmp_path, model, opt, sched, h)
    h = train(model, CopyTask().batches(8), 1, opt, sched, PAD, device="cpu", history=h, progress=False)
    save_training_state(tmp_path, opt, sched, history=h)  # as if the save was cut off before the weights
    with pytest.raises(ModelFileError, match="weights are from step 2 but the training state from step 3"):
        load_checkpoint(tmp_path)


# --- bad files: one clear message each, naming the file; nothing runs; nothing on disk changes ------------------------

PAYLOAD_MARK = "payload_ran.txt"


class RunsCode:
    "Unpickling this writes a file: what a malicious model file does, harmlessly."
    def __reduce__(self):
        return (exec, (f"open({PAYLOAD_MARK!r}, 'w').write('unpickled')",))


def _tensors(folder):
    from safetensors.torch import load  # from bytes: the file is rewritten next, so it must not stay memory-mapped
    return load((folder / "model.safetensors").read_bytes())


def _save_tensors(folder, tensors):
    from safetensors.torch import save_file
    save_file(tensors, folder / "model.safetensors")


def _set_header_length(folder, n):
    p = folder / "model.safetensors"
    data = p.read_bytes()
    p.write_bytes(n.to_bytes(8, "little") + data[8:])


def _edit_config(folder, **changes):
    p = folder / "config.json"
    cfg = json.loads(p.read_text())
    cfg.update(changes)
    for k, v in changes.items():
        if v is None: del cfg[k]
    p.write_text(json.dumps(cfg))


def _drop(folder, name):
    (folder / name).unlink()


def _pickle_as_safetensors(folder):
    (folder / "model.safetensors").write_bytes(pickle.dumps(RunsCode()))


def _torch_save_as_safetensors(folder):
    torch.save({"model": _tensors(folder), "evil": RunsCode()}, folder / "model.safetensors")


BAD_FILES = [  # (case, how to break a good folder, what the message says)
    ("missing tensor", lambda f: _save_tensors(f, {k: v for k, v in _tensors(f).items() if k != "output.bias"}),
     r"model.safetensors lacks 1 tensor\(s\) that the architecture in config.json needs: output.bias"),
    ("extra tensor", lambda f: _save_tensors(f, {**_tensors(f), "spare": torch.zeros(2)}),
     r"model.safetensors has 1 tensor\(s\) that the architecture in config.json does not: spare"),
    ("wrong shape", lambda f: _save_tensors(f, {**_tensors(f), "output.bias": torch.zeros(14)}),
     r"tensor 'output.bias' has shape \(14,\), but the architecture in config.json needs \(13,\)"),
    ("wrong dtype", lambda f: _save_tensors(f, {**_tensors(f), "output.bias": torch.zeros(13, dtype=torch.int64)}),
     r"tensor 'output.bias' is stored as I64; weights are floating point"),
    ("truncated body", lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:-100]),
     r"model.safetensors: tensor '.*' needs data bytes .* but the file has .* \(truncated\)"),
    ("header longer than the file", lambda f: _set_header_length(f, 10 ** 6),
     r"model.safetensors: the header length says 1,000,000 bytes, but only .* follow \(truncated, or not safetensors\)"),
    ("huge header", lambda f: _set_header_length(f, 2 ** 40),
     r"model.safetensors: the header length says 1,099,511,627,776 bytes, above safetensors' limit of 100,000,000"),
    ("header not JSON", lambda f: (f / "model.safetensors").write_bytes(b"\x04\0\0\0\0\0\0\0{abc"),
     r"model.safetensors: the header is not JSON"),
    ("config.json not JSON", lambda f: (f / "config.json").write_text("{'d_model': 32}"),
     r"config.json is not valid JSON \(Expecting property name"),
    ("config.json lacks a field", lambda f: _edit_config(f, num_layers=None),
     r"config.json lacks field\(s\) \['num_layers'\]; it needs all of"),
    ("config.json field of the wrong type", lambda f: _edit_config(f, d_model="32"),
     r"config.json: d_model is '32', expected int"),
    ("config.json invalid", lambda f: _edit_config(f, num_heads=5),
     r"config.json describes no valid Transformer: d_model \(32\) must be divisible by num_heads \(5\)"),
    ("config.json disagrees with the weights", lambda f: _edit_config(f, d_ff=48),
     r"tensor 'encoder.layers.0.feed_forward.w_1.weight' has shape \(64, 32\), but the architecture in config.json needs"),
    ("config.json with more layers", lambda f: _edit_config(f, num_layers=3),
     r"model.safetensors lacks .* tensor\(s\) that the architecture in config.json needs: encoder.layers.2"),
    ("no config.json", lambda f: _drop(f, "config.json"),
     r"has no config.json; a model folder holds config.json \(the architecture\) and model.safetensors \(the weights\)"),
    ("no model.safetensors", lambda f: _drop(f, "model.safetensors"),
     r"has no model.safetensors; a model folder holds config.json"),
    ("a Git LFS pointer", lambda f: (f / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69b22a\nsize 2471645608\n"),
     r"model.safetensors is a Git LFS pointer, not the weights: the folder was cloned without git-lfs; run `git lfs pull`"),
    ("a web page saved as model.safetensors", lambda f: (f / "model.safetensors").write_text(
        "<!DOCTYPE html>\n<html class=''><head><title>model.safetensors</title></head></html>\n"),
     r"model.safetensors is a web page, not safetensors: the download saved the page that links to the file"),
    ("a pickle renamed model.safetensors", _pickle_as_safetensors,
     r"model.safetensors is a pickle \(torch.save's format\), not safetensors; it was not unpickled"),
    ("a torch.save file renamed model.safetensors", _torch_save_as_safetensors,
     r"model.safetensors is a pickle \(torch.save's format\), not safetensors; it was not unpickled"),
]


@pytest.mark.parametrize("case, breaks, message", BAD_FILES, ids=[c for c, _, _ in BAD_FILES])
def test_bad_model_folder(tmp_path, monkeypatch, case, breaks, message):
    folder = tmp_path / "m"
    save_pretrained(small(), folder)
    breaks(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.chdir(tmp_path)  # where the payload would write its mark
    with pytest.raises(ModelFileError, match=message) as e:
        from_pretrained(folder)
    assert str(folder) in str(e.value) and (e.value.__context__ is None or e.value.__suppress_context__)  # no internals chained
    assert not (tmp_path / PAYLOAD_MARK).exists(), "loading ran code from the file"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before, "loading changed a file"


def test_header_length_that_starts_like_a_pickle(tmp_path):
    "A valid file whose 8-byte length begins 0x80 0x02 (as a pickle does) is read as safetensors, not refused."
    header = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'.ljust(0x0280)
    (tmp_path / "x.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\x80?")
    assert (tmp_path / "x.safetensors").read_bytes()[:2] == b"\x80\x02"
    assert read_header(tmp_path / "x.safetensors")["a"]["shape"] == [1]


def test_missing_path_and_wrong_kind_of_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model folder or file at .*nowhere"): from_pretrained(tmp_path / "nowhere")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelFileError, match="notes.txt is neither a model folder nor a .safetensors file"):
        from_pretrained(tmp_path / "notes.txt")


def test_no_unpickling_on_the_way_to_decode(tmp_path, monkeypatch, capsys):
    "from_pretrained and the CLI's decode read a model folder without torch.load and without any unpickler."
    folder = tmp_path / "m"
    model = small()
    save_pretrained(model, folder, task={"vocab_size": 13, "max_len": 10})
    found = []
    sys.addaudithook(lambda event, args: found.append(event) if event == "pickle.find_class" else None)
    def forbidden(*a, **k): raise AssertionError("unpickling on the model path")
    for obj, name in [(torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")]:
        monkeypatch.setattr(obj, name, forbidden)
    same_outputs(model, from_pretrained(folder))
    assert main(["decode", "--checkpoint", str(folder), "3 5 7"]) == 0
    assert main(["decode", "--checkpoint", str(folder / "model.safetensors"), "3 5 7"]) == 0
    assert not found


def test_hub_repo_id_goes_through_huggingface_hub(tmp_path, monkeypatch):
    "A 'user/name' that is not a local path is fetched with huggingface_hub's snapshot_download (faked here: no network)."
    hub = pytest.importorskip("huggingface_hub")
    save_pretrained(small(), tmp_path / "snapshot")
    calls = []
    def fake(repo_id, allow_patterns): calls.append((repo_id, allow_patterns)); return str(tmp_path / "snapshot")
    monkeypatch.setattr(hub, "snapshot_download", fake)
    monkeypatch.chdir(tmp_path)
    same_outputs(small(), from_pretrained("learner/copy-transformer"))
    assert calls == [("learner/copy-transformer", ["config.json", "model.safetensors", "model.safetensors.index.json",
                                                   "model-*-of-*.safetensors"])]


# --- atomic writes: an interrupted save never replaces the last good file ----------------------------------------------

def test_interrupted_save_keeps_the_previous_files(tmp_path, monkeypatch):
    import transformer_tutorial.utils as utils
    old = small(seed=0)
    save_pretrained(old, tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    def interrupted(fd): raise KeyboardInterrupt  # Ctrl-C after the bytes are written, before the rename
    monkeypatch.setattr(utils.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt): save_pretrained(small(seed=1), tmp_path)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file left, nothing replaced
    same_outputs(old, from_pretrained(tmp_path))


def test_killed_save_leaves_a_loadable_model(tmp_path):
    "SIGKILL a save after the new weights are written and synced, before the rename: the previous model loads, whole."
    script = textwrap.dedent("""
        import os, signal, sys, torch
        from transformer_tutorial.model import Transformer
        from transformer_tutorial.model_files import save_pretrained
        def small(seed):
            torch.manual_seed(seed)
            return Transformer(13, 13, 32, 4, 2, 64, dropout=0.1, max_len=32, norm_first=True, tie_embeddings=False)
        save_pretrained(small(0), sys.argv[1])
        os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # atomic_write's rename of the temporary file
        save_pretrained(small(1), sys.argv[1])
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    stray = [n for n in names if n.startswith(".model.safetensors.") and n.endswith(".tmp")]  # SIGKILL cannot clean up
    assert names == sorted(["config.json", "model.safetensors", *stray]) and len(stray) == 1, names
    same_outputs(small(seed=1), load_weights(small(seed=2), tmp_path / stray[0]))  # the kill came after the new weights
    same_outputs(small(seed=0), from_pretrained(tmp_path))  # the previous model, its values; loading ignores the stray file
    save_pretrained(small(seed=1), tmp_path)
    same_outputs(small(seed=1), from_pretrained(tmp_path))


# --- the model.pt of version 0.1 ---------------------------------------------------------------------------------------

def _legacy_file(path, model, task):
    torch.save({"format": "transformer_tutorial/1", "config": model.config.to_dict(), "model": model.state_dict(),
                "task": task}, path)


def test_legacy_model_pt(tmp_path):
    model = small()
    _legacy_file(tmp_path / "model.pt", model, {"vocab_size": 13, "max_len": 10})
    with pytest.raises(ModelFileError, match=r"model.pt is a pickle-based checkpoint .* transformer-tutorial convert"):
        from_pretrained(tmp_path / "model.pt")
    with pytest.raises(ModelFileError, match=r"has no model.safetensors.*model.pt is an old pickle-based checkpoint"):
        from_pretrained(tmp_path)
    if torch.__version__ < "2.10":
        with pytest.raises(ModelFileError, match=r"before 2.6, CVE-2025-32434.*before 2.10, CVE-2026-24747.*allow_pickle=True"):
            load_legacy_checkpoint(tmp_path / "model.pt")
        with pytest.warns(UserWarning, match="CVE-2025-32434"):
            loaded, task = load_legacy_checkpoint(tmp_path / "model.pt", allow_pickle=True)
    else:
        loaded, task = load_legacy_checkpoint(tmp_path / "model.pt")
    same_outputs(model, loaded)
    assert task == {"vocab_size": 13, "max_len": 10}


def test_legacy_file_with_a_payload_does_not_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.save({"format": "transformer_tutorial/1", "evil": RunsCode()}, tmp_path / "model.pt")
    with pytest.raises(ModelFileError, match="is not a readable transformer_tutorial 0.1 checkpoint"):
        load_legacy_checkpoint(tmp_path / "model.pt", allow_pickle=True)
    assert not (tmp_path / PAYLOAD_MARK).exists()


def test_cli_converts_and_decodes_a_legacy_file(tmp_path, capsys):
    torch.manual_seed(0)
    model = Transformer(13, 13, 32, 4, 1, 64, dropout=0.0, max_len=64)
    with torch.no_grad(): model.output.bias[:3] = -100  # never pad, start or end: decoding prints len + 1 data tokens
    _legacy_file(tmp_path / "model.pt", model, {"vocab_size": 13, "min_len": 1, "max_len": 10, "reverse": False})
    flags = [] if torch.__version__ >= "2.10" else ["--allow-pickle"]
    assert main(["decode", "--checkpoint", str(tmp_path / "model.pt"), *flags, "3 5 7"]) == 0
    out, err = capsys.readouterr()
    assert "convert it once: transformer-tutorial convert" in err and len(out.split()) == 4
    assert main(["convert", str(tmp_path / "model.pt"), str(tmp_path / "new"), *flags]) == 0
    assert "model.safetensors" in capsys.readouterr().out
    same_outputs(model, from_pretrained(tmp_path / "new"))
    assert read_config(tmp_path / "new")["task"]["max_len"] == 10
    assert main(["decode", "--checkpoint", str(tmp_path / "new"), "3 5 7"]) == 0
    assert capsys.readouterr().out.split() == out.split()


def test_the_activation_travels_through_the_files_and_old_configs_mean_relu(tmp_path):
    "A GELU model comes back as a GELU model; a config.json written before the option existed loads as the paper's ReLU."
    torch.manual_seed(0)
    model = Transformer(13, 13, d_model=32, num_heads=4, num_layers=1, d_ff=64, dropout=0.0, activation='gelu_tanh').eval()
    save_pretrained(model, tmp_path / "gelu")
    loaded = from_pretrained(tmp_path / "gelu")
    assert loaded.config.activation == 'gelu_tanh' and loaded.encoder.layers[0].feed_forward.activation == 'gelu_tanh'
    same_outputs(model, loaded)
    old = read_config(tmp_path / "gelu")
    del old["activation"]
    (tmp_path / "gelu" / "config.json").write_text(json.dumps(old))
    assert from_pretrained(tmp_path / "gelu").decoder.layers[0].feed_forward.activation == 'relu'


def test_the_gpt_blocks_travel_through_the_files_and_old_gpt_configs_mean_gpt2(tmp_path):
    "A Llama-block GPT (grouped-query, untied) comes back as itself; a GPT config.json written before the block options loads as GPT-2's block."
    from transformer_tutorial.gpt import GPT
    torch.manual_seed(0)
    llama = GPT(20, 16, 32, 4, 1, 48, positions='rope', activation='swiglu', norm='rms', num_kv_heads=2, rope_base=500.0,
                qkv_bias=False, out_bias=False, ff_bias=False, tie_embeddings=False).eval()
    save_pretrained(llama, tmp_path / "llama")
    back = from_pretrained(tmp_path / "llama")
    x = torch.randint(0, 20, (2, 16))
    assert back.config == llama.config and back.head.weight is not back.embed.weight
    with torch.no_grad(): assert torch.equal(back(x), llama(x))
    gpt2 = GPT(20, 16, 32, 4, 1, 48).eval()
    save_pretrained(gpt2, tmp_path / "gpt2")
    cfg = read_config(tmp_path / "gpt2")
    assert cfg["num_kv_heads"] is None and cfg["norm"] == "layer"
    for key in ("norm", "num_kv_heads", "rope_base", "qkv_bias", "out_bias", "ff_bias", "tie_embeddings"): del cfg[key]
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps(cfg))
    old = from_pretrained(tmp_path / "gpt2")
    assert old.config == gpt2.config and old.head.weight is old.embed.weight
    with torch.no_grad(): assert torch.equal(old(x), gpt2(x))
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({**cfg, "num_kv_heads": "2"}))
    with pytest.raises(ModelFileError, match=r"num_kv_heads is '2', expected int or NoneType"):
        from_pretrained(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({**cfg, "num_kv_heads": 3}))
    with pytest.raises(ModelFileError, match=r"describes no valid GPT: num_kv_heads \(3\) must divide num_heads \(4\)"):
        from_pretrained(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ModelFileError, match=r"describes a 'llama' model.*transformer_tutorial.llama.from_llama"):
        from_pretrained(tmp_path / "gpt2")


def test_a_path_that_looks_local_is_never_sent_to_the_hub(tmp_path, monkeypatch):
    "runs/nope (runs/ exists here), ./x, /x, a/b/c and a\\b fail at once with the path named; owner/name alone may go to the Hub."
    from transformer_tutorial import model_files
    monkeypatch.chdir(tmp_path); (tmp_path / 'runs').mkdir()
    asked = []
    import sys, types
    fake = types.ModuleType('huggingface_hub')
    def snapshot_download(repo_id, **kw): asked.append(repo_id); raise OSError('offline')
    fake.snapshot_download = snapshot_download
    monkeypatch.setitem(sys.modules, 'huggingface_hub', fake)
    for path in ('runs/nope', './runs/nope', '/abs/x', 'a/b/c', 'a\\b', 'owner/', '~/x'):
        with pytest.raises(FileNotFoundError, match=f"no model folder or file at {re.escape(path)}$"): model_files.from_pretrained(path)
    assert asked == []
    with pytest.raises(FileNotFoundError, match='no Hub repo of that name could be fetched'): model_files.from_pretrained('owner/name')
    assert asked == ['owner/name']
