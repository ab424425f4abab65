"PositionwiseFeedForward: the formula, position-wise (permutation equivariant), parity with torch's modules."
import pytest
import torch
from torch import nn

from transformer_tutorial.feed_forward import PositionwiseFeedForward


def test_shape_and_formula():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 5, 8)
    y = ffn(x)
    assert y.shape == (2, 5, 8)
    ref = (x @ ffn.w_1.weight.T + ffn.w_1.bias).clamp(min=0) @ ffn.w_2.weight.T + ffn.w_2.bias
    torch.testing.assert_close(y, ref, atol=1e-6, rtol=1e-6)


def test_permutation_equivariance():
    torch.manual_seed(1)
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(3, 7, 8)
    perm = torch.randperm(7)
    torch.testing.assert_close(ffn(x[:, perm]), ffn(x)[:, perm])
    torch.testing.assert_close(torch.stack([ffn(x[:, i]) for i in range(7)], 1), ffn(x))


def test_parity_with_sequential():
    torch.manual_seed(2)
    ffn = PositionwiseFeedForward(16, 64)
    seq = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.0), nn.Linear(64, 16))
    seq.load_state_dict({'0.weight': ffn.w_1.weight, '0.bias': ffn.w_1.bias,
                         '3.weight': ffn.w_2.weight, '3.bias': ffn.w_2.bias})
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(ffn(x), seq(x), atol=1e-6, rtol=1e-6)


def test_parity_with_transformer_encoder_layer_linears():
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=48, dropout=0.1, batch_first=True).eval()
    ffn = PositionwiseFeedForward(16, 48, dropout=0.1).eval()
    ffn.w_1.load_state_dict(layer.linear1.state_dict())
    ffn.w_2.load_state_dict(layer.linear2.state_dict())
    x = torch.randn(2, 5, 16)
    expected = layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))
    torch.testing.assert_close(ffn(x), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ffn(x), layer._ff_block(x), atol=1e-6, rtol=1e-6)


def test_dropout_on_hidden_only_in_training():
    torch.manual_seed(4)
    ffn = PositionwiseFeedForward(8, 32, dropout=0.5)
    x = torch.randn(2, 5, 8)
    plain = PositionwiseFeedForward(8, 32); plain.load_state_dict(ffn.state_dict())
    torch.testing.assert_close(ffn.eval()(x), plain(x))
    assert not torch.allclose(ffn.train()(x), plain(x))


def test_wrong_width_is_a_clear_error():
    with pytest.raises(ValueError, match=r"d_model=8.*\(2, 5, 9\)"):
        PositionwiseFeedForward(8, 32)(torch.randn(2, 5, 9))


@pytest.mark.parametrize('activation, formula', [
    ('relu', lambda h: h.clamp(min=0)),
    ('gelu', lambda h: h * 0.5 * (1 + torch.erf(h / 2 ** 0.5))),
    ('gelu_tanh', lambda h: 0.5 * h * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (h + 0.044715 * h ** 3)))),
    ('silu', lambda h: h / (1 + torch.exp(-h))),
])
def test_activation_option(activation, formula):
    "Each activation computes its formula in the hidden layer, with the same weights as the ReLU layer."
    torch.manual_seed(2)
    ffn = PositionwiseFeedForward(8, 32, activation=activation)
    x = torch.randn(2, 5, 8)
    ref = formula(x @ ffn.w_1.weight.T + ffn.w_1.bias) @ ffn.w_2.weight.T + ffn.w_2.bias
    torch.testing.assert_close(ffn(x), ref, atol=1e-6, rtol=1e-5)
    assert ffn.activation == activation and set(ffn.state_dict()) == set(PositionwiseFeedForward(8, 32).state_dict())


def test_unknown_activation_names_the_choices():
    with pytest.raises(ValueError, match="activation must be one of relu, gelu, gelu_tanh, silu, got 'swish'"):
        PositionwiseFeedForward(8, 32, activation='swish')


def test_without_biases():
    ffn = PositionwiseFeedForward(8, 16, activation='gelu', bias=False)
    assert ffn.w_1.bias is None and ffn.w_2.bias is None and sum(p.numel() for p in ffn.parameters()) == 2 * 8 * 16
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), torch.nn.functional.gelu(x @ ffn.w_1.weight.T) @ ffn.w_2.weight.T)
