"""No package function mixes devices: a model on another device than its inputs gets them moved, never a device-mismatch error.

Without a GPU the check uses PyTorch's `meta` device: a model moved there and fed CPU tensors can only fail because
meta tensors hold no data (a `.item()`, a comparison made into a Python bool, a copy back to the CPU), never with
"Expected all tensors to be on the same device", which is what a forgotten `.to(device)` raises on a GPU.
"""
import pytest, torch
from transformer_tutorial.model import Transformer
from transformer_tutorial.copy_task import CopyTask, evaluate
from transformer_tutorial.decoding import greedy_decode, beam_search
from transformer_tutorial.training import record_attention, train, make_optimizer, select_device

MIXING = ("same device", "found at least two devices", "expected device", "device type", "Expected all tensors")


def meta_model():
    return Transformer(13, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=32).to('meta')


def no_device_mixing(fn):
    "Run `fn`; it may fail only because meta tensors hold no data."
    try: fn()
    except Exception as e:
        msg = str(e)
        assert not any(m.lower() in msg.lower() for m in MIXING), f"device mixing: {type(e).__name__}: {msg}"
        assert 'meta' in msg.lower() or 'data' in msg.lower() or isinstance(e, NotImplementedError), f"unexpected: {type(e).__name__}: {msg}"


def test_guard_catches_a_forgotten_move():
    "The guard itself: a model on meta fed CPU tensors directly is a device-mixing error."
    model = meta_model()
    with pytest.raises(AssertionError, match='device mixing'):
        no_device_mixing(lambda: model.src_embed.lut(torch.tensor([[3, 4]])) + torch.ones(1))


def test_decoding_moves_inputs_to_the_model():
    src, _ = CopyTask().sample(4, torch.Generator().manual_seed(0))
    no_device_mixing(lambda: greedy_decode(meta_model(), src, 11))
    no_device_mixing(lambda: greedy_decode(meta_model(), src, 11, use_cache=False))
    no_device_mixing(lambda: beam_search(meta_model(), src, 11, beam_size=3))


def test_evaluate_and_record_attention_move_inputs():
    model = meta_model()
    no_device_mixing(lambda: evaluate(model, CopyTask(), n=8, batch_size=8))
    def recorded():
        with record_attention(model): greedy_decode(model, torch.tensor([[3, 4, 5]]), 4, use_cache=False)
    no_device_mixing(recorded)


def test_train_moves_batches_to_the_model():
    model = meta_model()
    opt, sched = make_optimizer(model, 1e-3, 10)
    no_device_mixing(lambda: train(model, CopyTask().batches(8), 2, opt, sched, 0, progress=False))


def test_decode_returns_on_the_inputs_device():
    model = Transformer(13, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=32)
    out = greedy_decode(model, torch.tensor([[3, 4, 5]]), 4)
    assert out.device == torch.device('cpu') and out.dtype == torch.long and out.shape[0] == 1


@pytest.mark.parametrize('device, msg', [('tpu', 'unknown device'), ('cuda:99' if torch.cuda.is_available() else 'cuda', 'CUDA'),
                                         ('nonsense', 'unknown device')])
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
