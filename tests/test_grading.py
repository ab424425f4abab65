"""Grading a class (chapter 15a): the integrity flags (imports, attributes, copies, tampering) and what they must not
flag, the wire that keeps verdicts out of the student's kernel, Landlock's confinement, the bad-input table, a class
that cheats, and a generated class through the batch grader and through nbgrader's whole loop, each student with the
grade deserved.

In CI (`TT_WHEEL` set) both graders run with the package installed from the wheel into the newest environment (nbgrader
beside it, not in it), from an empty folder; elsewhere they run with this interpreter's install."""
import contextlib, csv, importlib.util, io, json, os, subprocess, sys, time
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_tutorial import checks, grading
from transformer_tutorial.assignments import exercise_folder, strip_solutions
from transformer_tutorial.cli import main
from transformer_tutorial.grading import (Limits, copies, copy_detector_rates, course_exercises, find_submissions, fingerprint,
                                          grade_folder, honest_solutions, identify, isolation, landlock_abi, reference_fingerprints,
                                          reference_uses, tampering)
from classroom import CLASS, EXERCISES, EXPECTED, IMPORTS_EX02, NBGRADER_EXPECTED, PAD, CAUSAL, STUB, submission, write_class
import student_bank, student_bank3, student_bank_training, student_bank_sampling
import test_installed

EXERCISE_SET = course_exercises()
NEEDS_NBGRADER = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None, reason="nbgrader is not installed")
NEEDS_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the limits on memory and processes need Linux's /proc")
CHECK_OF = {"scaled_dot_product_attention": "check_scaled_dot_product_attention", "padding_mask": "check_padding_mask",
            "causal_mask": "check_causal_mask", "split_heads": "check_split_heads", "merge_heads": "check_merge_heads",
            "MultiHeadAttention": "check_multi_head_attention", "sinusoidal_positional_encoding": "check_positional_encoding",
            "LayerNorm": "check_layer_norm", "PositionwiseFeedForward": "check_feed_forward", "EncoderLayer": "check_encoder_layer",
            "DecoderLayer": "check_decoder_layer", "label_smoothed_loss": "check_label_smoothed_loss",
            "warmup_schedule": "check_warmup_schedule", "online_softmax": "check_online_softmax", "tiled_attention": "check_tiled_attention",
            "tiled_attention_backward": "check_tiled_attention_backward", "merge": "check_merge", "encode": "check_encode",
            "train_step": "check_train_step", "train_loop": "check_train_loop", "cached_self_attention": "check_cached_self_attention",
            "greedy_decode_cached": "check_greedy_decode_cached", "length_penalty": "check_length_penalty", "beam_search": "check_beam_search",
            "gpt_forward": "check_gpt_forward", "top_k_filter": "check_top_k_filter", "top_p_filter": "check_top_p_filter",
            "sample_next": "check_sample_next"}


# ---------------------------------------------------------------- integrity: the reference
@pytest.mark.parametrize("code, found", [
    ("from transformer_tutorial.attention import scaled_dot_product_attention", "imports scaled_dot_product_attention from transformer_tutorial.attention"),
    ("from transformer_tutorial.attention import scaled_dot_product_attention as mine", "imports scaled_dot_product_attention"),
    ("from transformer_tutorial.attention import *", "imports * from transformer_tutorial.attention"),
    ("import transformer_tutorial\nf = transformer_tutorial.attention.scaled_dot_product_attention", "uses transformer_tutorial.attention.scaled_dot_product_attention"),
    ("import transformer_tutorial.attention as A\ndef scaled_dot_product_attention(q, k, v, mask=None):\n    return A.scaled_dot_product_attention(q, k, v, mask)",
     "uses transformer_tutorial.attention.scaled_dot_product_attention"),
    ("from transformer_tutorial import attention\n%time attention.scaled_dot_product_attention(q, k, v)", "uses transformer_tutorial.attention.scaled_dot_product_attention"),
    ("import transformer_tutorial.attention as A\nR = A\nscaled_dot_product_attention = R.scaled_dot_product_attention",  # an alias
     "uses transformer_tutorial.attention.scaled_dot_product_attention"),
])
def test_reference_uses_are_found(code, found):
    assert any(f.startswith(found) for f in reference_uses([code], ["scaled_dot_product_attention"])), reference_uses([code], ["scaled_dot_product_attention"])


@pytest.mark.parametrize("code", ["from transformer_tutorial.multi_head import MultiHeadAttention",  # not this exercise's
                                  "from transformer_tutorial.checks import check_scaled_dot_product_attention",
                                  "import math\ndef scaled_dot_product_attention(q, k, v, mask=None): return q",
                                  "def f(:\n  broken"])
def test_legitimate_code_is_not_flagged(code):
    assert reference_uses([code], ["scaled_dot_product_attention"]) == []


def test_copies_found_up_to_names_comments_and_strings():
    import inspect
    from transformer_tutorial import positional
    refs = reference_fingerprints(EXERCISE_SET["ex04_positional_encoding"])
    source = inspect.getsource(positional.sinusoidal_positional_encoding)
    disguised = "# my own work\n" + source.replace("max_len", "n").replace("d_model", "width").replace("must", "has to")
    assert copies([disguised], refs) == ["sinusoidal_positional_encoding is a copy of transformer_tutorial.positional.sinusoidal_positional_encoding"]
    solution = EXERCISE_SET["ex04_positional_encoding"].solutions
    assert copies(solution, refs) == ["sinusoidal_positional_encoding is a copy of sinusoidal_positional_encoding of the solution notebook ex04_positional_encoding.ipynb"]


@pytest.mark.parametrize("a, b", [
    ("def f(x, y):\n    a = x + 1\n    b = y * 2\n    return a - b", "def g(p, q):\n    v = q * 2\n    u = p + 1\n    return u - v"),  # lines swapped
    ("def f(x, y):\n    if x.dim() != 2:\n        raise ValueError('no')\n    return x + y", "def f(x, y):\n    if 2 != x.dim():\n        raise ValueError('nope')\n    return x + y"),
    ("def f(x, y):\n    if x > y:\n        x = y\n    return x * y", "def f(x, y):\n    if y < x:\n        x = y\n    return x * y"),  # comparison turned
    ("def f(x, y):\n    s = x @ y\n    w = s.softmax(-1)\n    return w @ y", "def f(x, y):\n    s = x @ y\n    w = s.softmax(-1)\n    out = w @ y\n    return out"),  # a temporary
    ("def f(xs, m):\n    a = [p for p in xs if p in m]\n    b = len(a)\n    return a, b",
     "def f(ys, n):\n    c = [q for q in ys if q in n]\n    d = len(c)\n    return c, d"),  # a comprehension's variable renamed
    ("def f(x, k):\n    m = x.mean()\n    g = lambda y: y * m\n    return g(x) + m.exp() + k",
     "def f(z, n):\n    c = z.mean()\n    h = lambda w: w * c\n    return h(z) + c.exp() + n"),  # a local a lambda reads, renamed
    ("def f(x, i):\n    def g(y, i=i):\n        return y[i] * x\n    t = g(x)\n    return t.sum() + x.sum() + i",
     "def f(p, j):\n    def g(q, j=j):\n        return q[j] * p\n    r = g(p)\n    return r.sum() + p.sum() + j"),  # a nested function's default
])
def test_fingerprint_undoes_what_a_copier_changes_for_free(a, b):
    import ast
    assert fingerprint(ast.parse(a).body[0]) == fingerprint(ast.parse(b).body[0]) is not None


@pytest.mark.parametrize("a, b", [
    ("def f(x, y):\n    a = x + 1\n    a = a * y\n    return a", "def f(x, y):\n    a = x * y\n    a = a + 1\n    return a"),  # order that matters
    ("def f(x, y):\n    x.add_(1)\n    b = x * y\n    return b", "def f(x, y):\n    b = x * y\n    x.add_(1)\n    return b"),      # an in-place method
    ("def f(x, y):\n    s = x - y\n    t = s * s\n    return t", "def f(x, y):\n    s = y - x\n    t = s * s\n    return t"),      # another program
])
def test_fingerprint_keeps_what_changes_the_code(a, b):
    import ast
    assert fingerprint(ast.parse(a).body[0]) != fingerprint(ast.parse(b).body[0])


def test_what_is_never_a_copy():
    "Constructors, what the student is handed, one-line bodies, and a correct solution written otherwise."
    import ast
    ln = EXERCISE_SET["ex05_layer_norm_feed_forward"]
    refs = reference_fingerprints(ln)
    assert not any("__init__" in w for w in refs.values())
    assert copies([strip_solutions(s) for s in ln.solutions], refs) == []
    assert fingerprint(ast.parse("def f(x):\n    'doc'\n    return x.tril()").body[0]) is None
    own = ("class LayerNorm(nn.Module):\n    def forward(self, x):\n        mu = x.mean(-1, keepdim=True)\n"
           "        sd = ((x - mu) ** 2).mean(-1, keepdim=True).add(self.eps).sqrt()\n        return self.weight * (x - mu) / sd + self.bias\n")
    assert copies([own], refs) == []


# ---------------------------------------------------------------- the bank of honest solutions, and the detector's rates
@pytest.mark.parametrize("honest", honest_solutions(), ids=lambda h: f"{h['name']}: {h['style']}")
def test_honest_solution_passes_its_check(honest):
    ns = {}
    exec(honest["code"], ns)
    with contextlib.redirect_stdout(io.StringIO()) as printed: getattr(checks, CHECK_OF[honest["name"]])(ns[honest["name"]])
    assert printed.getvalue().startswith("✓ ")


def test_copy_detector_flags_no_honest_solution_written_otherwise_and_every_disguised_copy_but_a_rewrite():
    rates = copy_detector_rates(EXERCISE_SET)
    flagged, total = rates["honest, written otherwise"]
    assert flagged == 0 and total >= 40, rates
    copied = {k: v for k, v in rates.items() if k.startswith("copies")}
    assert copied and all(f == t > 0 for k, (f, t) in copied.items() if "torch function" not in k), rates
    assert rates["copies, a method written as a torch function"][0] == 0  # the change of structure it does not see
    assert rates["honest, written the chapters' way"][0] <= rates["reference functions with a fingerprint"][0]


# ---------------------------------------------------------------- integrity: tampering with the grading
CHECKS_EX02 = ["check_causal_mask", "check_padding_mask"]

