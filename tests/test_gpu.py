"What only a CUDA GPU can check: chapter 20's CUDA graphs compute the plain step, `train_task` trains through them, and sampling on the GPU never waits for it per token."
import copy, warnings
import pytest, torch
from transformer_tutorial.copy_task import CopyTask, task_model, train_task
from transformer_tutorial.fast import FAST_COPY, GraphedModel, graph_model
from transformer_tutorial.training import PAD, sequence_loss, train_step, make_optimizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
TASK = CopyTask()


@pytest.mark.parametrize('dtype', [None, torch.bfloat16])
def test_a_graphed_model_computes_the_plain_forward_and_backward(dtype):
    plain = task_model(TASK, seed=0).cuda()
    base = copy.deepcopy(plain)
    graphed = GraphedModel(base, TASK.batches(128, seed=9)().to('cuda').logits(lambda *args: args), dtype)
    amp = (lambda: torch.autocast('cuda', dtype=dtype, cache_enabled=False)) if dtype else None
    for k in range(3):   # new batches through the same graphs
        b = TASK.batches(128, seed=k)().to('cuda')
        for m in (plain, graphed):
            m.zero_grad()
            with amp() if amp else torch.autocast('cuda', enabled=False): loss = sequence_loss(b.logits(m).float(), b.targets, PAD)
            loss.backward()
        tol = dict(atol=1e-5, rtol=1e-4) if dtype is None else dict(atol=2e-2, rtol=2e-2)
        for p, q in zip(plain.parameters(), base.parameters()): torch.testing.assert_close(q.grad, p.grad, **tol)


def test_a_graphed_model_runs_the_plain_model_in_evaluation_and_for_other_shapes():
    model = task_model(TASK, seed=0).cuda()
    graphed = GraphedModel(model, TASK.batches(128, seed=0)().to('cuda').logits(lambda *args: args))
    small = TASK.batches(8, seed=1)().to('cuda')
    torch.testing.assert_close(small.logits(graphed), small.logits(model))
    graphed.eval(); model.eval()
    b = TASK.batches(128, seed=2)().to('cuda')
    torch.testing.assert_close(b.logits(graphed), b.logits(model))


def test_train_task_records_the_step_by_default_on_a_gpu_and_learns():
    calls = []
    import transformer_tutorial.copy_task as ct
    original = ct.graph_model
    ct.graph_model = lambda *a, **k: calls.append(1) or original(*a, **k)
    try: _, history, metrics = train_task('copy', device='cuda', progress=False, **FAST_COPY)
    finally: ct.graph_model = original
    assert calls == [1] and metrics['exact_match'] == 1.0
    _, eager_history, eager_metrics = train_task('copy', device='cuda', progress=False, graphs=False, **FAST_COPY)
    assert eager_metrics['exact_match'] == 1.0
    n = min(len(history['lr']), len(eager_history['lr']))
    assert eager_history['lr'][:n] == history['lr'][:n]                     # the same schedule
    assert abs(eager_history['loss'][0] - history['loss'][0]) < 1e-2       # the same first batch, the same initial weights


def test_a_failed_recording_warns_and_trains_the_plain_model(monkeypatch):
    def broken(*args, **kwargs): raise RuntimeError('capture failed')
    monkeypatch.setattr(torch.cuda, 'make_graphed_callables', broken)
    model = task_model(TASK, seed=0).cuda()
    with pytest.warns(RuntimeWarning, match='CUDA graphs fell back to the plain model: RuntimeError: capture failed'):
        got = graph_model(model, TASK.batches(16, seed=0)().to('cuda'))
    assert got is model


def test_token_ids_are_still_checked_on_a_gpu_outside_a_recording():
    model = task_model(TASK, seed=0).cuda()
    with pytest.raises(ValueError, match='outside the vocabulary'): model.encode(torch.tensor([[3, 99]], device='cuda'))


def count_syncs(fn):
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('warn')
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            fn()
    finally: torch.cuda.set_sync_debug_mode(0)
    return sum('synchroniz' in str(w.message) for w in caught)


def test_sampling_with_a_generator_on_the_gpu_does_not_wait_per_token():
    from transformer_tutorial.gpt import GPT
    from transformer_tutorial.sampling import generate
    torch.manual_seed(0)
    model = GPT(83, 64, 32, 2, 2, 64).cuda().eval()
    prompt = torch.randint(0, 83, (2, 4))
    on_gpu = lambda n: count_syncs(lambda: generate(model, prompt, n, generator=torch.Generator(device='cuda').manual_seed(0)))
    on_cpu = lambda n: count_syncs(lambda: generate(model, prompt, n, generator=0))
    assert on_gpu(40) == on_gpu(10)                 # a fixed number of waits (the prompt's check, the result's copy back)
    assert on_cpu(40) > on_cpu(10)                  # the CPU draw waits once per token
    a = generate(model, prompt, 30, generator=torch.Generator(device='cuda').manual_seed(3))
    b = generate(model, prompt, 30, generator=torch.Generator(device='cuda').manual_seed(3))
    assert torch.equal(a, b) and a.device == prompt.device
