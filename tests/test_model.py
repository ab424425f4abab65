"The full Transformer: parity of the stacks with torch.nn.Transformer, config round trip, tying, errors."
import warnings

import pytest
import torch
from torch import nn

from transformer_tutorial.layers import Encoder, Decoder
from transformer_tutorial.masks import padding_mask, causal_mask, target_mask
from transformer_tutorial.model import Transformer, TransformerConfig, copy_stack_to_torch, parameter_table

D, H, FF, N = 16, 4, 32, 2
SRC = torch.tensor([[3, 4, 5, 6, 0, 0, 0], [3, 4, 5, 6, 7, 8, 9]])
TGT = torch.tensor([[1, 5, 6, 0, 0], [1, 5, 6, 7, 8]])
CFG = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=D, num_heads=H, num_layers=N, d_ff=FF, dropout=0.0)
TORCH_MASKS = dict(tgt_mask=~causal_mask(5)[0, 0], src_key_padding_mask=~padding_mask(SRC, 0)[:, 0, 0],
                   tgt_key_padding_mask=~padding_mask(TGT, 0)[:, 0, 0], memory_key_padding_mask=~padding_mask(SRC, 0)[:, 0, 0])


def torch_transformer(norm_first):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested-tensor notice for pre-LN
        return nn.Transformer(D, H, N, N, FF, dropout=0.0, batch_first=True, norm_first=norm_first).eval()


@pytest.mark.parametrize("norm_first", [True, False])
def test_stack_matches_torch_transformer(norm_first):
    torch.manual_seed(0)
    enc = Encoder(D, H, FF, N, norm_first=norm_first, final_norm=True).eval()
    dec = Decoder(D, H, FF, N, norm_first=norm_first, final_norm=True).eval()
    ref = copy_stack_to_torch(enc, dec, torch_transformer(norm_first))
    x, t = torch.randn(2, 7, D), torch.randn(2, 5, D)
    ours = dec(t, enc(x, padding_mask(SRC, 0)), target_mask(TGT, 0), padding_mask(SRC, 0))
    torch.testing.assert_close(ours, ref(x, t, **TORCH_MASKS), atol=1e-5, rtol=1e-5)


def test_whole_pre_ln_model_matches_torch_stack():
    torch.manual_seed(0)
    model = Transformer(**CFG).eval()
    ref = copy_stack_to_torch(model.encoder, model.decoder, torch_transformer(True))
    emb = lambda e, ids: model.positional(e(ids))
    expected = model.output(ref(emb(model.src_embed, SRC), emb(model.tgt_embed, TGT), **TORCH_MASKS))
    logits = model(SRC, TGT, padding_mask(SRC, 0), target_mask(TGT, 0))
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


def test_copy_stack_refuses_missing_final_norm():
    enc, dec = Encoder(D, H, FF, N, norm_first=False), Decoder(D, H, FF, N, norm_first=False)
    with pytest.raises(ValueError, match="final_norm=True"):
        copy_stack_to_torch(enc, dec, torch_transformer(False))
    with pytest.raises(ValueError, match="encoder has 1 layers, torch's has 2"):
        copy_stack_to_torch(Encoder(D, H, FF, 1), Decoder(D, H, FF, N), torch_transformer(True))


@pytest.mark.parametrize("norm_first", [True, False])
def test_logits_shape(norm_first):
    model = Transformer(**{**CFG, 'norm_first': norm_first}).eval()
    logits = model(SRC, TGT, padding_mask(SRC, 0), target_mask(TGT, 0))
    assert logits.shape == (2, 5, 13) and not logits.isnan().any()
    memory = model.encode(SRC, padding_mask(SRC, 0))
    assert memory.shape == (2, 7, D)
    torch.testing.assert_close(model.decode(TGT, memory, target_mask(TGT, 0), padding_mask(SRC, 0)), logits)


def test_decoder_output_depends_on_memory():
    torch.manual_seed(0)
    model = Transformer(**CFG).eval()
    memory = model.encode(SRC)
    a, b = model.decode(TGT, memory), model.decode(TGT, torch.randn_like(memory))
    assert (a - b).abs().max() > 1e-2
    # and through the whole model: a different source gives different logits
    assert (model(SRC, TGT) - model(SRC.flip(1), TGT)).abs().max() > 1e-3


def test_too_long_sequence_names_both_lengths():
    model = Transformer(**{**CFG, 'max_len': 6})
    with pytest.raises(ValueError, match="src length 7 exceeds max_len 6"):
        model(SRC, TGT)
    with pytest.raises(ValueError, match="tgt length 7 exceeds max_len 6"):
        model(SRC[:, :5], SRC)