@pytest.mark.parametrize("code, found", [
    ("check_padding_mask = lambda f: None", "rebinds the check check_padding_mask"),
    ("def check_causal_mask(fn): pass", "rebinds the check check_causal_mask"),
    ("from transformer_tutorial.checks import check_causal_mask as check_padding_mask", "rebinds the check check_padding_mask"),
    ("globals()['check_padding_mask'] = print", "rebinds the check check_padding_mask"),
    ("import transformer_tutorial.checks.attention as A\nA._close = lambda *a, **k: True", "patches the course's package"),
    ("from transformer_tutorial import checks\nsetattr(checks.core, '_close', None)", "patches the course's package"),
    ("import sys\nsys.modules['transformer_tutorial.checks'] = object()", "changes sys.modules"),
    ("import torch\ntorch.allclose = lambda *a, **k: True", "patches torch"),
    ("import torch.nn.functional as F\nF.softmax = lambda x, dim: x", "patches torch"),
    ("import builtins\nbuiltins.isinstance = lambda *a: True", "patches Python's builtins"),
    ("get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)", "installs an IPython or interpreter hook"),
    ("get_ipython().events.register('post_run_cell', print)", "installs an IPython or interpreter hook"),
    ("ip = get_ipython()\nip.input_transformers_post.append(str)", "installs an IPython or interpreter hook"),
    ("import sys\nsys.settrace(print)", "installs an IPython or interpreter hook"),
    ("exit()", "ends or signals a process"),
    ("import os\nos._exit(0)", "ends or signals a process"),
    ("raise SystemExit", "ends or signals a process"),
    ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "ends or signals a process"),
    ("import os\nwhile True: os.fork()", "starts processes"),
    ("import subprocess\nsubprocess.run(['ls'])", "starts processes"),
    ("!rm -rf ~", "runs shell commands"),
    ("exec('x = 1')", "runs code built at run time"),
    ("import importlib\nimportlib.import_module('transformer_tutorial.masks')", "runs code built at run time"),
    ("import ctypes", "runs code built at run time"),
    ("check_causal_mask.__wrapped__.__code__ = (lambda f: None).__code__", "reaches into the interpreter's internals"),
    ("open('/home/teacher/grades.csv', 'w').write('x')", "writes or deletes files"),
    ("from pathlib import Path\nPath('../ada/ex02_masks.ipynb').write_text('{}')", "writes or deletes files"),
    ("import os\nos.remove('ex02_masks.ipynb')", "writes or deletes files"),
    ("globals().__setitem__('check_padding_mask', lambda f: None)", "reaches a namespace by hand"),
    ("g = globals()\ng['check_padding_mask'] = print", "reaches a namespace by hand"),
    ("get_ipython().user_ns['check_padding_mask'] = print", "reaches a namespace by hand"),
    ("import transformer_tutorial.checks.attention as A\nA.__dict__.update(_close=lambda *a, **k: True)", "reaches a namespace by hand"),
    ("getattr(get_ipython(), 'set_' + 'custom_exc')((Exception,), print)", "reaches an attribute by a name built at run time"),
    ("getattr(get_ipython(), 'set_custom_exc')((Exception,), print)", "installs an IPython or interpreter hook"),
    ("import os\ngetattr(os, '_exit')(0)", "ends or signals a process"),
    ("import io\nio.FileIO('/tmp/grades.csv', 'w')", "writes or deletes files"),
    ("import shutil\nshutil.copy2('mine.ipynb', '../ada/ex02_masks.ipynb')", "writes or deletes files"),
    ("from pathlib import Path\nPath('../ada/ex02_masks.ipynb').open('w').write('{}')", "writes or deletes files"),
    ("import runpy\nrunpy.run_path('cheat.py')", "runs code built at run time"),
    # a reviewer's ways to forge the checks that run in the kernel, or the wire's answers
    ("import transformer_tutorial.checks as C\nm = C\nm.check_train_step = lambda f: None", "patches the course's package"),
    ("import sys\nsys.modules['transformer_tutorial.checks'].check_train_step = print", "reaches a module through sys.modules"),
    ("import sys\nm = sys.modules.get('transformer_tutorial.checks')\nsetattr(m, 'check_train_step', print)", "patches the course's package"),
    ("import transformer_tutorial.checks as C\ndef relax(mod): mod.check_train_step = print\nrelax(C)", "hands a module of the course's package"),
    ("get_ipython().input_transformer_manager.cleanup_transforms.append(lambda lines: ['pass\\n'])", "installs an IPython or interpreter hook"),
    ("import json\n_real = json.dumps\njson.dumps = lambda o, *a, **k: _real({'ok': None})", "patches a module it imported"),
    ("get_ipython().display_formatter.formatters['text/plain'].for_type(str, print)", "installs an IPython or interpreter hook"),
    ("import transformer_tutorial.grading as G\ng = G\ng._serve = print", "reaches into the grader"),
    ("import torch\nt = torch\nt.allclose = lambda *a, **k: True", "patches torch"),
    ("import torch\ntype(torch.zeros(1)).__eq__ = lambda a, b: True", "patches a special method"),
    ("import builtins as b\nB = b\nB.isinstance = lambda *a: True", "patches Python's builtins"),
    ("get_ipython().run_cell = print", "installs an IPython or interpreter hook"),
    ("import sys\nmods = sys.modules\nmods.pop('transformer_tutorial.checks')", "changes sys.modules"),
    ("import sys\nsys.path.insert(0, '.')", "changes where Python finds modules"),
    ("setattr(check_train_step, '__code__', (lambda f: None).__code__)", "reaches into the interpreter's internals"),
    ("c = compile\nc('x = 1', 'x', 'exec')", "runs code built at run time"),
    ("import builtins\ngetattr(builtins, 'exec')('x = 1')", "runs code built at run time"),
    ("import pickle\npickle.loads(b'')", "runs code built at run time"),
    ("import tempfile\ntempfile.NamedTemporaryFile('w', dir='.').write('x')", "writes or deletes files"),
])
def test_tampering_is_flagged(code, found):
    flags = tampering([code], CHECKS_EX02)
    assert any(f.startswith(found) for f in flags), flags


@pytest.mark.parametrize("code", [
    "from transformer_tutorial.checks import check_padding_mask, check_causal_mask",  # the handed-out import
    "import torch\ntorch.backends.cudnn.deterministic = True",                          # a setting, not code
    "def check_shapes(x): assert x.dim() == 2",                                          # a helper of the student's own
    "import sys\nif 'google.colab' in sys.modules: print('colab')",                       # reading sys.modules
    "with open('data.txt') as f: text = f.read()",                                      # reading a file
    "self = object()\nsetattr(self, 'w', 1)",                                           # setattr on the student's object
    "x = 'exit'.replace('e', 'E')",
    "import torch\nact = getattr(torch.nn.functional, 'gelu')\nname = 'relu'\nf = getattr(torch, name)",  # looking up torch's functions
    "from pathlib import Path\ntext = Path('data.txt').open().read()",               # reading a file through a path
    "def settings(args): return vars(args)",
    "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (6, 3)",                  # a setting, by item
    "import json\ndumps = json.dumps\ntext = dumps({'a': 1})",                                      # an alias, read
    "import transformer_tutorial.masks as M\nm = M.causal_mask(3)",                               # the package's functions, called
])
def test_tampering_flags_nothing_honest(code):
    assert tampering([code], CHECKS_EX02) == []


def test_tampering_flags_nothing_in_the_solution_notebooks_nor_the_honest_bank():
    for name, ex in EXERCISE_SET.items():
        nb = nbformat.read(exercise_folder() / f"{name}.ipynb", as_version=4)
        assert tampering([c.source for c in nb.cells if c.cell_type == "code"], grading.tamper._check_names(ex)) == [], name
    for h in honest_solutions(): assert tampering([h["code"]], grading.tamper._check_names(EXERCISE_SET[h["exercise"]])) == [], h["style"]


# ---------------------------------------------------------------- the wire: verdicts computed outside the kernel
@pytest.mark.parametrize("t", [torch.arange(24.).reshape(2, 3, 4).transpose(1, 2)[:, 1:], torch.ones(3, 1).expand(3, 5),
                               torch.tensor([[True, False]]), torch.randn(2, 3, dtype=torch.float64), torch.arange(6, dtype=torch.int32),
                               torch.randn(4, dtype=torch.bfloat16), torch.empty(0, 3), torch.tensor(2.5), torch.randn(2, dtype=torch.complex64)])
def test_a_tensor_crosses_the_wire_as_it_is(t):
    back = grading.wire._tensor_unwire(json.loads(json.dumps(grading.wire._tensor_wire(t))))
    assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back, t) and back.is_contiguous() == t.is_contiguous()


def test_a_tensor_keeps_its_device_across_the_wire_and_the_check_names_it():
    t = torch.empty(2, 3, dtype=torch.float16, device="meta")            # a device with no bytes, as tests/elsewhere.py uses
    back = grading.wire._tensor_unwire(json.loads(json.dumps(grading.wire._tensor_wire(t))))
    assert (back.device.type, back.shape, back.dtype) == ("meta", t.shape, t.dtype)
    elsewhere = lambda logits, k: logits.to("meta")
    direct, wired = _verdict("check_top_k_filter", elsewhere, False), _verdict("check_top_k_filter", elsewhere, True)
    assert direct == wired and "returned a tensor on meta" in wired, (direct, wired)


@pytest.mark.parametrize("change", [{"shape": [2, 300, 3]}, {"stride": [100, 1, 4]}, {"dtype": "object"}, {"shape": [-1, 3, 2]},
                                    {"data": "AAAA"}, {"device": "nonsense"}])
def test_a_forged_tensor_is_refused(change):
    w = dict(grading.wire._tensor_wire(torch.arange(24.).reshape(2, 3, 4)), **change)
    with pytest.raises(ValueError): grading.wire._tensor_unwire(w)


def _verdict(check, impl, through_the_wire):
    "The check's verdict on `impl` (called directly, or through a proxy over the wire): its message, or what it printed."
    if through_the_wire: impl = grading.verdict._Loopback({"impl": impl}).lookup("impl")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out): getattr(checks, check)(impl)
    except AssertionError as e: return str(e)
    finally: grading.wire._HELD.clear()
    return out.getvalue()


@pytest.mark.parametrize("check, impl", [(c, i) for c, i, _ in student_bank.BANK + student_bank3.BANK + student_bank_training.BANK
                                           + student_bank_sampling.BANK], ids=lambda x: getattr(x, "__name__", x))
def test_a_verdict_through_the_wire_is_the_verdict(check, impl):
    "Every implementation of four banks, right and wrong, gets the same message from a check through proxies as from the check itself (exercise 13's checks send a GPT and a torch.Generator by value)."
    assert _verdict(check, impl, True) == _verdict(check, impl, False)


