"The copy task: data, greedy decoding, evaluation and the one-call trainer."
import functools, types
import pytest
import torch
from torch import nn
import transformer_tutorial.copy_task as copy_task
from transformer_tutorial.copy_task import PAD, START, END, CopyTask, evaluate, train_task
from transformer_tutorial.decoding import greedy_decode


def test_samples():
    g = torch.Generator().manual_seed(0)
    src, tgt = CopyTask().sample(64, g)
    assert src.shape == (64, 10) and tgt.shape == (64, 11)
    n = (src != PAD).sum(1)
    assert n.min() >= 1 and n.max() <= 10 and ((src >= 3) & (src < 13) | (src == PAD)).all()
    assert (tgt[torch.arange(64), n] == END).all() and ((tgt == END).sum(1) == 1).all()
    assert all(tgt[i, :k].tolist() == src[i, :k].tolist() for i, k in enumerate(n.tolist()))
    g = torch.Generator().manual_seed(0)
    rsrc, rtgt = CopyTask(reverse=True).sample(64, g)
    assert torch.equal(rsrc, src) and all(rtgt[i, :k].tolist() == src[i, :k].flip(0).tolist() for i, k in enumerate(n.tolist()))
    fixed, _ = CopyTask(min_len=4, max_len=4).sample(8, g)
    assert (fixed != PAD).all()


def test_task_errors():
    with pytest.raises(ValueError, match='min_len'): CopyTask(min_len=5, max_len=3)
    with pytest.raises(ValueError, match='vocab_size'): CopyTask(vocab_size=3)
    with pytest.raises(ValueError, match="task must be 'copy' or 'reverse'"): train_task('sort', steps=1)


def test_batches_are_seeded():
    a, b, c = CopyTask().batches(4, seed=3), CopyTask().batches(4, seed=3), CopyTask().batches(4, seed=4)
    x, y, z = a(), b(), c()
    assert torch.equal(x.src, y.src) and not torch.equal(x.src, z.src)
    assert x.tgt_in[:, 0].eq(START).all()


class Oracle(nn.Module):
    "A hand-built model whose decoder outputs the source token at each position, then END (optionally never END)."
    def __init__(self, vocab=13, stop=True):
        super().__init__(); self.vocab, self.stop, self.w = vocab, stop, nn.Parameter(torch.zeros(1))
        self.config = types.SimpleNamespace(max_len=64, tgt_vocab_size=vocab)  # what the decoders check lengths against
    def encode(self, src, src_mask): return src
    def decode(self, ys, memory, tgt_mask, memory_mask):
        B, T = ys.shape
        padded = torch.nn.functional.pad(memory, (0, T), value=PAD)[:, :T]          # (B, T)
        nxt = padded.masked_fill(padded == PAD, END if self.stop else 3)
        return torch.nn.functional.one_hot(nxt, self.vocab).float()                  # (B, T, V)


def test_greedy_decode_mechanics():
    "The plain decoder (the oracle has no layers to cache)."
    src = torch.tensor([[5, 6, 7], [8, 0, 0]])
    out = greedy_decode(Oracle(), src, max_len=10, use_cache=False)
    assert out.tolist() == [[5, 6, 7, END], [8, END, PAD, PAD]]  # stops once every row has ended; pads after END
    out = greedy_decode(Oracle(stop=False), src, max_len=6, use_cache=False)
    assert out.shape == (2, 6) and (out != END).all()           # no END: stops at max_len


def test_evaluate_counts(monkeypatch):
    monkeypatch.setattr(copy_task, 'greedy_decode', functools.partial(greedy_decode, use_cache=False))  # the oracle has no layers
    task = CopyTask()
    assert evaluate(Oracle(), task, n=300) == {'exact_match': 1.0, 'token_accuracy': 1.0, 'n': 300}
    bad = evaluate(Oracle(stop=False), task, n=300)
    assert bad['exact_match'] == 0.0 and 0.5 < bad['token_accuracy'] < 1.0  # data right, END always wrong


def test_train_task_tiny_run_and_greedy():
    model, hist, metrics = train_task('copy', steps=60, eval_every=30, n_eval=200, progress=False, d_model=32, d_ff=64)
    assert len(hist['loss']) == 60 and hist['eval_step'] == [30, 60] and metrics['steps'] == 60
    assert sum(hist['loss'][-10:]) < 0.5 * sum(hist['loss'][:10])
    assert 0.3 < metrics['token_accuracy'] <= 1.0
    out = greedy_decode(model, torch.tensor([[3, 4, 5]]), 4)
    assert out.shape[1] <= 4 and out[0, 0].item() == 3  # a 60-step model already gets the first token


