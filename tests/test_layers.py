"Encoder/decoder layers and stacks: parity with torch.nn by weight copy, masks, cross-attention reads memory."
import pytest
import torch
from torch import nn

from transformer_tutorial.layers import (EncoderLayer, DecoderLayer, Encoder, Decoder,
                                         copy_encoder_layer_to_torch, copy_decoder_layer_to_torch)
from transformer_tutorial.layer_norm import LayerNorm
from transformer_tutorial.masks import padding_mask, causal_mask, target_mask

D, H, FF = 16, 4, 32
SRC = torch.tensor([[5, 6, 7, 8, 0, 0], [5, 6, 7, 8, 9, 4]])
TGT = torch.tensor([[1, 5, 6, 0, 0], [1, 5, 6, 7, 8]])


@pytest.fixture
def data():
    torch.manual_seed(0)
    return torch.randn(2, 6, D), torch.randn(2, 5, D), padding_mask(SRC, 0), target_mask(TGT, 0)


def torch_masks():
    "Our True = may attend masks, translated to torch's True = blocked ones."
    return dict(causal=~causal_mask(TGT.size(1))[0, 0], src_kpm=~padding_mask(SRC, 0)[:, 0, 0],
                tgt_kpm=~padding_mask(TGT, 0)[:, 0, 0])


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_layer_matches_torch(data, norm_first):
    x, _, src_mask, _ = data
    ours = EncoderLayer(D, H, FF, norm_first=norm_first).eval()
    ref = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first).eval()
    assert copy_encoder_layer_to_torch(ours, ref) is ref
    torch.testing.assert_close(ours(x, src_mask), ref(x, src_key_padding_mask=torch_masks()['src_kpm']), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_matches_torch(data, norm_first):
    x, t, src_mask, tgt_mask = data
    ours = DecoderLayer(D, H, FF, norm_first=norm_first).eval()
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, activation="relu", batch_first=True, norm_first=norm_first).eval()
    copy_decoder_layer_to_torch(ours, ref)
    m = torch_masks()
    expected = ref(t, x, tgt_mask=m['causal'], tgt_key_padding_mask=m['tgt_kpm'], memory_key_padding_mask=m['src_kpm'])
    out = ours(t, x, tgt_mask, src_mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert not out.isnan().any()


def test_copy_refuses_different_norm_order():
    ref = nn.TransformerEncoderLayer(D, H, FF, batch_first=True, norm_first=False)
    with pytest.raises(ValueError, match="norm_first differs: ours True, torch's False"):
        copy_encoder_layer_to_torch(EncoderLayer(D, H, FF, norm_first=True), ref)


def test_encoder_ignores_padded_positions(data):
    x, _, src_mask, _ = data
    layer = EncoderLayer(D, H, FF).eval()
    x2 = x.clone(); x2[0, 4:] = 100.0
    torch.testing.assert_close(layer(x2, src_mask)[0, :4], layer(x, src_mask)[0, :4])


def test_decoder_output_depends_on_memory(data):
    x, t, src_mask, tgt_mask = data
    layer = DecoderLayer(D, H, FF).eval()
    out = layer(t, x, tgt_mask, src_mask)
    assert (layer(t, torch.randn_like(x), tgt_mask, src_mask) - out).abs().max() > 1e-2
    # only the real source positions matter: changing padded memory rows changes nothing
    x2 = x.clone(); x2[0, 4:] = 100.0
    torch.testing.assert_close(layer(t, x2, tgt_mask, src_mask), out)


def test_cross_attention_keys_and_values_are_memory(data):
    x, t, src_mask, tgt_mask = data
    layer, seen = DecoderLayer(D, H, FF).eval(), {}
    h = layer.cross_attn.register_forward_pre_hook(lambda m, args: seen.update(q=args[0], k=args[1], v=args[2]))
    layer(t, x, tgt_mask, src_mask)
    h.remove()
    assert seen['k'] is x and seen['v'] is x and seen['q'].shape == t.shape


def test_decoder_is_causal(data):
    x, t, src_mask, _ = data
    layer = DecoderLayer(D, H, FF).eval()
    t2 = t.clone(); t2[:, 3:] += 5.0  # change the future
    mask = causal_mask(5)
    torch.testing.assert_close(layer(t2, x, mask, src_mask)[:, :3], layer(t, x, mask, src_mask)[:, :3])


def test_final_norm_defaults():
    assert isinstance(Encoder(D, H, FF, 2).norm, LayerNorm)
    assert isinstance(Decoder(D, H, FF, 2, norm_first=False).norm, nn.Identity)
    assert isinstance(Encoder(D, H, FF, 2, norm_first=False, final_norm=True).norm, LayerNorm)
    assert isinstance(Decoder(D, H, FF, 2, final_norm=False).norm, nn.Identity)
    assert len(Encoder(D, H, FF, 3).layers) == 3


def test_stack_shapes(data):
    x, t, src_mask, tgt_mask = data
    enc, dec = Encoder(D, H, FF, 2).eval(), Decoder(D, H, FF, 2).eval()
    assert dec(t, enc(x, src_mask), tgt_mask, src_mask).shape == (2, 5, D)


def test_pre_ln_stack_output_normalized_at_every_position(data):
    x, t, src_mask, tgt_mask = data
    enc, dec = Encoder(D, H, FF, 2).eval(), Decoder(D, H, FF, 2).eval()
    memory = enc(x, src_mask)
    out = dec(t, memory, tgt_mask, src_mask)
    h = t  # the stream entering the final LayerNorm
    for layer in dec.layers: h = layer(h, memory, tgt_mask, src_mask)
    var, std = h.var(-1, unbiased=False), out.std(-1, unbiased=False)
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(std, (var / (var + dec.norm.eps)).sqrt(), atol=1e-6, rtol=0)  # every position
    torch.testing.assert_close(std, torch.ones(2, 5), atol=1e-4, rtol=0)

def test_wrong_mask_shape_names_expected_shape(data):
    x, _, _, _ = data
    with pytest.raises(ValueError, match=r"\(2, 4, 6, 6\)"):
        EncoderLayer(D, H, FF)(x, torch.ones(2, 1, 1, 5, dtype=torch.bool))


@pytest.mark.parametrize("norm_first", [True, False])
def test_gelu_layers_match_torch_and_a_different_activation_is_refused(data, norm_first):
    "activation='gelu' reaches both layers' feed-forward: parity with torch's layers built with activation='gelu'."
    x, t, src_mask, tgt_mask = data
    enc, dec = EncoderLayer(D, H, FF, norm_first=norm_first, activation='gelu').eval(), DecoderLayer(D, H, FF, norm_first=norm_first, activation='gelu').eval()
    with torch.no_grad():  # norms at 1 and 0 would hide a swapped mapping: every tensor gets its own values
        for p in [*enc.parameters(), *dec.parameters()]: p.add_(0.1 * torch.randn_like(p))
    kw = dict(dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first)
    ref_enc = copy_encoder_layer_to_torch(enc, nn.TransformerEncoderLayer(D, H, FF, **kw).eval())
    ref_dec = copy_decoder_layer_to_torch(dec, nn.TransformerDecoderLayer(D, H, FF, **kw).eval())
    m = torch_masks()
    torch.testing.assert_close(enc(x, src_mask), ref_enc(x, src_key_padding_mask=m['src_kpm']), atol=1e-5, rtol=1e-5)
    expected = ref_dec(t, x, tgt_mask=m['causal'], tgt_key_padding_mask=m['tgt_kpm'], memory_key_padding_mask=m['src_kpm'])
    torch.testing.assert_close(dec(t, x, tgt_mask, src_mask), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="activation differs: ours 'gelu', torch's 'relu'"):
        copy_encoder_layer_to_torch(enc, nn.TransformerEncoderLayer(D, H, FF, batch_first=True, norm_first=norm_first))
    stack = Encoder(D, H, FF, 2, activation='silu')
    assert all(layer.feed_forward.activation == 'silu' for layer in stack.layers)
    assert all(layer.feed_forward.activation == 'silu' for layer in Decoder(D, H, FF, 2, activation='silu').layers)


def test_encoder_layer_is_built_from_the_modules_it_is_given():
    "self_attn and feed_forward are used as given, norm makes one norm per sub-layer; PyTorch's layer has only the 2017 parts."
    from functools import partial
    from transformer_tutorial.modern_blocks import RMSNorm, SwiGLUFeedForward
    from transformer_tutorial.multi_head import MultiHeadAttention
    attn, ff = MultiHeadAttention(D, H, num_kv_heads=2), SwiGLUFeedForward(D, 24)
    layer = EncoderLayer(D, H, FF, self_attn=attn, feed_forward=ff, norm=partial(RMSNorm, eps=1e-3)).eval()
    assert layer.self_attn is attn and layer.feed_forward is ff
    n0, n1 = (s.norm for s in layer.sublayers)
    assert type(n0) is RMSNorm and n0 is not n1 and n0.eps == 1e-3
    with torch.no_grad():
        for p in layer.parameters(): p.add_(0.1 * torch.randn_like(p))
    x = torch.randn(2, 5, D)
    h = x + attn(n0(x), n0(x), n0(x), causal_mask(5), need_weights=False)[0]
    torch.testing.assert_close(layer(x, causal_mask(5)), h + ff(n1(h)))
    with pytest.raises(ValueError, match="built with other parts than the 2017 ones"):
        copy_encoder_layer_to_torch(layer, nn.TransformerEncoderLayer(D, H, FF, batch_first=True))