def test_what_the_wire_sends_by_value_and_what_it_cannot_send():
    "A course module with a config arrives as an equal copy (a refused forward still refused), a generator as its state; an optimizer cannot be sent, which makes the grader run that check in the kernel."
    from transformer_tutorial.gpt import GPT
    model, g = GPT(11, 8, 16, 2, 1, 32).double(), torch.Generator().manual_seed(5)
    def refuse(*args): raise RuntimeError("not here")
    refuse.refuses = "Refused"
    model.forward = refuse
    link, memo = grading.verdict._Link(None, None), {}
    sent = json.loads(json.dumps(link.wire((model, g), memo)))
    copy, g2 = grading.wire._unwire(sent, None, {})
    ids = torch.randint(0, 11, (2, 5))
    assert torch.equal(GPT.forward(copy, ids), GPT.forward(model, ids)) and copy.embed.weight.dtype == torch.float64
    assert copy.head.weight is copy.embed.weight                          # tied as in the original
    with pytest.raises(Exception) as e: copy(ids)
    assert type(e.value).__name__ == "Refused"
    assert torch.equal(torch.rand(3, generator=g2), torch.rand(3, generator=g))
    del model.forward
    with pytest.raises(grading.wire._Unsendable, match="cannot send a AdamW"): link.wire([torch.optim.AdamW(model.parameters())], {})
    with pytest.raises(ValueError, match="not a module of the course's"):
        grading.wire._unwire(dict(sent["v"][0], **{"class": ["torch.nn", "Linear"]}), None, {})


def test_a_check_that_cannot_run_where_graded_gives_no_point(tmp_path, monkeypatch):
    "Exercise 8's Triton check on a grader without Triton: the check returns its notice that it skipped, which is a failed check there (0 of its point), not a pass; the other three checks pass."
    hide = tmp_path / "no_triton"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import importlib.util as u\n_find = u.find_spec\n"
                                           "u.find_spec = lambda name, *a, **k: None if name == 'triton' else _find(name, *a, **k)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hide), *filter(None, [os.environ.get("PYTHONPATH")])]))  # the verdict process's
    name = "ex08_online_softmax_tiled_attention"
    nb = nbformat.read(exercise_folder() / f"{name}.ipynb", as_version=4)
    row = grading.grade_submission(nb, course_exercises()[name], Limits(cell_seconds=300))
    assert (row["points"], row["max_points"]) == (3, 4), row
    assert dict(row["checks"])["check_triton_tiled_attention"].startswith("triton_tiled_attention: skipped, Triton is not installed here"), row


def test_an_exception_of_the_students_code_keeps_its_class():
    e = grading.verdict._remote_error("NameError", "name 'x' is not defined")
    assert isinstance(e, NameError) and type(e).__name__ == "NameError" and str(e) == "name 'x' is not defined"
    e = grading.verdict._remote_error("UnicodeDecodeError", "bad byte")  # a class that wants more than a message
    assert isinstance(e, Exception) and type(e).__name__ == "UnicodeDecodeError" and str(e) == "bad byte"
    assert not issubclass(grading.verdict._Stopped, Exception)  # no handler in a check can swallow the end of a check


def test_the_kernel_side_answers_what_the_students_code_raises_even_systemexit():
    def bye(x): raise SystemExit(3)
    answer = json.loads(grading.wire._serve({"bye": bye}, json.dumps({"op": "lookup", "name": "bye"})))
    answer = json.loads(grading.wire._serve({}, json.dumps({"op": "call", "id": answer["ok"]["id"], "args": {"t": "list", "v": [1]}, "kwargs": {"t": "dict", "v": []}})))
    assert answer == {"error": ["SystemExit", "3"]}
    grading.wire._HELD.clear()


# ---------------------------------------------------------------- the sandbox: Landlock and the limits
def _confined(probe, tmp_path, writable):
    "Run the Python `probe` through `_confine`, as a kernel is run, with `writable` the only folders it may write; its JSON printout."
    env = dict(os.environ, TT_CONFINE=json.dumps({"rlimits": {"RLIMIT_FSIZE": 1 << 20}, "landlock": landlock_abi() > 0, "writable": writable}))
    r = subprocess.run([sys.executable, "-c", "from transformer_tutorial.grading.sandbox import _confine; _confine()", sys.executable, "-c", probe],
                       env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


PROBE = '''
import json, os, signal, socket, sys
def attempt(f):
    try: f(); return "done"
    except OSError as e: return type(e).__name__
out = {}
out["own folder"] = attempt(lambda: open(os.path.join(sys.argv[1], "mine.txt"), "w").write("x"))
out["elsewhere"] = attempt(lambda: open(sys.argv[2], "w").write("changed"))
out["remove elsewhere"] = attempt(lambda: os.remove(sys.argv[2]))
out["big file"] = attempt(lambda: open(os.path.join(sys.argv[1], "big"), "wb").write(b"x" * (2 << 20)))
out["connect"] = attempt(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=5).close())
out["signal the parent"] = attempt(lambda: os.kill(os.getppid(), 0))
out["udp"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"grades", ("127.0.0.1", 9)))
def system_v_segment():  # made, then removed at once (IPC_RMID) wherever it is allowed
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(0, 1 << 20, 0o1600)  # IPC_PRIVATE, 1 MiB, IPC_CREAT | 0600
    if segment < 0: raise OSError(ctypes.get_errno(), "shmget")
    libc.shmctl(segment, 0, None)
out["memfd"] = attempt(lambda: os.close(os.memfd_create("hoard")))
out["system v shared memory"] = attempt(system_v_segment)
HOARD = "/dev/shm/hoard-" + str(os.getpid())
out["posix shared memory"] = attempt(lambda: (open(HOARD, "wb").close(), os.remove(HOARD)))
out["read own folder"] = attempt(lambda: open(os.path.join(sys.argv[1], "mine.txt")).read())
out["read elsewhere"] = attempt(lambda: open(sys.argv[2]).read())
out["read a solution notebook"] = attempt(lambda: open(SOLUTION).read())
out["read the package"] = attempt(lambda: open(PACKAGE_FILE).read())
out["read its own /proc"] = attempt(lambda: open(f"/proc/{os.getpid()}/environ").read() + open("/proc/self/status").read())
out["read the parent's environment"] = attempt(lambda: open(f"/proc/{os.getppid()}/environ").read())
out["read /proc/cpuinfo"] = attempt(lambda: open("/proc/cpuinfo").read())
print(json.dumps(out))
'''

def test_confine_keeps_reads_and_writes_in_the_submissions_folder(tmp_path):
    import socket
    own, victim = tmp_path / "box", tmp_path / "ada.ipynb"
    own.mkdir(); victim.write_text("as handed in")
    server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
    probe = PROBE.replace("SOLUTION", repr(str(exercise_folder() / "ex01_attention.ipynb"))).replace("PACKAGE_FILE", repr(grading.__file__))
    try: out = _confined(probe.replace("sys.argv[1]", repr(str(own))).replace("sys.argv[2]", repr(str(victim)))
                         .replace("int(sys.argv[3])", str(server.getsockname()[1])), tmp_path, [str(own), "/dev/null"])
    finally: server.close()
    abi = landlock_abi()
    print(abi, out)
    assert out["own folder"] == out["read own folder"] == out["read the package"] == "done" and out["big file"] == "OSError"  # RLIMIT_FSIZE everywhere
    assert out["read its own /proc"] == out["read /proc/cpuinfo"] == "done"
    if abi:  # what Landlock refuses (this machine has it: the CI machines are recent Linux)
        assert out["elsewhere"] == out["remove elsewhere"] == "PermissionError" and victim.read_text() == "as handed in"
        assert out["read elsewhere"] == out["read a solution notebook"] == "PermissionError"   # a classmate's notebook, the grades
        assert out["read the parent's environment"] == "PermissionError"   # of /proc, only its own process
        if abi >= 4: assert out["connect"] == "PermissionError"
        if grading.sandbox._SECCOMP_ARCH.get(__import__("platform").machine().lower()):  # seccomp: no datagram, no hidden memory
            assert out["udp"] == out["memfd"] == out["system v shared memory"] == "PermissionError"
        assert out["posix shared memory"] == "PermissionError"  # /dev/shm: a file Landlock refuses to make
        if abi >= 6: assert out["signal the parent"] == "PermissionError"
        assert isolation().startswith(f"Landlock ABI {abi}")
    else:
        assert out["elsewhere"] == "done" and isolation().startswith("no sandbox")
    assert isolation(sandbox=False).startswith("no sandbox (Landlock is turned off)")


def test_no_read_rule_reaches_the_solution_notebooks(tmp_path, monkeypatch):
    "The package installed in an environment's site-packages (as from the wheel): its code and every other package readable, its solution notebooks not, though the environment's folder holds them, even through its `lib64 -> lib` link; nor the class."
    site = tmp_path / "venv" / "lib" / "site-packages"
    for d in ("exercises", "grading"): (site / "transformer_tutorial" / d).mkdir(parents=True)
    (tmp_path / "venv" / "lib64").symlink_to("lib")   # as `python -m venv` makes it on many Linux systems
    for f in ("exercises/ex01_attention.ipynb", "grading/sandbox.py"): (site / "transformer_tutorial" / f).write_text("")
    (site / "torch").mkdir()
    (tmp_path / "venv" / "class").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    # what Landlock grants is what a path leads to
    readable = [Path(p).resolve() for p, rights in grading.sandbox._readable([str(tmp_path / "venv" / "class")]) if rights & grading.sandbox._READ]
    for secret in (site / "transformer_tutorial" / "exercises" / "ex01_attention.ipynb", exercise_folder() / "ex01_attention.ipynb",
                   tmp_path / "venv" / "class"):
        assert not any(p == secret or p in secret.parents for p in readable), secret
    assert site / "torch" in readable and site / "transformer_tutorial" / "grading" in readable  # the grader's code, as a folder granted whole


@NEEDS_PROC
def test_the_verdict_process_has_a_memory_limit():
    "Its address space is capped (a module config sent from a kernel once made it build a 3.4 GB model)."
    verdict = grading.running._Verdict(3 << 30)
    try:
        verdict.ready()
        line = next(l for l in Path(f"/proc/{verdict.proc.pid}/limits").read_text().splitlines() if l.startswith("Max address space"))
        assert line.split()[3:5] == [str(3 << 30)] * 2, line
    finally: verdict.close()


def test_one_verdict_process_gives_honest_work_its_points_whatever_it_judged_before():
    "Notebook after notebook on one verdict process, as `grade_folder` runs them: a wrong multi-head attention, the solution twice (once 3 then 2 of 3, `KeyError: 2`), then exercise 6's solution (once 1 of 2: its decoder check got the encoder layer's 16 parameters, asked in the check before)."
    import copy
    e3, e6 = "ex03_multi_head_attention", "ex06_encoder_decoder_layers"
    sol = {e: nbformat.read(exercise_folder() / f"{e}.ipynb", as_version=4) for e in (e3, e6)}
    wrong = nbformat.reads(_wrong(json.dumps(sol[e3]), *WRONG[e3]), as_version=4)
    verdict = grading.running._Verdict()
    try: got = [grading.grade_submission(copy.deepcopy(nb), EXERCISE_SET[e], verdict=verdict)["points"]
                for e, nb in [(e3, wrong), (e3, sol[e3]), (e3, sol[e3]), (e6, sol[e6])]]
    finally: verdict.close()
    assert got == [2, 3, 3, 2], got


def test_a_check_cut_in_the_middle_leaves_nothing_for_the_next(monkeypatch):
    "The grader's side of a conversation fails mid-check (here the kernel's answer cannot be had): the verdict process, which still waits for that answer, is replaced, so the next check reads its own questions and passes, not the rest of the last one."
    import asyncio
    from transformer_tutorial.masks import causal_mask
    ns, fail = {"causal_mask": causal_mask}, {"now": False}
    async def kernel(client, question, deadline, seconds):   # the student's kernel, in this process
        if fail["now"] and question["op"] != "lookup": raise RuntimeError("the kernel's answer was lost")
        return json.loads(grading.wire._serve(ns, json.dumps(question)))
    monkeypatch.setattr(grading.running, "_ask_kernel", kernel)
    verdict = grading.running._Verdict()
    try:
        verdict.ready()
        first, fail["now"] = verdict.proc.pid, True
        with pytest.raises(RuntimeError, match="answer was lost"): asyncio.run(verdict.check(None, "check_causal_mask", "causal_mask", 60))
        fail["now"] = False
        assert verdict.proc.pid != first and asyncio.run(verdict.check(None, "check_causal_mask", "causal_mask", 60)) is None
    finally:
        verdict.close()
        grading.wire._HELD.clear()


def test_the_grader_draws_the_checks_inputs_anew_for_each_run():
    "Each run of the grader draws its own seed for the checks' inputs (tests/test_checks.py: a table of answers memorized for one run's inputs fails another's)."
    assert len({grading.running._run_seed() for _ in range(5)}) > 1


def test_the_grader_s_threads_read_code_one_at_a_time():
    "Python 3.11's ast.parse fails in two threads at once when one switches to the other inside it (a finalizer running Python code is enough): 'SystemError: AST constructor recursion depth mismatch', which gave an honest ex06 solution 0 points, 'crashed', in one CI run of --jobs 2. Without the grader's lock the race is often seen here (printed); with it, never."
    import ast, threading
    source = "\n".join(f"def f{i}(x):\n    return [(y, {{'a': (x + {i}) * 2}}) for y in range(x) if y % 3]" for i in range(300))
    class Switch:
        def __del__(self): time.sleep(0)                      # Python code in a finalizer: the other thread may run
    def race(lock):
        errors = []
        def work():
            try:
                for _ in range(150):
                    junk = [Switch() for _ in range(50)]
                    junk += [[junk] for _ in range(50)]           # cycles, for the collector
                    del junk
                    with lock: ast.parse(source)
            except SystemError as e: errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads: t.start()
        for t in threads: t.join()
        return errors
    print(f"without the lock: {len(race(contextlib.nullcontext()))} SystemError(s)")   # a race: seen often, not always
    assert race(grading.running._AST) == []


def test_a_symbolic_link_is_refused_kept_and_named_printably(tmp_path, capsys):
    "A submission that is a link (to a classmate's notebook, the solution, a folder) runs nowhere: a row says so, the link stays; a name with escape sequences is printed without them."
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "ex02_masks.ipynb").write_text(json.dumps(_nb("ex02_masks")), encoding="utf-8")
    (tmp_path / "class" / "bo\x1b[2J").mkdir(parents=True)
    file_link, folder_link = tmp_path / "class" / "bo\x1b[2J" / "ex02_masks.ipynb", tmp_path / "class" / "cy"
    file_link.symlink_to(target / "ex02_masks.ipynb")
    folder_link.symlink_to(target, target_is_directory=True)
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "out" / "grades.csv")]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and f"bo?[2J/ex02_masks.ipynb: a symbolic link (to {target / 'ex02_masks.ipynb'})" in err, err
    rows = {r["student"]: r for r in _rows(tmp_path / "out" / "grades.csv")}
    assert {s: (r["exercise"], r["points"], r["max_points"], r["status"]) for s, r in rows.items()} == {
        "bo\x1b[2J": ("ex02_masks", "0.0", "2.0", "refused"), "cy": ("", "0.0", "0.0", "refused")}
    assert file_link.is_symlink() and folder_link.is_symlink() and (target / "ex02_masks.ipynb").is_file()
    ex, limits = EXERCISE_SET["ex02_masks"], Limits()   # two students who hand in the same bytes are graded apart
    assert grading.gradebook._key(b"{}", ex, limits, "ada") != grading.gradebook._key(b"{}", ex, limits, "ben")


