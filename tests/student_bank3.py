"""A third bank of student implementations, written after the first (student_bank.py) was passed: the dtype of a
returned table, dropout left on in eval mode when a layer is built with a nonzero rate, inputs the exercise text allows
(an odd d_model, no mask), and outputs of the wrong kind (a tuple, a list, a NumPy array, the weights first).

BANK is a list of (check name, implementation, is_correct), as in student_bank.py; tests/test_student_bank.py runs both."""
import math
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from transformer_tutorial.multi_head import MultiHeadAttention, split_heads
from transformer_tutorial.layer_norm import LayerNorm
from transformer_tutorial.feed_forward import PositionwiseFeedForward
from transformer_tutorial.positional import sinusoidal_positional_encoding

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

SDPA, CAUSAL, SPLIT, MHA, PE, LN, FFN, ENC, DEC = (
    'check_scaled_dot_product_attention', 'check_causal_mask', 'check_split_heads', 'check_multi_head_attention',
    'check_positional_encoding', 'check_layer_norm', 'check_feed_forward', 'check_encoder_layer', 'check_decoder_layer')

def _attention(query, key, value, mask=None):
    "The right attention: scores scaled, masked, softmax, fully masked rows zeroed."
    s = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    w = s.softmax(-1)
    if mask is not None: w = w.masked_fill(~mask, 0.0)
    return w @ value, w

# ---------------------------------------------------------------- outputs of the wrong kind
@_reg(SDPA)
def sdpa_output_only(query, key, value, mask=None):
    "MISTAKE: returns the output alone, not the pair (output, weights)."
    return _attention(query, key, value, mask)[0]

@_reg(SDPA)
def sdpa_weights_first(query, key, value, mask=None):
    "MISTAKE: returns (weights, output), the pair in the other order."
    out, w = _attention(query, key, value, mask)
    return w, out

@_reg(CAUSAL)
def causal_mask_numpy(size):
    "MISTAKE: a NumPy boolean array, np.tril(np.ones(...)) (not a tensor)."
    return np.tril(np.ones((size, size), dtype=bool))[None, None]

@_reg(SPLIT)
def split_heads_list_of_heads(x, num_heads):
    "MISTAKE: a list of num_heads tensors (x.chunk along the features), not one (B, H, L, d_head) tensor."
    return list(x.chunk(num_heads, dim=-1))

class MHAOutputOnly(MultiHeadAttention):
    "MISTAKE: forward returns the output alone, without the attention weights."
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask)[0]
_reg(MHA)(MHAOutputOnly)

class LNReturnsStatistics(LayerNorm):
    "MISTAKE: returns (output, mean, variance), for debugging, instead of the output."
    def forward(self, x):
        return super().forward(x), x.mean(-1), x.var(-1, unbiased=False)
_reg(LN)(LNReturnsStatistics)

class FFNReturnsHidden(PositionwiseFeedForward):
    "MISTAKE: returns (output, hidden activations) instead of the output."
    def forward(self, x):
        h = self.w_1(x).relu()
        return self.w_2(h), h
_reg(FFN)(FFNReturnsHidden)

class _Enc(nn.Module):
    "The right pre-LN encoder layer, with dropout on each sublayer's output as `drop` applies it."
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.p = dropout
    def drop(self, t): return F.dropout(t, self.p, self.training)
    def attend(self, x, mask):
        y = self.norm1(x)
        return self.self_attn(y, y, y, mask)
    def forward(self, x, mask=None):
        x = x + self.drop(self.attend(x, mask)[0])
        return x + self.drop(self.feed_forward(self.norm2(x)))

class EncReturnsWeights(_Enc):
    "MISTAKE: returns (x, attention weights), as nn.MultiheadAttention does, instead of x alone."
    def forward(self, x, mask=None):
        out, w = self.attend(x, mask)
        x = x + self.drop(out)
        return x + self.drop(self.feed_forward(self.norm2(x))), w
_reg(ENC)(EncReturnsWeights)

class _Dec(nn.Module):
    "The right pre-LN decoder layer, with dropout on each sublayer's output as `drop` applies it."
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model, num_heads)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.p = dropout
    def drop(self, t): return F.dropout(t, self.p, self.training)
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        y = self.norm1(x)
        x = x + self.drop(self.self_attn(y, y, y, tgt_mask)[0])
        y = self.norm2(x)
        x = x + self.drop(self.cross_attn(y, memory, memory, memory_mask)[0])
        return x + self.drop(self.feed_forward(self.norm3(x)))

class DecReturnsList(_Dec):
    "MISTAKE: returns [x] (a one-element list, from collecting each layer's output) instead of x."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return [super().forward(x, memory, tgt_mask, memory_mask)]
_reg(DEC)(DecReturnsList)

# ---------------------------------------------------------------- dtype
@_reg(PE)
def pe_float64(max_len, d_model):
    "MISTAKE: the right table in float64 (the text asks for float32): added to float32 embeddings it makes the model's activations float64."
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle[:, : d_model // 2].cos()
    return pe

@_reg(PE)
def pe_half(max_len, d_model):
    "MISTAKE: the table in float16 ('to save memory'), whose values are off by up to 5e-4."
    return sinusoidal_positional_encoding(max_len, d_model).half()

@_reg(PE, correct=True)
def pe_float64_then_float(max_len, d_model):
    "CORRECT: angles in float64 for accuracy, the table returned as float32."
    return pe_float64(max_len, d_model).float()

# ---------------------------------------------------------------- inputs the exercise text allows
@_reg(PE)
def pe_even_d_model_only(max_len, d_model):
    "MISTAKE: pe[:, 1::2] = cos(angle) with as many cosine columns as sines: raises for an odd d_model, which the text asks for."
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    angle = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()
    return pe

class EncMaskRequired(_Enc):
    "MISTAKE: forward(x, mask) uses ~mask without looking for None, so a call without a mask (the signature's default) raises."
    def forward(self, x, mask=None):
        return super().forward(x, ~~mask)
_reg(ENC)(EncMaskRequired)

class DecMemoryMaskRequired(_Dec):
    "MISTAKE: broadcasts memory_mask against the keys without looking for None, so a call without it raises."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return super().forward(x, memory, tgt_mask, memory_mask.expand(-1, -1, -1, memory.size(1)))
_reg(DEC)(DecMemoryMaskRequired)

# ---------------------------------------------------------------- dropout with a nonzero rate, in eval mode
class EncFunctionalDropout(_Enc):
    "MISTAKE: F.dropout(t, self.p) with training left at its default, True: with dropout > 0 it drops in eval mode too."
    def drop(self, t): return F.dropout(t, self.p)
_reg(ENC)(EncFunctionalDropout)

class DecFunctionalDropout(_Dec):
    "MISTAKE: F.dropout(t, self.p) with training left at its default, True: with dropout > 0 it drops in eval mode too."
    def drop(self, t): return F.dropout(t, self.p)
_reg(DEC)(DecFunctionalDropout)

_reg(ENC, correct=True)(_Enc)  # CORRECT: F.dropout(t, self.p, self.training)
_reg(DEC, correct=True)(_Dec)

class EncDropoutModule(_Enc):
    "CORRECT: an nn.Dropout module, which eval() switches off."
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.dropout = nn.Dropout(dropout)
    def drop(self, t): return self.dropout(t)
_reg(ENC, correct=True)(EncDropoutModule)
