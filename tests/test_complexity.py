"Table 1 of the paper: path lengths counted on the connection graphs, and the activation memory of attention measured."
import math
import pytest, torch
import torch.nn.functional as F
from transformer_tutorial.complexity import max_path_length, saved_bytes, time_ms
from transformer_tutorial.attention import scaled_dot_product_attention


@pytest.mark.parametrize('n', [1, 2, 5, 9, 27, 28])
def test_path_lengths_match_the_formulas(n):
    assert max_path_length('attention', n) == 1
    assert max_path_length('recurrent', n) == n
    for k in (2, 3, 4):
        assert max_path_length('convolution', n, k) == max(1, math.ceil((n - 1) / (k - 1)))
        digits = 1 if n == 1 else math.floor(math.log(n - 1, k) + 1e-9) + 1   # base-k digits of n - 1
        assert max_path_length('dilated', n, k) == digits


@pytest.mark.parametrize('args, message', [
    (('lstm', 8), "kind must be 'attention', 'recurrent', 'convolution' or 'dilated', got 'lstm'"),
    (('attention', 0), 'n must be a positive integer, got 0'),
    (('convolution', 8, 1), 'a kernel that connects positions needs k >= 2, got 1'),
])
def test_path_length_bad_input(args, message):
    with pytest.raises(ValueError, match=message): max_path_length(*args)


def test_saved_bytes_of_attention_grow_as_the_square_and_fused_as_the_length():
    def ours(x): return scaled_dot_product_attention(x, x, x)[0]
    def fused(x): return F.scaled_dot_product_attention(x, x, x)
    mem = {f: [saved_bytes(f, torch.randn(1, 2, n, 8, requires_grad=True)) for n in (256, 512)] for f in (ours, fused)}
    assert 3.8 < mem[ours][1] / mem[ours][0] < 4.1            # the (n, n) weights dominate
    assert 1.9 < mem[fused][1] / mem[fused][0] < 2.1
    assert mem[ours][1] >= 2 * 512 * 512 * 4                   # at least the float32 weights of 2 heads


def test_saved_bytes_counts_nothing_without_grad_and_excludes_what_it_is_told():
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    assert saved_bytes(lambda t: t @ w, x) == x.numel() * 4   # matmul saves the input (w needs its gradient)
    assert saved_bytes(lambda t: t @ w, x, exclude=[x]) == 0
    assert saved_bytes(lambda t: t * 2, torch.randn(3)) == 0


def test_time_ms_is_a_positive_number():
    assert time_ms(lambda t: t + 1, torch.randn(10), min_run_time=0.01) > 0