# ---------------------------------------------------------------- finding and naming submissions
def _nb(exercise):
    return json.loads((exercise_folder() / f"{exercise}.ipynb").read_text(encoding="utf-8"))


def test_identify_by_check_cells_then_by_name():
    nb = nbformat.from_dict(_nb("ex02_masks"))
    assert identify(nb, Path("ex01_attention.ipynb"), EXERCISE_SET) == ("ex02_masks", "holds exercise ex02_masks (by its check cells): graded as ex02_masks")
    assert identify(nb, Path("ex02_masks.ipynb"), EXERCISE_SET) == ("ex02_masks", None)
    bare = nbformat.from_dict({**_nb("ex02_masks"), "cells": []})
    assert identify(bare, Path("ex02_masks.ipynb"), EXERCISE_SET)[0] == "ex02_masks"
    name, line = identify(bare, Path("homework.ipynb"), EXERCISE_SET)
    assert name is None and line.startswith("no check cells, and its name is none of the exercises'")


def test_an_empty_folder_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "class").mkdir()
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "grades.csv")]) == 2
    assert capsys.readouterr().err == (f"transformer-tutorial grade: error: no submissions in {tmp_path / 'class'}: expected "
                                       "STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb\n")
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "class"]


def test_find_submissions_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no submissions in .*: expected STUDENT/EXERCISE.ipynb"): find_submissions(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no submissions folder at"): find_submissions(tmp_path / "nope")
    for rel in ["c/ann/ex01_attention.ipynb", "c/Ann /ex02_masks.ipynb", "c/ann/notes.txt", "c/loose.ipynb", "c/..zoë/ex02_masks.ipynb",
                "c/ann/.ipynb_checkpoints/ex01_attention-checkpoint.ipynb", "c/bob/a/b/deep.ipynb", "c/__MACOSX/ann/ex01_attention.ipynb",
                "c/ann/.hidden.ipynb"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True); (tmp_path / rel).write_text("{}")
    found, problems = find_submissions(tmp_path / "c")
    assert [(s, p.name) for s, p in found] == [("..zoë", "ex02_masks.ipynb"), ("Ann ", "ex02_masks.ipynb"), ("ann", "ex01_attention.ipynb")]
    assert problems == ["ann/notes.txt: not a notebook (.ipynb), skipped",
                        "bob/a/b/deep.ipynb: not where a submission goes (STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb), skipped",
                        "loose.ipynb: not where a submission goes (STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb), skipped",
                        "student folders 'Ann ', 'ann' look like one student: each is graded under its own name; merge them by hand if they are"]


@pytest.mark.parametrize("submissions, out, message", [
    ("c", "c/grades.csv", "the grades CSV .* and the submissions folder .* overlap"),
    ("grades_feedback/c", "grades.csv", "the feedback folder .* and the submissions folder .* overlap"),
    ("c", "folder", "--out .* is a folder")])
