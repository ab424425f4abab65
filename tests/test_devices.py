"""No package function mixes devices: a model on another device than its inputs gets them moved, and gives what it gives on the CPU.

CI has no GPU, so the other device is `tests/elsewhere.py`'s: tensors with real CPU data that report another device
and refuse, as CUDA does, to be mixed with CPU tensors. Decoding, evaluation, attention capture, the training loop and
the data-parallel step run there in full and must return exactly what they return on the CPU. Each `test_..._catches`
test breaks one `device=` or `.to(...)` of the package (tests/mutation.py) and checks that the device test fails.
"""
import copy
import pytest, torch
from elsewhere import Elsewhere, elsewhere
from mutation import mutate
from transformer_tutorial import decoding, training, data_parallel, sampling, shakespeare
from transformer_tutorial.copy_task import CopyTask, evaluate, task_model
from transformer_tutorial.decoding import greedy_decode, beam_search
from transformer_tutorial.training import PAD, record_attention, train, select_device
from transformer_tutorial.data_parallel import DistEnv, sharded_batches, data_parallel_step

TASK = CopyTask()
MIXING = 'Expected all tensors to be on the same device'


def source(n=6, seed=0): return TASK.sample(n, torch.Generator().manual_seed(seed))[0]


def moved(model, device):
    "The model on `device`, its parameters `Elsewhere`: the move the package's callers make."
    model = model.to(device)
    assert all(isinstance(p, Elsewhere) and p.device == device for p in model.parameters())
    return model


def test_the_other_device_refuses_to_mix():
    "The check itself: a model on the other device fed a CPU tensor fails as it would on a GPU; moved inputs work."
    model = task_model(TASK)
    with elsewhere() as device:
        model = moved(model, device)
        with pytest.raises(RuntimeError, match=MIXING): model.src_embed(torch.tensor([[3, 4]]))
        out = model.src_embed(torch.tensor([[3, 4]]).to(device))
        assert out.device == device and isinstance(out, Elsewhere)
        with pytest.raises(RuntimeError, match=MIXING): torch.zeros(()).add_(out.sum())  # a CPU result from elsewhere's data
        assert torch.equal(out.cpu(), task_model(TASK).src_embed(torch.tensor([[3, 4]])))


def decode_all(model, src):
    return (greedy_decode(model, src, 11), greedy_decode(model, src, 11, use_cache=False), beam_search(model, src, 11, beam_size=3),
            beam_search(model, src, 11, beam_size=3, return_scores=True)[1])


def test_decoding_on_another_device():
    "Greedy decoding with and without the cache and beam search: on the model's device, the CPU's tokens, returned on the CPU."
    src, model = source(), task_model(TASK, seed=1)
    expected = decode_all(model, src)
    with elsewhere() as device:
        got = decode_all(moved(model, device), src)
    for e, g in zip(expected, got): assert type(g) is torch.Tensor and g.device == src.device, f"returned on device {g.device}"
    for e, g in zip(expected[:3], got[:3]): assert torch.equal(g, e)
    torch.testing.assert_close(got[3], expected[3])  # the scores: attention may take another kernel there, equal to rounding


def test_evaluate_and_record_attention_on_another_device():
    model = task_model(TASK, seed=2)
    src = source(3)
    expected = evaluate(model, TASK, n=40, batch_size=16), evaluate(model, TASK, n=12, batch_size=8, beam_size=2)
    with record_attention(model) as maps: greedy_decode(model, src, 5, use_cache=False)
    with elsewhere() as device:
        model = moved(model, device)
        assert (evaluate(model, TASK, n=40, batch_size=16), evaluate(model, TASK, n=12, batch_size=8, beam_size=2)) == expected
        with record_attention(model) as got: greedy_decode(model, src, 5, use_cache=False)
    assert got.keys() == maps.keys() and len(maps) == 3
    for name in maps:
        assert type(got[name]) is torch.Tensor, f"{name}'s weights kept on device {got[name].device}, not moved to the CPU"
        assert torch.equal(got[name], maps[name])


