"Bad input a new user gives the API gets a clear error naming the problem and the expected value."
import pytest, torch
from transformer_tutorial.masks import causal_mask, padding_mask
from transformer_tutorial.multi_head import MultiHeadAttention, split_heads
from transformer_tutorial.positional import sinusoidal_positional_encoding, PositionalEncoding
from transformer_tutorial.model import Transformer
from transformer_tutorial.copy_task import train_task
from transformer_tutorial.decoding import greedy_decode

tiny = lambda **kw: Transformer(13, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=32, **kw)

CASES = [
    (lambda: MultiHeadAttention(8, 0), ValueError, 'num_heads must be a positive integer, got 0'),
    (lambda: MultiHeadAttention(8, 3), ValueError, r'd_model \(8\) must be divisible by num_heads \(3\)'),
    (lambda: split_heads(torch.randn(1, 2, 8), -2), ValueError, 'num_heads must be a positive integer, got -2'),
    (lambda: causal_mask(-3), ValueError, 'size must be a positive integer, got -3'),
    (lambda: causal_mask(2.5), ValueError, 'size must be a positive integer, got 2.5'),
    (lambda: sinusoidal_positional_encoding(-1, 8), ValueError, 'max_len must be a positive integer, got -1'),
    (lambda: PositionalEncoding(8, max_len=0), ValueError, 'max_len must be a positive integer, got 0'),
    (lambda: padding_mask(torch.tensor([[1.0, 0.0]]), 0), TypeError, 'integer token ids, got dtype torch.float32'),
    (lambda: Transformer(0, 5, d_model=8, num_heads=2, num_layers=1, d_ff=8), ValueError, 'vocab_size must be a positive integer, got 0'),
    (lambda: greedy_decode(tiny(), torch.tensor([[3, 4]]), -1), ValueError, 'max_len must be a positive integer, got -1'),
    (lambda: greedy_decode(tiny(), torch.tensor([[3, 4]]), 0), ValueError, 'got 0'),
    (lambda: train_task('copy', steps=0), ValueError, 'steps must be a positive integer, got 0'),
    (lambda: train_task('copy', steps=10, eval_every=0), ValueError, 'eval_every must be a positive integer, got 0'),
]


@pytest.mark.parametrize('fn, err, msg', CASES, ids=[c[2][:40] for c in CASES])
def test_bad_input_message(fn, err, msg):
    with pytest.raises(err, match=msg): fn()


def test_numpy_integers_are_accepted():
    np = pytest.importorskip('numpy')
    assert causal_mask(np.int64(3)).shape == (1, 1, 3, 3)


def test_train_task_leaves_the_global_rng_alone():
    "The course never changes a learner's global state behind their back."
    torch.manual_seed(123); expected = torch.rand(3)
    torch.manual_seed(123)
    train_task('copy', steps=2, eval_every=2, n_eval=10, progress=False, device='cpu')
    torch.testing.assert_close(torch.rand(3), expected)


@pytest.mark.parametrize('module, name', [
    (lambda: __import__('transformer_tutorial.feed_forward', fromlist=['x']).PositionwiseFeedForward(8, 16), 'PositionwiseFeedForward'),
    (lambda: __import__('transformer_tutorial.layer_norm', fromlist=['x']).LayerNorm(8), 'LayerNorm'),
    (lambda: __import__('transformer_tutorial.modern_blocks', fromlist=['x']).RMSNorm(8), 'RMSNorm'),
    (lambda: __import__('transformer_tutorial.modern_blocks', fromlist=['x']).SwiGLUFeedForward(8, 16), 'SwiGLUFeedForward'),
])
def test_every_width_check_says_the_same_thing(module, name):
    "One validator for the width of an input: every module's message names itself, the expected width and the shape."
    with pytest.raises(ValueError, match=rf"^{name} expects the last dimension of its input to be d_model=8, got shape \(2, 3, 9\)$"):
        module()(torch.randn(2, 3, 9))