def test_outputs_that_would_clash_are_refused(tmp_path, capsys, submissions, out, message):
    "The CSV among the submissions, the submissions inside the feedback folder, a folder as the CSV: one line, exit 2, nothing written."
    import re
    student = tmp_path / submissions / "ann"
    student.mkdir(parents=True)
    (student / "ex02_masks.ipynb").write_text(json.dumps(_nb("ex02_masks")))
    (tmp_path / "folder").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert main(["grade", str(tmp_path / submissions), "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("relative", [True, False])
def test_the_suggested_csv_is_named_as_the_folder_was(tmp_path, capsys, monkeypatch, relative):
    "A teacher who typed `grade term --out term/grades.csv` is told `--out grades.csv`, not a resolved path."
    (tmp_path / "term" / "ann").mkdir(parents=True)
    (tmp_path / "term" / "ann" / "ex02_masks.ipynb").write_text(json.dumps(_nb("ex02_masks")))
    monkeypatch.chdir(tmp_path)
    folder = "term" if relative else str(tmp_path / "term")
    assert main(["grade", folder, "--out", f"{folder}/grades.csv"]) == 2
    err = capsys.readouterr().err
    suggested = err.split("e.g. --out ")[1].split()[0]
    assert suggested == ("grades.csv" if relative else str(tmp_path / "grades.csv")), err
    assert not (tmp_path / suggested).resolve().is_relative_to((tmp_path / "term").resolve())


# ---------------------------------------------------------------- the graders, run as a teacher runs them
TIMEOUT = 10  # seconds a cell may run: dee's loop is stopped after it, every other cell needs far less


class Grader:
    "Runs the console scripts: from the wheel in the newest environment in CI, else from this interpreter's install."
    def __init__(self, tmp):
        if os.environ.get("TT_WHEEL"):
            self.python = test_installed.environments()[0][1]
            self._pip(["install", "-q", os.environ["TT_WHEEL"]])
            self._pip(["install", "-q", "--target", str(tmp / "nbgrader"), "nbgrader"])  # beside the environment, not in it
            self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JUPYTER_PATH")}
            self.env["JUPYTER_DATA_DIR"] = str(tmp / "jupyter")  # the kernel `python3` is the environment's own
        else:
            self.python, self.env = sys.executable, dict(os.environ)
        self.bin = Path(self.python).parent
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"  # nbgrader runs `alembic`
        target = tmp / "nbgrader"  # nbgrader's modules, scripts and nbconvert templates, when installed beside the environment
        self.nbgrader_env = self.env if not target.is_dir() else dict(
            self.env, PYTHONPATH=str(target), JUPYTER_PATH=str(target / "share" / "jupyter"),
            PATH=f"{target / 'bin'}{os.pathsep}{self.env['PATH']}")

    def _pip(self, args):
        r = subprocess.run([self.python, "-m", "pip", *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]

    def grade(self, args, cwd, **env):
        return subprocess.run([str(self.bin / "transformer-tutorial"), "grade", *args], cwd=cwd, env={**self.env, **env},
                              capture_output=True, text=True, timeout=1200)

    def has(self, module):
        "Whether `module` can be imported where this grader's checks run."
        return subprocess.run([self.python, "-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"],
                              env=self.env).returncode == 0

    def nbgrader(self, args, cwd):
        r = subprocess.run([self.python, "-m", "nbgrader", *args], cwd=cwd, env=self.nbgrader_env, capture_output=True, text=True,
                           timeout=1200)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        return r.stdout + r.stderr


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    return Grader(tmp_path_factory.mktemp("grader"))


def _rows(path):
    return list(csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8"))))


def _totals(rows, students=CLASS):
    return {s: sum(float(r["points"]) for r in rows if r["student"] == s) for s in students}


# ---------------------------------------------------------------- a class that cheats
IMPORTS = next(c for c in _nb("ex02_masks")["cells"] if "".join(c["source"]).startswith("import torch"))

def _cheat(folder, student, code=None, solved=False, padding=None):
    "`student`'s masks notebook: solved (the reference), or as handed out with `code` added to its import cell and `padding` (when given) as its padding_mask cell."
    nb = _nb("ex02_masks")
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            text = "".join(l for l in text.splitlines(keepends=True) if "### " not in l) if solved else strip_solutions(text)
            if padding and cell["metadata"]["nbgrader"]["grade_id"] == PAD: text = padding
        if text == "".join(IMPORTS["source"]) and code: text = text + "\n" + code
        if cell["cell_type"] == "code": cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = text
    path = folder / student / "ex02_masks.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _cheats(folder, out):
    "What each cheat adds to the handed-out notebook; the writes name the class's files by their absolute paths."
    ada, feedback = folder / "ada" / "ex02_masks.ipynb", out.parent / f"{out.stem}_feedback"
    cache = out.with_name(f".{out.name}.cache.json")
    cheats = {
        "rex": "check_padding_mask = lambda f: None\ncheck_causal_mask = lambda f: None",                     # rebinds the checks
        "pat": "import transformer_tutorial.checks.attention as A\n"                                            # patches the checks module
               "A._call = lambda name, fn, *args, **kw: getattr(A, name)(*args, **kw)",
        "pax": "from transformer_tutorial.checks import check_padding_mask as c, check_causal_mask as d\n"      # patches the checks' code
               "c.__wrapped__.__code__ = d.__wrapped__.__code__ = (lambda fn: None).__code__",
        "sam": "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",                             # swallows exceptions
        "eva": "ip = get_ipython()\nip.events.register('pre_run_cell', lambda info: ip.user_ns.update("         # rebinds the checks
               "check_padding_mask=print, check_causal_mask=print))",                                           # before every cell
        "ian": "get_ipython().input_transformers_post.append(lambda lines: [l for l in lines if not l.startswith('check_')])",  # erases the checks
        "syd": "import sys\nsys.exit(0)",                                                                     # exits (IPython refuses)
        "quinn": "import os\nos._exit(0)",                                                                     # exits the kernel
        "gil": f"open({str(ada)!r}, 'w').write('{{}}')\nopen({str(out)!r}, 'w').write('gil,ex02_masks,2.0')\n"  # writes the class's files
               f"open({str(cache)!r}, 'w').write('{{}}')\nimport os\nos.makedirs({str(feedback)!r}, exist_ok=True)\n"
               f"open({str(feedback / 'gil.md')!r}, 'w').write('2 / 2')\nos.remove({str(folder / 'una' / 'ex02_masks.ipynb')!r})",
        "lou": "while True: print('x' * 10_000)",                                                              # prints without end
        "fox": "import os, time\nfor _ in range(8): os.fork()\ntime.sleep(60)",                                # forks (at most 256)
        "hog": "import torch\nhog = torch.ones(2 ** 30, dtype=torch.uint8) + 1",                               # eats memory
        "ned": "import time\nwhile True:\n    try: time.sleep(1)\n    except KeyboardInterrupt: pass",          # never stops
        "sly": f"import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 5; echo late > {ada}'], start_new_session=True)",  # writes later
        "del": "import os\nos.remove('ex02_masks.ipynb')",                                                      # deletes its own file
        "jon": "import json\n_real = json.dumps\n"                                                             # rewrites the kernel's
               "def _dumps(obj, *a, **k):\n"                                                                    # answers: every error
               "    if type(obj) is dict and (set(obj) == {'error'} or set(obj) == {'ok'} and type(obj['ok']) is dict "  # as the grader's own
               "and 'changed' in obj['ok']): obj = {'ok': None, 'stop': ''}\n"                                  # word for a stop
               "    return _real(obj, *a, **k)\njson.dumps = _dumps",
        "fmt": "import json as _j\ndef _forge(s, p, cycle):\n"                                                 # the same through a
               "    if s.startswith('{\"error\"') or s.startswith('{\"ok\"') and '\"changed\"' in s: s = _j.dumps({'ok': None, 'stop': ''})\n"
               "    p.text(repr(s))\nget_ipython().display_formatter.formatters['text/plain'].for_type(str, _forge)",  # display formatter
        "vic": {"padding": "import transformer_tutorial.masks as m\nfns = [m]\npadding_mask = fns[0].padding_mask\n"},  # the reference through
                                                                   # a list, which the reader does not follow
        "zoe": "import subprocess\nsubprocess.Popen(['/bin/sleep', '97.25'], start_new_session=True, env={})",  # outlive their kernel,
        "ray": "import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0: os.execve('/bin/sleep', ['sleep', '97.5'], {})\n"  # in a session
               "    os._exit(0)",                                                                                 # of their own, no token
    }
    if landlock_abi() >= 6: cheats["kai"] = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"        # kills the grader
    # the reference, or a solution, reached at run time in a way no import shows: as the padding_mask cell
    import base64, inspect, transformer_tutorial.masks
    encoded = base64.b64encode(inspect.getsource(transformer_tutorial.masks.padding_mask).encode()).decode()
    run_solutions = "exec('\\n'.join(''.join(c['source']) for c in nb['cells'] if c['metadata'].get('nbgrader', {}).get('solution')))"
    cheats.update({
        "att": {"padding": "import importlib\nm = importlib.import_module('transformer_tutorial.' + 'ma' + 'sks')\n"   # a computed
                           "padding_mask = getattr(m, 'padding' + '_mask')\n"},                                          # module, attribute
        "src": {"padding": "import os, transformer_tutorial as t\nsource = open(os.path.join(t.__path__[0], 'masks.py')).read()\n"  # a file
                           "exec(source.replace('from .', 'from transformer_tutorial.'))\n"},                               # it ships, run
        "b64": {"padding": f"import base64\nexec(base64.b64decode({encoded!r}).decode())\n"},                          # encoded, decoded
        "sol": {"padding": "import json\nfrom transformer_tutorial.assignments import exercise_folder\n"               # the solution
                           f"nb = json.load(open(exercise_folder() / 'ex02_masks.ipynb'))\n{run_solutions}\n"},          # notebook it ships
        "cls": {"padding": f"import json\nnb = json.load(open({str(ada)!r}))\n{run_solutions}\n"},                     # a classmate's, run
    })
    return cheats


RUN_THE_REFERENCE = {"vic", "att", "src", "b64"}   # points they earn stand, flagged by the code prints of what runs


SECRET = "earlier,ex02_masks,2.0,a grade of an earlier run"
TEACHERS_SECRET = "a token in the teacher's environment"
LINK = "lnk\x1b]0;pwned\x07\x1b[2J"   # a student folder whose name holds terminal escape sequences


def _harms(folder, out, port):
    "Students who do harm without a point to gain: read an earlier run's grades and a classmate's notebook into their feedback, send a datagram to `port` (UDP), raise a 20 MB message, hold memory in a memfd, fill the disk, read other processes' environments, keep every core busy, hand in a symbolic link to a classmate's notebook."
    read = f"def padding_mask(tokens, pad_id):\n    raise ValueError(open({str(out)!r}).read() + open({str(folder / 'ada' / 'ex02_masks.ipynb')!r}).read())\n"
    for student, padding in (("rea", read), ("big", "def padding_mask(tokens, pad_id):\n    raise ValueError('x' * 20_000_000)\n")):
        _cheat(folder, student, padding=padding)
    _cheat(folder, "udo", f"import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'the grades', ('127.0.0.1', {port}))")
    # memory a file descriptor holds and no process maps: the resident-memory watch would not see it
    hoard = "import os\ntry:\n    fd = os.memfd_create('hoard'); os.posix_fallocate(fd, 0, 256 << 20); HELD = 'held 256 MiB'\n" \
            "except OSError as e:\n    HELD = f'memfd_create: {type(e).__name__}'"
    _cheat(folder, "mem", hoard, padding="def padding_mask(tokens, pad_id):\n    raise ValueError(HELD)\n")
    # 1200 MiB of files, in 400 MiB files (under the 1 GiB a file may be), their blocks taken by fallocate: writing them
    # costs seconds of processor time (4.5 s here, in the kernel), enough with the kernel's start to meet --cpu first
    fill = "import os, time\nfor i in range(3):\n    with open(f'fill{i}', 'wb') as f: os.posix_fallocate(f.fileno(), 0, 400 << 20)\n" \
           "time.sleep(5)"
    _cheat(folder, "dsk", fill)
    # every other process's environment it can read (the grader's holds the teacher's secret)
    spy = "def padding_mask(tokens, pad_id):\n    import os\n    seen = []\n    for pid in os.listdir('/proc'):\n" \
          "        if not pid.isdigit() or int(pid) == os.getpid(): continue\n" \
          "        try: seen.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n" \
          "        except OSError: pass\n" \
          "    raise ValueError(f'{len(seen)} environments: ' + ' '.join(seen))\n"
    _cheat(folder, "env", padding=spy)
    # every core kept busy: the kernel and three processes it forks spin (under --cpu 15: an honest kernel here uses 6 to 7 s, its start and the checks)
    _cheat(folder, "cpu", "import os\nfor _ in range(2): os.fork()\nwhile True: pass")
    (folder / LINK).mkdir(parents=True)
    (folder / LINK / "ex02_masks.ipynb").symlink_to(folder / "ada" / "ex02_masks.ipynb")
    return ["rea", "udo", "big", "mem", "dsk", "env", "cpu", LINK]


@pytest.fixture(scope="module")
def cheating_class(grader, tmp_path_factory):
    "A class on the masks exercise: Ada solved it, Una handed it in untouched, one student per cheat, and the harms; graded once, timed, beside an earlier run's grades."
    root = tmp_path_factory.mktemp("cheats")
    folder, out = root / "class", root / "out" / "grades.csv"
    _cheat(folder, "ada", solved=True); _cheat(folder, "una")
    cheats = _cheats(folder, out)
    for student, code in cheats.items(): _cheat(folder, student, **(code if isinstance(code, dict) else {"code": code}))
    import socket
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    cheats["harms"] = _harms(folder, out, listener.getsockname()[1])
    out.parent.mkdir(parents=True)
    out.write_text(f"{','.join(grading.COLUMNS)}\n{SECRET}\n", encoding="utf-8")   # what an earlier run wrote
    before = {p: p.read_bytes() for p in folder.rglob("*.ipynb")}
    start = time.time()
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", "20", "--notebook-timeout", "60", "--memory", "1",
                      "--processes", "8", "--output", "1", "--disk", "1", "--cpu", "15", "--jobs", "2"], root, TEACHERS_SECRET=TEACHERS_SECRET)
    took = time.time() - start
    time.sleep(6)  # sly's process would have written by now, had it lived
    listener.setblocking(False)
    try: cheats["received"] = [listener.recv(100)]
    except BlockingIOError: cheats["received"] = []
    listener.close()
    return root, r, before, cheats, took


@NEEDS_PROC
def test_no_cheat_scores_above_the_untouched_notebook_and_each_is_flagged_or_stopped(cheating_class):
    root, r, before, cheats, took = cheating_class
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    rows = _rows(root / "out" / "grades.csv")
    print(f"graded {len(rows)} notebooks in {took:.0f} s ({r.stdout.strip().splitlines()[-1]})")
    for row in rows: print(f"{grading.printable(row['student']):6} {row['points']:>4}  {row['status']:10} {(row['integrity'] or row['notes'])[:110]}")
    by = {row["student"]: row for row in rows}
    harms = cheats["harms"]
    cheats = {k: v for k, v in cheats.items() if k not in ("harms", "received")}
    assert set(by) == {"ada", "una", *cheats, *harms}
    assert (float(by["ada"]["points"]), float(by["una"]["points"])) == (2.0, 0.0)
    for student in harms: assert float(by[student]["points"]) == 0, by[student]
    for student in cheats:   # the reference run (through a list, a computed name, a file, a decoded string): the point stands, flagged
        assert float(by[student]["points"]) <= float(by["una"]["points"]) or student in RUN_THE_REFERENCE, by[student]
        assert by[student]["integrity"] or by[student]["status"] != "ok", by[student]
    flagged = {"rex": "rebinds the check", "pat": "patches the course's package", "pax": "reaches into the interpreter's internals",
               "sam": "installs an IPython or interpreter hook", "eva": "installs an IPython or interpreter hook",
               "ian": "installs an IPython or interpreter hook", "syd": "ends or signals a process", "quinn": "ends or signals a process",
               "gil": "writes or deletes files", "fox": "starts processes", "sly": "starts processes", "del": "writes or deletes files",
               "jon": "patches a module it imported", "fmt": "installs an IPython or interpreter hook", "zoe": "starts processes", **{s: "runs the code of transformer_tutorial.masks.padding_mask" for s in RUN_THE_REFERENCE},
               "ray": "starts processes"}
    for student, flag in flagged.items(): assert flag in by[student]["integrity"], by[student]
    if landlock_abi():  # the solution notebook the package ships, and a classmate's: neither can be read, so neither runs
        assert by["sol"]["points"] == by["cls"]["points"] == "0.0", (by["sol"], by["cls"])
    stopped = {s: by[s]["notes"] for s in ("lou", "fox", "hog", "ned", "dsk", "cpu")}
    assert "printed more than 1 MiB" in stopped["lou"] or "resident memory" in stopped["lou"], stopped
    assert "ran more than 8 processes at once" in stopped["fox"] and "more than 1 GiB of resident memory" in stopped["hog"], stopped
    assert "did not stop when interrupted" in stopped["ned"] and by["quinn"]["status"] == "crashed", stopped
    assert "wrote more than 1 GiB of files" in stopped["dsk"] and by["dsk"]["status"] == "stopped", stopped
    assert "used more than 15 s of processor time" in stopped["cpu"] and by["cpu"]["status"] == "stopped", stopped
    for student in stopped:  # each breach is in the student's feedback too, with the limit it broke
        assert by[student]["notes"].split(";")[-1].strip() in (root / "out" / "grades_feedback" / f"{student}.md").read_text(encoding="utf-8")


@NEEDS_PROC
def test_no_harm_reaches_the_teacher(cheating_class):
    "Nobody reads the grades or a classmate's notebook, nothing a kernel started outlives grading, a 20 MB message leaves the grades readable by csv's default field limit, no memfd is made, no other process's environment is read, a symbolic link is refused and kept, and no escape sequence reaches the terminal."
    root, r, before, cheats, took = cheating_class
    rows = {row["student"]: row for row in _rows(root / "out" / "grades.csv")}   # csv's default field limit, 131072 characters
    rea = rows["rea"]["first_failure"]
    assert "PermissionError" in rea and "earlier run" not in rea and "nbgrader" not in rea, rea
    assert "PermissionError" in (root / "out" / "grades_feedback" / "rea.md").read_text(encoding="utf-8")
    big = rows["big"]["first_failure"]
    assert big.startswith("check_padding_mask: AssertionError: padding_mask: raised ValueError: xxx") and "more characters cut" in big, big[:300]
    assert len(big) < 3000 and max(len(v) for row in rows.values() for v in row.values()) < 131072
    assert (rows[LINK]["status"], rows[LINK]["points"]) == ("refused", "0.0") and "a symbolic link" in rows[LINK]["notes"], rows[LINK]
    link = root / "class" / LINK / "ex02_masks.ipynb"
    assert link.is_symlink() and link.resolve() == (root / "class" / "ada" / "ex02_masks.ipynb").resolve()
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr and "lnk?]0;pwned??[2J/ex02_masks.ipynb: a symbolic link" in r.stderr, r.stderr
    def cmdline(pid):
        try: return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError: return b""
    left = [cmdline(p) for p in os.listdir("/proc") if p.isdigit() and cmdline(p).split(b"\0")[1:2] in ([b"97.25"], [b"97.5"])]  # zoe's, ray's
    assert left == [], left
    assert cheats["received"] == [], cheats["received"]   # udo's datagram: refused in the kernel
    if landlock_abi() and grading.sandbox._SECCOMP_ARCH.get(__import__("platform").machine().lower()):
        assert "memfd_create: PermissionError" in rows["mem"]["first_failure"], rows["mem"]   # refused in the kernel
    if landlock_abi():  # of /proc, the kernel reads only its own process
        assert "ValueError: 0 environments: " in rows["env"]["first_failure"], rows["env"]
    assert TEACHERS_SECRET not in (root / "out" / "grades.csv").read_text(encoding="utf-8") + (root / "out" / "grades_feedback" / "env.md").read_text(encoding="utf-8")


@NEEDS_PROC
def test_a_cheat_changes_no_other_students_file_or_grade(cheating_class):
    root, r, before, cheats, took = cheating_class
    assert {p: p.read_bytes() for p in (root / "class").rglob("*.ipynb")} == before  # sly's late write, gil's, del's: none stayed
    rows = _rows(root / "out" / "grades.csv")
    assert not any(row["student"] == "gil" and row["points"] == "2.0" for row in rows)
    assert "**2 / 2 points**" in (root / "out" / "grades_feedback" / "ada.md").read_text(encoding="utf-8")
    assert "**0 / 2 points**" in (root / "out" / "grades_feedback" / "gil.md").read_text(encoding="utf-8")
    cache = json.loads((root / "out" / ".grades.csv.cache.json").read_text(encoding="utf-8"))
    assert len(cache) == len([row for row in rows if row["status"] != "refused"])  # the grader's own cache, not gil's (the link ran nowhere)
    again = _rows(root / "out" / "grades.csv")
    assert {row["student"]: row["points"] for row in again} == {row["student"]: row["points"] for row in rows}


def test_without_a_sandbox_the_class_is_put_back_and_the_writer_flagged(tmp_path):
    "With Landlock turned off, a kernel's writes happen: the grader puts the submissions folder back and flags who ran then."
    folder, out = tmp_path / "class", tmp_path / "out" / "grades.csv"
    ada = _cheat(folder, "ada", solved=True)
    _cheat(folder, "gil", f"open({str(ada)!r}, 'w').write('{{}}')\nopen({str(folder / 'gil' / 'planted.ipynb')!r}, 'w').write('{{}}')")
    before = ada.read_bytes()
    grades = grade_folder(folder, out, Limits(cell_seconds=20), jobs=1, sandbox=False, progress=False)
    assert ada.read_bytes() == before and not (folder / "gil" / "planted.ipynb").exists()
    assert [(r["student"], r["points"]) for r in grades.rows] == [("ada", 2.0), ("gil", 0.0)]
    assert "files of the class changed while it ran" in grades.rows[1]["integrity"] and "writes or deletes files" in grades.rows[1]["integrity"]
    assert any("put back as they were: ada/ex02_masks.ipynb (changed: put back), gil/planted.ipynb (added: removed)" in p for p in grades.problems), grades.problems


# ---------------------------------------------------------------- the generated class, through both graders
@pytest.fixture(scope="module")
def batch(grader, tmp_path_factory):
    "The class in STUDENT/EXERCISE.ipynb, plus the bad input of the issue's table beside it, graded once."
    root = tmp_path_factory.mktemp("batch")
    write_class(root / "class")
    ada, c = root / "class" / "ada", root / "class"
    def put(rel, data):
        (c / rel).parent.mkdir(parents=True, exist_ok=True)
        (c / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    put("hal/ex01_attention.ipynb", (ada / "ex02_masks.ipynb").read_bytes())                 # a notebook of another exercise
    put("Ada/ex01_attention.ipynb", (ada / "ex01_attention.ipynb").read_bytes())             # a name that differs in case only
    put("ivy/notes.txt", "my notes")
    bare = {**_nb("ex02_masks"), "cells": [c for c in _nb("ex02_masks")["cells"] if "grade" not in c["metadata"].get("nbgrader", {})
                                           or not c["metadata"]["nbgrader"]["grade"]]}
    put("ivy/homework.ipynb", json.dumps(bare))                                              # no exercise at all
    put("ivy/ex01_attention.ipynb", '{"cells": [')                                          # not valid JSON: cut short by a failed upload
    put("jo/ex02_masks.ipynb", json.dumps({**_nb("ex02_masks"), "cells": [c for c in _nb("ex02_masks")["cells"] if c["cell_type"] == "markdown"]}))
    put("..Zoë Ünal/ex02_masks.ipynb", (ada / "ex02_masks.ipynb").read_bytes())             # dots, a space and accents
    put("a.b/ex02_masks.ipynb", (ada / "ex02_masks.ipynb").read_bytes())
    put("kit/ex02_masks.ipynb", (ada / "ex02_masks.ipynb").read_bytes())                     # two notebooks for one exercise
    put("kit/ex02_masks (copy).ipynb", (root / "class" / "ben" / "ex02_masks.ipynb").read_bytes())
    deleting = json.loads((ada / "ex02_masks.ipynb").read_text())                            # deletes its own file while it runs
    deleting["cells"].insert(0, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                 "source": f"import os\nos.remove('ex02_masks.ipynb')\nos.remove({str(c / 'del' / 'ex02_masks.ipynb')!r})"})
    put("del/ex02_masks.ipynb", json.dumps(deleting))
    odd = json.loads((ada / "ex02_masks.ipynb").read_text())                                  # metadata a hand edit left: no mapping, a
    odd["cells"][0]["metadata"]["nbgrader"] = None                                           # grade id that is a list
    odd["cells"].append({"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": ["x"]}}, "outputs": [],
                         "execution_count": None, "source": "1"})
    put("odd/ex02_masks.ipynb", json.dumps(odd))
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", str(TIMEOUT), "--jobs", "2"], root)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return root, r