def run_training(device=None, steps=3):
    "A few steps of the training loop with the model on `device`; the history and the weights, on the CPU."
    model = task_model(TASK, seed=3)
    if device is not None: model = moved(model, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # not AdamW, which turns the key biases' rounding noise
    sched = torch.optim.lr_scheduler.LambdaLR(opt, training.warmup_inverse_sqrt(2))  # (their true gradient is 0) into steps
    history = train(model, TASK.batches(16, seed=3), steps, opt, sched, PAD, label_smoothing=0.1, progress=False,
                    step=training.train_step)  # looked up now, so a mutation of it counts
    return history, {k: v.cpu() for k, v in model.state_dict().items()}


def test_training_loop_on_another_device():
    "The training step moves each batch to the model's device: the same losses, learning rates and weights as on the CPU."
    expected = run_training()
    with elsewhere() as device: history, weights = run_training(device)
    assert history['lr'] == expected[0]['lr'] and history['accuracy'] == expected[0]['accuracy']
    assert history['loss'] == pytest.approx(expected[0]['loss'], rel=1e-6)  # attention may take another kernel: rounding
    torch.testing.assert_close(weights, expected[1])


def run_step(device=None, accumulate=2):
    "One data-parallel step (one process, `accumulate` micro-batches) on `device`: the loss and accuracy, and the weights."
    model = task_model(TASK, seed=4)
    if device is not None: model = moved(model, device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    micro = sharded_batches(TASK, 32, DistEnv(), seed=4, accumulate=accumulate)()
    result = data_parallel_step(model, micro, opt, PAD, label_smoothing=0.1)  # CPU batches: the step moves them
    return result, {k: v.cpu() for k, v in model.state_dict().items()}


def test_data_parallel_step_on_another_device():
    expected = run_step()
    with elsewhere() as device: result, weights = run_step(device)
    assert result == pytest.approx(expected[0], rel=1e-6)
    torch.testing.assert_close(weights, expected[1])


def test_generation_and_the_language_model_on_another_device():
    "The GPT's generate (with and without the cache, greedy and sampled, a padded batch; GPT-2's block and Llama's) and the Shakespeare task's evaluation: on the model's device, the CPU's ids in and out."
    from transformer_tutorial.gpt import GPT
    from transformer_tutorial.sampling import generate
    from transformer_tutorial.shakespeare import ShakespeareTask
    torch.manual_seed(0)
    models = [GPT(83, 40, 16, 2, 1, 32).eval(),
              GPT(83, 40, 16, 2, 1, 32, positions='rope', norm='rms', activation='swiglu', num_kv_heads=1, tie_embeddings=False).eval(),
              GPT(83, 40, 16, 2, 2, 32, positions='rope', sliding_window=6, sliding_layers=[1]).eval()]   # a window the prompt and text pass
    prompt, task = torch.randint(0, 83, (2, 5)), ShakespeareTask(context=40)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])                   # the first text padded on the left
    runs = lambda m: [generate(m, prompt, 20, temperature=t, generator=1, use_cache=c, attention_mask=a)
                      for t in (0, 0.9) for c in (True, False) for a in (None, mask)]
    for model in models:
        expected, loss = runs(model), task.evaluate(model, n=8)['loss']
        with elsewhere() as device:
            moved_model = moved(copy.deepcopy(model), device)
            got, moved_loss = runs(moved_model), task.evaluate(moved_model, n=8)['loss']
        for e, g in zip(expected, got):
            assert type(g) is torch.Tensor and g.device == prompt.device, f"returned on device {g.device}"
            assert torch.equal(g, e)
        assert moved_loss == pytest.approx(loss, rel=1e-6)