def test_wrong_mask_shape_names_expected_shape():
    model = Transformer(**CFG)
    with pytest.raises(ValueError, match=r"tgt_mask of shape \(2, 1, 4, 5\).*\(2, 4, 5, 5\)"):
        model(SRC, TGT, padding_mask(SRC, 0), target_mask(TGT, 0)[:, :, :4])
    with pytest.raises(ValueError, match=r"src_mask of shape \(2, 1, 1, 5\).*\(2, 4, 7, 7\)"):
        model(SRC, TGT, torch.ones(2, 1, 1, 5, dtype=torch.bool))


def test_bad_token_id():
    model = Transformer(**CFG)
    with pytest.raises(ValueError) as e:
        model(SRC, torch.tensor([[1, 5, 99]]))
    assert "99" in str(e.value) and "vocab" in str(e.value).lower()


def test_tied_embeddings_share_one_tensor():
    tied, untied = Transformer(**{**CFG, 'tie_embeddings': True}), Transformer(**CFG)
    assert tied.output.weight is tied.tgt_embed.lut.weight
    assert untied.output.weight is not untied.tgt_embed.lut.weight
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters()) == 13 * D
    with torch.no_grad(): tied.output.weight[2] += 1.0
    assert torch.equal(tied.tgt_embed.lut.weight[2], tied.output.weight[2])


def test_config_round_trip():
    torch.manual_seed(0)
    model = Transformer(**CFG).eval()
    d = model.config.to_dict()
    assert d == {**TransformerConfig(11, 13).to_dict(), **CFG}
    rebuilt = Transformer.from_config(TransformerConfig.from_dict(d)).eval()
    assert rebuilt.config == model.config
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    rebuilt.load_state_dict(model.state_dict())
    torch.testing.assert_close(rebuilt(SRC, TGT), model(SRC, TGT), atol=0, rtol=0)
    assert Transformer.from_config(d).config == model.config  # a plain dict works too


def test_config_carries_the_activation():
    model = Transformer(**CFG, activation='silu')
    assert model.config.activation == 'silu' and Transformer.from_config(model.config.to_dict()).config.activation == 'silu'
    assert {l.feed_forward.activation for l in [*model.encoder.layers, *model.decoder.layers]} == {'silu'}
    assert Transformer(**CFG).config.activation == 'relu'  # the paper's, by default
    with pytest.raises(ValueError, match="activation must be one of relu, gelu, gelu_tanh, silu, got 'tanh'"): Transformer(**CFG, activation='tanh')


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match=r"unknown TransformerConfig keys: \['num_layer', 'zzz'\]"):
        TransformerConfig.from_dict({**CFG, 'num_layer': 3, 'zzz': 1})


def test_xavier_init():
    model = Transformer(**{**CFG, 'd_model': 64, 'd_ff': 256})
    w = model.encoder.layers[0].feed_forward.w_1.weight  # (256, 64)
    bound = (6 / sum(w.shape)) ** 0.5
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound


def test_parameter_table_base_config():
    with torch.device('meta'):
        base = Transformer(37000, 37000, tie_embeddings=True)
    rows = parameter_table(base)
    assert rows['total'] == sum(p.numel() for p in base.parameters()) == 82_065_544
    assert rows['encoder self-attention (6×)'] == 6 * 4 * (512 * 512 + 512)
    assert rows['decoder feed-forward (6×)'] == 6 * (2 * 512 * 2048 + 2048 + 512)
    assert rows['output projection'] == 37000  # its weight is the target embedding, counted there
    base.src_embed.lut.weight = base.tgt_embed.lut.weight  # the paper's three-way sharing
    assert parameter_table(base)['total'] == 63_121_544


def test_dropout_sites_name_every_dropout_and_its_role():
    from collections import Counter
    from transformer_tutorial.model import dropout_sites
    N = 3
    model = Transformer(11, 13, d_model=16, num_heads=2, num_layers=N, d_ff=32, dropout=0.2)
    sites = dropout_sites(model)
    assert len(sites) == sum(isinstance(m, torch.nn.Dropout) for m in model.modules())
    assert Counter(role for _, role, _ in sites) == {'embeddings + positions': 1, 'sublayer output (residual)': 5 * N,
                                                     'attention weights': 3 * N, 'feed-forward hidden': 2 * N}
    assert {p for _, _, p in sites} == {0.2}
    assert ('encoder.layers.0.self_attn.dropout', 'attention weights', 0.2) in sites
    model.extra = torch.nn.Dropout(0.3)  # a dropout the course does not know is listed, not refused
    assert dropout_sites(model)[-1] == ('extra', 'other', 0.3)