def test_batch_grader_gives_each_student_the_grade_deserved(batch):
    root, r = batch
    print(r.stdout)
    rows = _rows(root / "out" / "grades.csv")
    assert _totals(rows) == EXPECTED
    by = {(row["student"], row["exercise"]): row for row in rows if row["student"] in CLASS}
    assert {k for k, row in by.items() if row["status"] != "ok"} == {("dee", "ex01_attention")}
    assert by["dee", "ex01_attention"]["status"] == "timed out" and f"ran longer than {TIMEOUT} s" in by["dee", "ex01_attention"]["notes"]
    assert by["cy", "ex01_attention"]["first_failure"] == "check_scaled_dot_product_attention: NameError: name 'scaled_dot_product_attention' is not defined"
    assert "no scaling" in by["gus", "ex01_attention"]["first_failure"]
    assert by["ben", "ex02_masks"]["passed"] == "check_causal_mask" and "NotImplementedError" in by["ben", "ex02_masks"]["first_failure"]
    assert by["eve", "ex01_attention"]["notes"] == "check_scaled_dot_product_attention was edited: the original ran"
    assert by["eve", "ex02_masks"]["notes"] == "check_causal_mask is missing (deleted?): 0 points"
    assert by["fay", "ex01_attention"]["integrity"] == "imports scaled_dot_product_attention from transformer_tutorial.attention"
    assert by["fay", "ex02_masks"]["integrity"] == "padding_mask is a copy of transformer_tutorial.masks.padding_mask"
    assert by["kim", "ex02_masks"]["integrity"].startswith("rebinds the check check_padding_mask")
    assert "patches the course's package" in by["lee", "ex02_masks"]["integrity"]
    assert by["mo", "ex02_masks"]["integrity"].startswith("installs an IPython or interpreter hook")
    assert {k for k, row in by.items() if row["integrity"]} == {("fay", "ex01_attention"), ("fay", "ex02_masks"), ("kim", "ex02_masks"),
                                                               ("lee", "ex02_masks"), ("mo", "ex02_masks")}
    assert {k for k, row in by.items() if row["notes"]} == {("dee", "ex01_attention"), ("eve", "ex01_attention"), ("eve", "ex02_masks")}
    for student, points in EXPECTED.items():
        assert f"**{points:g} / 3 points**" in (root / "out" / "grades_feedback" / f"{student}.md").read_text(encoding="utf-8")