# Each mutation removes one device placement from the package; the device test named beside it must then fail.
MUTATIONS = [
    (decoding.greedy_decode, 'start_id, dtype=torch.long, device=device)', 'start_id, dtype=torch.long)', test_decoding_on_another_device),
    (decoding.greedy_decode, 'causal_mask(ys.size(1), device)', 'causal_mask(ys.size(1))', test_decoding_on_another_device),
    (decoding.greedy_decode, 'return ys[:, 1:].to(src.device)', 'return ys[:, 1:]', test_evaluate_and_record_attention_on_another_device),
    (decoding.greedy_decode, 'padding_mask(src, pad_id).to(device)', 'padding_mask(src, pad_id)', test_decoding_on_another_device),
    (decoding.beam_search, 'logp = torch.zeros(B, K, device=device)', 'logp = torch.zeros(B, K)', test_decoding_on_another_device),
    (decoding.beam_search, 'only_pad = torch.full((V,), -math.inf, device=device)', 'only_pad = torch.full((V,), -math.inf)',
     test_decoding_on_another_device),
    (decoding.beam_search, 'length = torch.zeros(B * K, device=device)', 'length = torch.zeros(B * K)', test_decoding_on_another_device),
    (decoding.beam_search, 'torch.arange(B, device=device)[:, None]', 'torch.arange(B)[:, None]', test_decoding_on_another_device),
    (decoding.KVCache.__init__, 'like.new_zeros(', 'torch.zeros(', test_decoding_on_another_device),
    (sampling.generate, 'ids = prompt.to(next(model.parameters()).device)', 'ids = prompt', test_generation_and_the_language_model_on_another_device),
    (sampling.generate, 'out = ids.to(prompt.device)', 'out = ids', test_generation_and_the_language_model_on_another_device),
    (sampling._cached_causal_attention, 'dtype=torch.bool, device=y.device)', 'dtype=torch.bool)', test_generation_and_the_language_model_on_another_device),
    (sampling.gpt_decode_step, 'torch.arange(t, t + tokens.size(1), device=tokens.device)', 'torch.arange(t, t + tokens.size(1))', test_generation_and_the_language_model_on_another_device),
    (sampling.sample_next, '[:, 0].to(logits.device)', '[:, 0]', test_generation_and_the_language_model_on_another_device),
    (sampling.generate, 'if pad is not None: pad = pad.to(ids.device)', 'if pad is not None: pad = pad', test_generation_and_the_language_model_on_another_device),
    (shakespeare.ShakespeareTask.evaluate, 'model(x.to(device))', 'model(x)', test_generation_and_the_language_model_on_another_device),
    (training.record_attention, 'output[1].detach().cpu()', 'output[1].detach()', test_evaluate_and_record_attention_on_another_device),
    (training.train_step, 'b = batch.to(next(model.parameters()).device)', 'b = batch', test_training_loop_on_another_device),
    (data_parallel.data_parallel_step, 'micro_batches = [b.to(device) for b in micro_batches]', 'micro_batches = list(micro_batches)',
     test_data_parallel_step_on_another_device),
    (data_parallel.data_parallel_step, 'torch.zeros((), device=real.device), torch.zeros((), device=real.device)',
     'torch.zeros(()), torch.zeros(())', test_data_parallel_step_on_another_device),
]


@pytest.mark.parametrize('fn, old, new, device_test', MUTATIONS, ids=lambda x: getattr(x, '__qualname__', None))
def test_a_lost_device_placement_is_caught(monkeypatch, fn, old, new, device_test):
    mutate(monkeypatch, fn, old, new)
    with pytest.raises((RuntimeError, AssertionError), match=f"{MIXING}|device"): device_test()


@pytest.mark.parametrize('device, msg', [('tpu', 'unknown device'), ('cuda:99' if torch.cuda.is_available() else 'cuda', 'CUDA'),
                                         ('nonsense', 'unknown device'), ('meta', 'not supported by this course')])
def test_select_device_names_the_problem(device, msg):
    with pytest.raises(ValueError, match=msg): select_device(device)


def test_autocast_prefers_native_bf16_only():
    "On a GPU without native bf16 (a T4), fp16 with a scaler; bf16 only from compute capability 8.0 (checked when a GPU is here)."
    from transformer_tutorial.training import _autocast, _native_bf16
    ctx, scaler = _autocast(torch.device('cpu'))
    assert scaler is None and not isinstance(ctx, torch.autocast)
    if torch.cuda.is_available():
        native = torch.cuda.get_device_capability()[0] >= 8
        assert _native_bf16(torch.device('cuda')) == native
        ctx, scaler = _autocast(torch.device('cuda'))
        assert ctx.fast_dtype == (torch.bfloat16 if native else torch.float16) and (scaler is None) == native