def test_one_loop_in_one_process_and_in_a_job():
    "`train_task` alone and `train_data_parallel` (its data-parallel `parallel`) at world size 1 train alike; the old name warns."
    from transformer_tutorial.data_parallel import train_data_parallel
    kw = dict(steps=40, eval_every=20, n_eval=100, progress=False, d_model=32, d_ff=64, device='cpu')
    _, one, m1 = train_task('reverse', **kw)
    _, job, m2 = train_data_parallel('reverse', accumulate=2, **kw)  # one process, each batch in two micro-batches
    assert one['eval_step'] == job['eval_step'] == [20, 40] and one['lr'] == job['lr']
    assert one['loss'] == pytest.approx(job['loss'], rel=1e-4) and m1 == pytest.approx(m2, abs=0.02)
    with pytest.warns(DeprecationWarning, match='train_copy_task is now called train_task'):
        _, old, _ = copy_task.train_copy_task('reverse', **kw)
    assert old['loss'] == one['loss']


def test_resume_goes_on_exactly(tmp_path):
    "A run saved at step 20 and resumed to 40 in one process ends where an uninterrupted 40-step run ends."
    kw = dict(eval_every=20, n_eval=50, progress=False, d_model=32, d_ff=64, device="cpu", schedule_steps=20)  # one schedule for both
    _, whole, _ = train_task('copy', steps=40, **kw)
    train_task('copy', steps=20, checkpoint=tmp_path / 'run', **kw)
    _, resumed, _ = train_task('copy', steps=40, resume=tmp_path / 'run', **kw)
    assert resumed['loss'] == whole['loss'] and resumed['eval_step'] == whole['eval_step']


def test_one_autocast_and_grad_scaler_for_the_whole_run(monkeypatch):
    "train_task makes its autocast and grad scaler once and hands them to every chunk, so an fp16 scaler's scale carries over between evaluations."
    from contextlib import nullcontext
    import transformer_tutorial.training as training
    calls = []
    monkeypatch.setattr(copy_task, '_autocast', lambda device: calls.append(device) or (nullcontext(), None))
    monkeypatch.setattr(training, '_autocast', lambda device: pytest.fail('a training chunk made its own grad scaler'))
    _, history, _ = copy_task.train_task('copy', steps=30, eval_every=10, n_eval=20, progress=False, d_model=16, d_ff=32, device='cpu')
    assert calls == [torch.device('cpu')] and history['eval_step'] == [10, 20, 30]


def test_train_task_compile_trains_the_same_model(monkeypatch):
    "compile=True trains through the compiled model (here dynamo + AOTAutograd, no C++ compiler needed): the same losses as without."
    compiled_calls = []
    real_compile = torch.compile
    def aot_eager(model, **kwargs):
        compiled_calls.append(model)
        return real_compile(model, **{**kwargs, 'backend': 'aot_eager'})
    monkeypatch.setattr(torch, 'compile', aot_eager)
    kw = dict(steps=12, eval_every=12, n_eval=20, progress=False, d_model=16, d_ff=32, device='cpu')
    _, plain, _ = train_task('copy', **kw)
    _, compiled, _ = train_task('copy', compile=True, **kw)
    assert len(compiled_calls) == 1
    assert compiled['loss'] == pytest.approx(plain['loss'], rel=1e-4, abs=1e-5)


def test_train_task_compile_falls_back_with_one_warning(monkeypatch):
    "Where torch.compile is not available, compile=True says so once and trains the plain model: the very same run."
    def refuse(*args, **kwargs): raise RuntimeError("Python 3.99+ is not supported")
    monkeypatch.setattr(torch, 'compile', refuse)
    kw = dict(steps=10, eval_every=10, n_eval=20, progress=False, d_model=16, d_ff=32, device='cpu')
    with pytest.warns(RuntimeWarning, match='fell back to the uncompiled model: RuntimeError: Python 3.99. is not supported') as caught:
        _, fell_back, _ = train_task('copy', compile=True, **kw)
    assert len(caught) == 1
    assert fell_back['loss'] == train_task('copy', **kw)[1]['loss']


def test_progress_lines_between_evaluations_change_nothing_of_the_training():
    "log_every cuts the training into shorter chunks for its lines: the same losses, evaluations and weights as without it."
    lines = []
    runs = [train_task('copy', steps=30, eval_every=20, n_eval=40, progress=False, log=lines.append if k else None, log_every=7 if k else None)
            for k in (0, 1)]
    (m0, h0, r0), (m1, h1, r1) = runs
    assert h0 == h1 and r0 == r1
    for a, b in zip(m0.state_dict().values(), m1.state_dict().values()): assert torch.equal(a, b)
    assert [l.split(':')[0] for l in lines] == ['step 7 of 30', 'step 14 of 30', 'step 20', 'step 21 of 30', 'step 28 of 30', 'step 30']
    with pytest.raises(ValueError, match='log_every must be a positive integer'): train_task('copy', steps=3, log_every=0)