def test_batch_grader_bad_input_is_one_row_and_line_each_and_the_rest_is_graded(batch):
    root, r = batch
    lines = [line for line in r.stderr.splitlines() if line.startswith("transformer-tutorial grade: ")]  # not the progress bar
    broken = [line for line in lines if line.startswith("transformer-tutorial grade: ivy/ex01_attention.ipynb: not a readable notebook (")]
    assert len(broken) == 1 and broken[0].endswith("), skipped"), lines
    assert sorted(set(lines) - set(broken)) == sorted("transformer-tutorial grade: " + line for line in [
        "hal/ex01_attention.ipynb: holds exercise ex02_masks (by its check cells): graded as ex02_masks",
        "ivy/homework.ipynb: no check cells, and its name is none of the exercises' (ex01_attention, ex02_masks, "
        "ex03_multi_head_attention, ex04_positional_encoding, ex05_layer_norm_feed_forward, ex06_encoder_decoder_layers, "
        "ex07_loss_and_schedule, ex08_online_softmax_tiled_attention, ex09_byte_pair_encoding, ex10_training_step, "
        "ex11_greedy_decoding_cache, ex12_beam_search, ex13_gpt_and_sampling): skipped",
        "ivy/notes.txt: not a notebook (.ipynb), skipped",
        "jo/ex02_masks.ipynb: has no check cells of ex02_masks (deleted?): each counts 0",
        "kit/ex02_masks (copy).ipynb: a second notebook of ex02_masks for kit (kit/ex02_masks.ipynb is graded), skipped",
        "student folders 'Ada', 'ada' look like one student: each is graded under its own name; merge them by hand if they are"])
    rows = {(row["student"], row["notebook"]): row for row in _rows(root / "out" / "grades.csv")}
    got = {k: (row["exercise"], row["points"], row["max_points"], row["status"]) for k, row in rows.items() if k[0] not in CLASS}
    assert got == {("Ada", "Ada/ex01_attention.ipynb"): ("ex01_attention", "1.0", "1.0", "ok"),
                   ("hal", "hal/ex01_attention.ipynb"): ("ex02_masks", "2.0", "2.0", "ok"),
                   ("ivy", "ivy/ex01_attention.ipynb"): ("ex01_attention", "0.0", "1.0", "unreadable"),
                   ("ivy", "ivy/homework.ipynb"): ("", "0.0", "0.0", "not graded"),
                   ("jo", "jo/ex02_masks.ipynb"): ("ex02_masks", "0.0", "2.0", "ok"),
                   ("..Zoë Ünal", "..Zoë Ünal/ex02_masks.ipynb"): ("ex02_masks", "2.0", "2.0", "ok"),
                   ("a.b", "a.b/ex02_masks.ipynb"): ("ex02_masks", "2.0", "2.0", "ok"),
                   ("kit", "kit/ex02_masks.ipynb"): ("ex02_masks", "2.0", "2.0", "ok"),                # the one named as the exercise
                   ("kit", "kit/ex02_masks (copy).ipynb"): ("ex02_masks", "0.0", "0.0", "not graded"),
                   ("del", "del/ex02_masks.ipynb"): ("ex02_masks", "2.0", "2.0", "ok"),
                   ("odd", "odd/ex02_masks.ipynb"): ("ex02_masks", "2.0", "2.0", "ok")}
    assert rows["hal", "hal/ex01_attention.ipynb"]["notes"] == "holds exercise ex02_masks (by its check cells): graded as ex02_masks"
    assert rows["ivy", "ivy/ex01_attention.ipynb"]["notes"].startswith("not a readable notebook (")  # the error's name is nbformat's
    assert rows["jo", "jo/ex02_masks.ipynb"]["notes"].startswith("has no check cells of ex02_masks (deleted?): each counts 0; it has no code cells")
    assert rows["kit", "kit/ex02_masks (copy).ipynb"]["notes"] == "a second notebook of ex02_masks: kit/ex02_masks.ipynb is the one graded"
    assert "writes or deletes files" in rows["del", "del/ex02_masks.ipynb"]["integrity"]
    assert (root / "class" / "del" / "ex02_masks.ipynb").is_file() and (root / "out" / "grades_feedback" / "..Zoë Ünal.md").is_file()


def test_batch_grader_rerun_skips_unchanged_submissions(batch, grader):
    root, _ = batch
    before = (root / "out" / "grades.csv").read_text(encoding="utf-8")
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", str(TIMEOUT)], root)
    assert r.returncode == 0 and "graded 31 notebooks of 19 students (28 unchanged since the last run, not rerun)" in r.stdout, r.stdout + r.stderr
    assert (root / "out" / "grades.csv").read_text(encoding="utf-8") == before


@pytest.fixture(scope="module")
def nbgrader_course(grader, tmp_path_factory):
    "A course folder with the two exercises, released, submitted by the class, collected, autograded, fed back and exported."
    root = tmp_path_factory.mktemp("nbgrader")
    course, exchange = root / "course", root / "exchange"
    (course / "source" / "transformer").mkdir(parents=True); exchange.mkdir()
    for e in EXERCISES: (course / "source" / "transformer" / f"{e}.ipynb").write_bytes((exercise_folder() / f"{e}.ipynb").read_bytes())
    (course / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.CourseDirectory.course_id = "transformer-course"\nc.CourseDirectory.root = r"{course}"\n'
        f'c.Exchange.root = r"{exchange}"\nc.Execute.timeout = {TIMEOUT}\n'
        'c.CollectApp.check_owner = False  # every student submits as the user running the test\n')
    logs = {}
    for step in (["generate_assignment", "transformer"], ["release_assignment", "transformer"]): logs[step[0]] = grader.nbgrader(step, course)
    write_class(root / "students", "{student}/transformer/{exercise}.ipynb")
    for student in CLASS:
        grader.nbgrader(["submit", "transformer", "--course", "transformer-course", f"--student={student}",
                         f"--Exchange.root={exchange}"], root / "students" / student)
    for step in (["collect", "transformer"], ["autograde", "transformer"], ["generate_feedback", "transformer"], ["export"]):
        logs[step[0]] = grader.nbgrader(step, course)
    return course, logs


