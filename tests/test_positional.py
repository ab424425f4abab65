"Sinusoidal positional encoding: exact values, shapes, odd d_model, the rotation property, the module."
import math

import pytest
import torch

from transformer_tutorial.positional import sinusoidal_positional_encoding, PositionalEncoding


def test_tiny_case_by_hand():
    # d_model=4: omega_0 = 1, omega_1 = 10000^(-2/4) = 1/100
    expected = torch.tensor([[0.0, 1.0, 0.0, 1.0],
                             [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
                             [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]])
    torch.testing.assert_close(sinusoidal_positional_encoding(3, 4), expected)


def test_shape_range_and_constant_norm():
    pe = sinusoidal_positional_encoding(200, 32)
    assert pe.shape == (200, 32) and pe.dtype == torch.float32
    assert pe.abs().max() <= 1
    torch.testing.assert_close(pe.norm(dim=1), torch.full((200,), 4.0))  # sqrt(32 / 2)


@pytest.mark.parametrize("d_model", [1, 5, 7])
def test_odd_d_model(d_model):
    pe = sinusoidal_positional_encoding(30, d_model)
    assert pe.shape == (30, d_model)
    pos = torch.arange(30, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    assert pe[:, 0::2].shape[1] == (d_model + 1) // 2 and pe[:, 1::2].shape[1] == d_model // 2
    torch.testing.assert_close(pe[:, 0::2].double(), torch.sin(pos * omega), atol=1e-5, rtol=0)
    torch.testing.assert_close(pe[:, 1::2].double(), torch.cos(pos * omega[: d_model // 2]), atol=1e-5, rtol=0)


def test_relative_position_is_a_rotation_per_pair():
    d, k = 16, 7
    pe = sinusoidal_positional_encoding(60, d).double()
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    c, s = torch.cos(omega * k), torch.sin(omega * k)
    sin, cos = pe[:-k, 0::2], pe[:-k, 1::2]
    torch.testing.assert_close(pe[k:, 0::2], c * sin + s * cos, atol=1e-5, rtol=0)
    torch.testing.assert_close(pe[k:, 1::2], -s * sin + c * cos, atol=1e-5, rtol=0)


def test_module_adds_buffer_batch_first():
    m = PositionalEncoding(8, max_len=20)
    x = torch.randn(3, 6, 8)
    torch.testing.assert_close(m(x), x + sinusoidal_positional_encoding(6, 8))
    assert 'pe' in dict(m.named_buffers()) and 'pe' not in m.state_dict()
    assert list(m.parameters()) == []


def test_dropout_after_the_sum():
    torch.manual_seed(0)
    m = PositionalEncoding(8, max_len=20, dropout=0.5).train()
    x = torch.randn(3, 6, 8)
    out, summed = m(x), x + sinusoidal_positional_encoding(6, 8)
    kept = out != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(out[kept], 2 * summed[kept])


def test_too_long_raises_naming_both_lengths():
    m = PositionalEncoding(8, max_len=10)
    m(torch.zeros(1, 10, 8))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"sequence length 11 exceeds max_len 10"):
        m(torch.zeros(1, 11, 8))


def test_wrong_width_raises():
    with pytest.raises(ValueError, match=r"d_model=8"):
        PositionalEncoding(8, max_len=10)(torch.zeros(1, 5, 4))


def test_plot_legend_beside_the_curves():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from transformer_tutorial.utils import plot_positional_encoding
    fig = plot_positional_encoding(64, 100, dims=tuple(range(0, 64, 4)))  # 16 curves: a long legend
    try:
        fig.canvas.draw()
        curves = next(ax for ax in fig.axes if ax.get_legend())
        legend, area = curves.get_legend().get_window_extent(), curves.get_window_extent()
        assert legend.x0 > area.x1 and legend.x1 < fig.bbox.x1  # right of the curves, inside the figure
    finally:
        plt.close(fig)


def test_explorer_redraws_on_release_only():
    widgets = pytest.importorskip("ipywidgets")
    import matplotlib.pyplot as plt
    from transformer_tutorial.utils import positional_encoding_explorer
    w = positional_encoding_explorer()  # draws once
    plt.close('all')
    controls = [c for c in w.children if isinstance(c, (widgets.IntSlider, widgets.Text))]
    assert len(controls) == 3 and not any(c.continuous_update for c in controls)
