"Chapter 20's helpers: fair timing (interleaved, on the process's threads), operator counts from the profiler, and `compile_model`'s fallback (behaviour, never timings)."
import warnings
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformer_tutorial import fast
from transformer_tutorial.fast import time_steps, count_ops, compile_model, CompiledModel


def test_time_steps_interleaves_on_the_process_threads():
    calls, threads = [], []
    def a(): calls.append('a'); threads.append(torch.get_num_threads())
    def b(): calls.append('b')
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # Timer's own default is 1 thread: the helper must keep the process's
    try: times = time_steps({'a': a, 'b': b}, rounds=3, min_run_time=0.01)
    finally: torch.set_num_threads(before)
    assert set(times) == {'a', 'b'} and all(t > 0 for t in times.values())
    assert set(threads) == {2}
    runs = [c for i, c in enumerate(calls) if i == 0 or calls[i - 1] != c]  # a a a b b a a b b ... -> a b a b ...
    assert len(runs) >= 2 * 3 + 2, runs  # warm-up a, b, then a and b in each of the 3 rounds


def test_time_steps_needs_a_function():
    with pytest.raises(ValueError, match='fns is empty'): time_steps({})


def test_count_ops_counts_the_outermost_operators():
    x, w = torch.randn(4, 3), torch.randn(2, 3)
    def f():
        y = x + x
        F.linear(y, w)  # aten::linear calls aten::t and aten::matmul/mm inside: counted once, as aten::linear
        return y * y * y
    ops = count_ops(f)
    assert ops['aten::add'] == 1 and ops['aten::mul'] == 2 and ops['aten::linear'] == 1
    assert 'aten::mm' not in ops and 'aten::t' not in ops


def broken_backend(graph, example_inputs):
    raise RuntimeError("cannot find a C++ compiler\nand a second line")


def test_compile_model_falls_back_with_one_warning():
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(3, 4)
    compiled = compile_model(model, backend=broken_backend)
    assert isinstance(compiled, CompiledModel) and compiled.fell_back is None
    with pytest.warns(RuntimeWarning, match='fell back to the uncompiled model: RuntimeError: cannot find a C.. compiler$') as caught:
        y = compiled(x)
    assert len(caught) == 1 and compiled.fell_back == 'RuntimeError: cannot find a C++ compiler'
    assert torch.equal(y, model(x))
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # no second warning
        assert torch.equal(compiled(x), model(x))
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]  # training it trains `model`


def test_compile_model_where_torch_compile_itself_refuses(monkeypatch):
    def refuse(*args, **kwargs): raise RuntimeError("Python 3.99+ is not supported by torch.compile")
    monkeypatch.setattr(torch, 'compile', refuse)
    model = nn.Linear(2, 2)
    with pytest.warns(RuntimeWarning, match='fell back.*Python 3.99. is not supported'):
        assert compile_model(model) is model


def test_compile_model_without_a_cxx_compiler(monkeypatch):
    def never(*args, **kwargs): raise AssertionError("torch.compile was called without a C++ compiler")
    monkeypatch.setattr(torch, 'compile', never)
    monkeypatch.setattr(fast.shutil, 'which', lambda name: None)
    monkeypatch.delenv('CXX', raising=False)
    model = nn.Linear(2, 2)
    with pytest.warns(RuntimeWarning, match=r"no C\+\+ compiler"):
        assert compile_model(model) is model
    monkeypatch.setattr(fast.shutil, 'which', lambda name: '/usr/bin/' + name)  # with one, torch.compile is asked
    with pytest.warns(RuntimeWarning, match='fell back.*torch.compile was called'): compile_model(model)


def test_a_compiled_model_computes_what_the_model_does():
    "Through dynamo and AOTAutograd (no C++ compiler needed): the same outputs and gradients, no warning, and the inputs' own errors unchanged."
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), torch.randn(5, 4)
    twin = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)); twin.load_state_dict(model.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        compiled = compile_model(model, backend='aot_eager')
        compiled(x).square().sum().backward()
    twin(x).square().sum().backward()
    assert compiled.fell_back is None
    for p, q in zip(model.parameters(), twin.parameters()): torch.testing.assert_close(p.grad, q.grad)
    with pytest.raises(RuntimeError, match='cannot be multiplied'): compiled(torch.randn(5, 3))
    assert compiled.fell_back is None  # a wrong input is the caller's error, not a reason to stop compiling