@NEEDS_NBGRADER
def test_nbgrader_loop_grades_every_student_but_the_forger(nbgrader_course, grader):
    course, logs = nbgrader_course
    rows = _rows(course / "grades.csv")
    assert {r["student_id"]: float(r["score"]) for r in rows} == NBGRADER_EXPECTED and {r["max_score"] for r in rows} == {"3.0"}
    for student in CLASS:
        for e in EXERCISES: assert (course / "feedback" / student / "transformer" / f"{e}.html").is_file(), (student, e)
    # the hung cell was interrupted, and its check scored 0
    dee = nbformat.read(course / "autograded" / "dee" / "transformer" / "ex01_attention.ipynb", as_version=4)
    check = next(c for c in dee.cells if c.source.startswith("check_"))
    assert "CellTimeoutError" in [o.get("ename") for o in check.outputs]
    # the edited check cell: found by its checksum and replaced by the original, which failed
    assert "Attribute 'checksum' for cell ex01_attention_check_scaled_dot_product_attention has changed" in logs["autograde"]
    eve = nbformat.read(course / "autograded" / "eve" / "transformer" / "ex01_attention.ipynb", as_version=4)
    check = next(c for c in eve.cells if c.metadata.get("nbgrader", {}).get("grade"))
    assert check.source == "check_scaled_dot_product_attention(scaled_dot_product_attention)"
    # lee's patch of the checks was caught inside the kernel, by the checks' own guard
    lee = nbformat.read(course / "autograded" / "lee" / "transformer" / "ex02_masks.ipynb", as_version=4)
    errors = [o.get("evalue", "") for c in lee.cells if c.source.startswith("check_") for o in c.outputs if o.get("output_type") == "error"]
    assert len(errors) == 2 and all("was replaced or removed in this session" in e for e in errors), errors
    # the deleted check cell: no score, and the notebook waits for a manual grade
    query = ("from nbgrader.api import Gradebook\nwith Gradebook('sqlite:///gradebook.db') as gb:\n"
             "    nb = gb.find_submission_notebook('ex02_masks', 'transformer', 'eve')\n"
             "    print(nb.needs_manual_grade, [(g.name, g.auto_score) for g in nb.grades])")
    r = subprocess.run([grader.python, "-c", query], cwd=course, capture_output=True, text=True, env=grader.nbgrader_env)
    assert r.stdout.strip() == "True [('ex02_masks_check_padding_mask', 1.0), ('ex02_masks_check_causal_mask', None)]", r.stdout + r.stderr


@NEEDS_NBGRADER
def test_batch_grader_reads_nbgrader_folders_and_agrees_but_where_nbgrader_was_forged(nbgrader_course, batch, grader):
    "nbgrader's submitted/ holds the same notebooks, so the batch grader's cache answers for all of them; it agrees with nbgrader but for the forger."
    course, _ = nbgrader_course
    root, _ = batch
    r = grader.grade([str(course), "--out", "out/grades.csv", "--timeout", str(TIMEOUT)], root)
    n = len(CLASS) * len(EXERCISES)
    assert r.returncode == 0 and f"graded {n} notebooks of {len(CLASS)} students ({n} unchanged" in r.stdout, r.stdout + r.stderr
    rows = _rows(root / "out" / "grades.csv")
    assert {row["notebook"] for row in rows} == {f"submitted/{s}/transformer/{e}.ipynb" for s in CLASS for e in EXERCISES}
    batch_totals, nbgrader_totals = _totals(rows), {r["student_id"]: float(r["score"]) for r in _rows(course / "grades.csv")}
    assert {s for s in CLASS if batch_totals[s] != nbgrader_totals[s]} == {"kim"} and batch_totals["kim"] < nbgrader_totals["kim"]


def test_a_check_cell_run_in_the_kernel_calls_the_course_s_check_whatever_the_notebook_bound():
    code = grading.running._guarded("check_padding_mask(padding_mask)", ["check_padding_mask", "check_causal_mask"], "ab12cd34")
    assert code == "from transformer_tutorial.checks import check_padding_mask as _tt_ab12cd34_check_padding_mask\n" \
                   "_tt_ab12cd34_check_padding_mask(padding_mask)"
    ns = {"check_padding_mask": lambda f: None, "padding_mask": lambda tokens, pad_id: None}   # rebound, and a wrong mask
    with pytest.raises(AssertionError, match="padding_mask"): exec(code, ns)


def test_exercise_10_is_graded_in_the_kernel_and_the_notes_say_why(grader, tmp_path):
    "Its checks hand the student's code a model and an optimizer, which the wire cannot send: they run in the kernel; the solution scores 2 of 2, the untouched student version 0, failing with NotImplementedError."
    solution = json.loads((exercise_folder() / "ex10_training_step.ipynb").read_text(encoding="utf-8"))
    student = json.loads(json.dumps(solution))
    for c in student["cells"]:
        if c["metadata"].get("nbgrader", {}).get("solution"): c["source"] = strip_solutions("".join(c["source"]))
    cheats = {"rex": "check_train_step = check_train_loop = lambda f: None",                 # the check cells run in the kernel: each
              "zed": "globals().__setitem__('check_train_step', lambda f: None)\n"           # calls the course's check under a private
                     "get_ipython().user_ns['check_train_loop'] = print"}                     # name it imports itself
    forged = {who: json.loads(json.dumps(student)) for who in cheats}
    for who, code in cheats.items():
        first = next(c for c in forged[who]["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
        first["source"] = "".join(first["source"]) + "\n" + code
    for who, nb in (("ada", solution), ("una", student), *forged.items()):
        (tmp_path / "class" / who).mkdir(parents=True)
        (tmp_path / "class" / who / "ex10_training_step.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", "300"], tmp_path)  # the training demonstration may take a while
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    by = {row["student"]: row for row in _rows(tmp_path / "out" / "grades.csv")}
    assert (float(by["ada"]["points"]), float(by["ada"]["max_points"])) == (2, 2), by["ada"]
    assert by["ada"]["notes"].count("which cannot cross to the kernel") == 2, by["ada"]
    assert float(by["una"]["points"]) == 0 and "NotImplementedError" in by["una"]["first_failure"], by["una"]
    for who in cheats: assert float(by[who]["points"]) == 0 and "NotImplementedError" in by[who]["first_failure"], by[who]
    assert "rebinds the check check_train_step" in by["rex"]["integrity"], by["rex"]
    assert by["zed"]["integrity"].count("reaches a namespace by hand") == 2, by["zed"]


# ---------------------------------------------------------------- every exercise, honest and handed out, twice in shuffled orders
WRONG = {"ex03_multi_head_attention": ("out, weights = scaled_dot_product_attention(q, k, v, mask)",   # the mask ignored
                                       "out, weights = scaled_dot_product_attention(q, k, v, None)"),
         "ex06_encoder_decoder_layers": ("return x + self.dropout(self.feed_forward(self.norm2(x)))",  # no residual round the
                                         "return self.dropout(self.feed_forward(self.norm2(x)))"),     # encoder's feed-forward
         "ex13_gpt_and_sampling": ("logits.masked_fill(logits < kth, -math.inf)", "logits.masked_fill(logits <= kth, -math.inf)")}
TWINS = ["ex03_multi_head_attention", "ex06_encoder_decoder_layers"]  # handed in byte for byte by a second student


def _wrong(text, old, new):
    "The notebook `text` with `old` replaced by `new` in the one cell that holds it."
    nb = json.loads(text)
    cells = [c for c in nb["cells"] if old in "".join(c["source"])]
    assert len(cells) == 1, old
    cells[0]["source"] = "".join(cells[0]["source"]).replace(old, new)
    return json.dumps(nb)


@pytest.fixture(scope="module")
def every_exercise(grader, tmp_path_factory):
    "All 13 solution notebooks, all 13 handed-out versions, three wrong notebooks and two twins, graded by `transformer-tutorial grade --jobs 2` twice, each time in another shuffled order (the pool takes the notebooks in the students' order), each on a fresh cache."
    import random
    from transformer_tutorial.assignments import make_assignments
    root = tmp_path_factory.mktemp("every")
    make_assignments(root / "handed_out")
    versions = {}
    for path in sorted(exercise_folder().glob("ex*.ipynb")):
        versions["solution", path.stem] = path.read_text(encoding="utf-8")
        versions["handed out", path.stem] = (root / "handed_out" / path.name).read_text(encoding="utf-8")
    for e, (old, new) in WRONG.items(): versions["wrong", e] = _wrong(versions["solution", e], old, new)
    for e in TWINS: versions["twin", e] = versions["solution", e]
    runs = []
    for seed in (1, 2):
        order = sorted(versions)
        random.Random(seed).shuffle(order)
        who = {f"s{i:02d}": kind for i, kind in enumerate(order)}
        for student, (kind, e) in who.items():
            (root / f"run{seed}" / student).mkdir(parents=True)
            (root / f"run{seed}" / student / f"{e}.ipynb").write_text(versions[kind, e], encoding="utf-8")
        start = time.time()
        r = grader.grade([f"run{seed}", "--out", f"out{seed}/grades.csv", "--jobs", "2", "--timeout", "300"], root)
        runs.append((who, r, _rows(root / f"out{seed}" / "grades.csv") if r.returncode == 0 else [], time.time() - start))
    return runs


def test_every_solution_gets_full_marks_and_every_handed_out_version_none_in_any_order(every_exercise, grader):
    "Full marks for every solution, save where the grader cannot run a check: exercise 8's Triton check on a grader without Triton (the environment learners get from the wheel) gives no point and says why, as test_a_check_that_cannot_run_where_graded_gives_no_point holds."
    wrong, triton = {}, grader.has("triton")
    for who, r, rows, took in every_exercise:
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        print(f"graded {len(rows)} notebooks in {took:.0f} s")
        assert len(rows) == len(who) == 31
        for row in rows:
            kind, e = who[row["student"]]
            got = (row["exercise"], float(row["points"]), float(row["max_points"]), row["status"])
            if kind in ("solution", "twin") and e == "ex08_online_softmax_tiled_attention" and not triton:
                assert got == (e, got[2] - 1, got[2], "ok") and row["first_failure"].startswith(
                    "check_triton_tiled_attention: triton_tiled_attention: skipped, Triton is not installed here"), (kind, row)
            elif kind in ("solution", "twin"): assert got == (e, got[2], got[2], "ok") and got[2] > 0, (kind, row)
            elif kind == "handed out": assert got == (e, 0.0, got[2], "ok") and "NotImplementedError" in row["first_failure"], (kind, row)
            else:
                assert 0 < got[1] < got[2] and got[3] == "ok", (kind, row)
                wrong.setdefault(e, set()).add((got[1], row["first_failure"].split(":")[0]))
    assert all(len(seen) == 1 for seen in wrong.values()), wrong   # the same check fails in either order, on either run's inputs
