"""A bank of student implementations the self-checks never saw while they were written: realistic mistakes (beyond
pitfalls.MUTANTS) and correct implementations written differently, which the checks must accept.

BANK is a list of (check name, implementation, is_correct). Every implementation has a one-line docstring:
"MISTAKE: ..." says what is wrong, "CORRECT: ..." says what is unusual about a right one, "UNSUPPORTED: ..." is
outside a check's documented contract. tests/test_student_bank.py runs every check on every implementation."""
import math
import torch
import torch.nn.functional as F
from torch import nn

from transformer_tutorial.multi_head import split_heads, merge_heads, MultiHeadAttention
from transformer_tutorial.positional import sinusoidal_positional_encoding
from transformer_tutorial.layer_norm import LayerNorm
from transformer_tutorial.feed_forward import PositionwiseFeedForward
from transformer_tutorial.pitfalls import MultiHeadAttentionScaledByDModel

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

SDPA, PAD, CAUSAL, SPLIT, MERGE = ('check_scaled_dot_product_attention', 'check_padding_mask', 'check_causal_mask',
                                   'check_split_heads', 'check_merge_heads')
MHA, PE, LN, FFN, ENC, DEC = ('check_multi_head_attention', 'check_positional_encoding', 'check_layer_norm',
                              'check_feed_forward', 'check_encoder_layer', 'check_decoder_layer')

def _scores(q, k, scale):
    return q @ k.transpose(-2, -1) * scale

def _weigh(s, v, mask):
    "The usual ending: fill masked scores with -inf, softmax over the keys, mix the values."
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    w = s.softmax(-1)
    return w @ v, w

# ---------------------------------------------------------------- scaled dot-product attention
@_reg(SDPA)
def sdpa_scale_by_key_length(query, key, value, mask=None):
    "MISTAKE: d_k read as key.size(-2) (the number of keys) instead of key.size(-1)."
    return _weigh(_scores(query, key, 1 / math.sqrt(key.size(-2))), value, mask)

@_reg(SDPA)
def sdpa_scale_by_d_v(query, key, value, mask=None):
    "MISTAKE: scales by sqrt(value.size(-1)) (d_v) instead of sqrt(d_k); only visible when d_v != d_k."
    return _weigh(_scores(query, key, 1 / math.sqrt(value.size(-1))), value, mask)

@_reg(SDPA)
def sdpa_dropout_always_on(query, key, value, mask=None):
    "MISTAKE: F.dropout(weights, 0.1) defaults to training=True, so attention dropout stays on in eval."
    s = _scores(query, key, 1 / math.sqrt(query.size(-1)))
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    w = F.dropout(s.softmax(-1), 0.1)
    return w @ value, w

@_reg(SDPA)
def sdpa_unscaled_and_mask_reversed(query, key, value, mask=None):
    "MISTAKE (two): no 1/sqrt(d_k) scaling AND the mask polarity reversed (fills where mask is True)."
    s = query @ key.transpose(-2, -1)
    if mask is not None: s = s.masked_fill(mask, float('-inf'))
    w = s.softmax(-1)
    return w @ value, w

@_reg(SDPA)
def sdpa_reversed_only_after_softmax(query, key, value, mask=None):
    "MISTAKE: masks the scores right, then zeroes weights where mask is True (polarity reversed in one of two places)."
    s = _scores(query, key, 1 / math.sqrt(query.size(-1)))
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    w = s.softmax(-1)
    if mask is not None: w = w.masked_fill(mask, 0.0)
    return w @ value, w

@_reg(SDPA)
def sdpa_fixed_axes(query, key, value, mask=None):
    "MISTAKE: key.transpose(2, 3) and size(3): fixed axes that only work for 4-D inputs."
    return _weigh(query @ key.transpose(2, 3) / math.sqrt(query.size(3)), value, mask)

@_reg(SDPA)
def sdpa_mask_view_by_batch(query, key, value, mask=None):
    "MISTAKE: mask.view(query.size(0), 1, -1, Lk) assumes one mask per batch element; a shared causal (1, 1, L, L) mask raises."
    return _weigh(_scores(query, key, 1 / math.sqrt(query.size(-1))), value, None if mask is None else mask.view(query.size(0), 1, -1, key.size(-2)))

@_reg(SDPA)
def sdpa_nan_on_fully_masked_row(query, key, value, mask=None):
    "MISTAKE: the -inf fill alone gives NaN for a query whose keys are all masked (0 / 0 in the softmax)."
    return _weigh(_scores(query, key, 1 / math.sqrt(query.size(-1))), value, mask)

@_reg(SDPA, correct=True)
def sdpa_einsum_mask_eq0(query, key, value, mask=None):
    "CORRECT: einsum over '...', scale folded into the query, masked_fill(mask == 0, finfo.min)."
    s = torch.einsum('...qd,...kd->...qk', query * query.size(-1) ** -0.5, key)
    if mask is not None: s = s.masked_fill(mask == 0, torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1)
    return torch.einsum('...qk,...kd->...qd', w, value), w

@_reg(SDPA)
def sdpa_renormalized(query, key, value, mask=None):
    "MISTAKE: stable exp, masked entries zeroed, rows renormalized: right, except 0/0 = NaN for a query whose keys are all masked."
    s = _scores(query, key, 1 / math.sqrt(query.size(-1)))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    if mask is not None: e = e * mask
    w = e / e.sum(-1, keepdim=True)
    return w @ value, w

@_reg(SDPA)
def sdpa_pytorch_kernel(query, key, value, mask=None):
    "MISTAKE: output from F.scaled_dot_product_attention, weights beside it with a -inf fill: NaN weights for a query whose keys are all masked."
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    s = _scores(query, key, 1 / math.sqrt(query.size(-1)))
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    return out, s.softmax(-1)

# ---------------------------------------------------------------- padding mask
@_reg(PAD)
def padding_mask_until_first_pad(tokens, pad_id):
    "MISTAKE: True until the first pad (cumsum of pads == 0): assumes the padding comes last, like the lengths mutant."
    return ((tokens == pad_id).cumsum(1) == 0)[:, None, None, :]

@_reg(PAD)
def padding_mask_first_pad_argmax(tokens, pad_id):
    "MISTAKE: length = argmax of (tokens == pad_id), which is 0 for a row without padding (that row becomes all False)."
    lengths = (tokens == pad_id).int().argmax(1)
    return (torch.arange(tokens.size(1))[None, :] < lengths[:, None])[:, None, None, :]

@_reg(PAD)
def padding_mask_off_by_one(tokens, pad_id):
    "MISTAKE: arange(L) <= length marks the first pad position of each row as real."
    lengths = (tokens != pad_id).sum(1)
    return (torch.arange(tokens.size(1))[None, :] <= lengths[:, None])[:, None, None, :]

@_reg(PAD)
def padding_mask_queries_and_keys(tokens, pad_id):
    "MISTAKE: also masks padded queries, returning a (B, 1, L, L) pairwise mask instead of the key mask (B, 1, 1, L)."
    m = tokens != pad_id
    return m[:, None, :, None] & m[:, None, None, :]

@_reg(PAD)
def padding_mask_int(tokens, pad_id):
    "MISTAKE: an integer 0/1 mask ((tokens != pad).int(), as old tutorials) instead of a boolean one."
    return (tokens != pad_id).int().unsqueeze(1).unsqueeze(2)

@_reg(PAD, correct=True)
def padding_mask_where(tokens, pad_id):
    "CORRECT: torch.where(tokens == pad_id, False, True), then [:, None, None]."
    return torch.where(tokens == pad_id, False, True)[:, None, None]

@_reg(PAD, correct=True)
def padding_mask_not_eq(tokens, pad_id):
    "CORRECT: ~(tokens == pad_id) with two unsqueezes."
    return (~tokens.eq(pad_id)).unsqueeze(1).unsqueeze(1)

# ---------------------------------------------------------------- causal mask
@_reg(CAUSAL)
def causal_mask_sees_next(size):
    "MISTAKE: tril(diagonal=1): each position also sees the next one (off by one)."
    return torch.ones(size, size).tril(1).bool()[None, None]

@_reg(CAUSAL)
def causal_mask_blocked_convention(size):
    "MISTAKE: nn.Transformer's convention, True = blocked: triu(diagonal=1)."
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)[None, None]

@_reg(CAUSAL)
def causal_mask_additive(size):
    "MISTAKE: an additive float mask (0 allowed, -inf future), like generate_square_subsequent_mask."
    return torch.triu(torch.full((size, size), float('-inf')), diagonal=1)

@_reg(CAUSAL)
def causal_mask_triu_eq0(size):
    "MISTAKE: triu(ones) == 0, meant as ~triu(ones, 1): the flip uses the wrong diagonal, so each position loses itself."
    return (torch.triu(torch.ones(size, size)) == 0)[None, None]

_BLOCK = torch.ones(16, 16, dtype=torch.bool).tril()   # nanoGPT-style precomputed block_size mask

@_reg(CAUSAL)
def causal_mask_fixed_block_size(size):
    "MISTAKE: slices a precomputed 16 x 16 mask, so any size > 16 silently gets a 16 x 16 mask."
    return _BLOCK[:size, :size][None, None]

@_reg(CAUSAL, correct=True)
def causal_mask_arange(size):
    "CORRECT: i >= j from two aranges, returned as (size, size)."
    i = torch.arange(size)
    return i[:, None] >= i[None, :]

@_reg(CAUSAL, correct=True)
def causal_mask_not_triu(size):
    "CORRECT: ~triu(ones, 1), shaped (1, size, size)."
    return ~torch.ones(size, size, dtype=torch.bool).triu(1)[None]

# ---------------------------------------------------------------- split heads
@_reg(SPLIT)
def split_heads_transpose_1_3(x, num_heads):
    "MISTAKE (two): views as (B, L, d_head, H) (interleaved heads) and transpose(1, 3) gives (B, H, d_head, L)."
    B, L, d = x.shape
    return x.view(B, L, d // num_heads, num_heads).transpose(1, 3)

@_reg(SPLIT)
def split_heads_seq_first_unpack(x, num_heads):
    "MISTAKE: unpacks x.shape as (L, B, d_model) (sequence-first habit), so batch and length swap in the view."
    L, B, d = x.shape
    return x.view(B, L, num_heads, d // num_heads).transpose(1, 2)

@_reg(SPLIT)
def split_heads_heads_into_batch(x, num_heads):
    "MISTAKE: folds heads into the batch, (B * H, L, d_head) (fairseq's layout), instead of (B, H, L, d_head)."
    B, L, d = x.shape
    return x.view(B, L, num_heads, d // num_heads).transpose(1, 2).reshape(B * num_heads, L, d // num_heads)

@_reg(SPLIT)
def split_heads_chunk_stack_no_check(x, num_heads):
    "MISTAKE: stacks x.chunk(num_heads) without checking divisibility; for 12 features and 5 heads chunk makes 4 heads of 3."
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)

@_reg(SPLIT, correct=True)
def split_heads_reshape_minus1(x, num_heads):
    "CORRECT: reshape(B, L, H, -1).permute(0, 2, 1, 3); -1 in the head axis raises when H does not divide d_model."
    return x.reshape(x.size(0), x.size(1), num_heads, -1).permute(0, 2, 1, 3)

@_reg(SPLIT, correct=True)
def split_heads_unflatten(x, num_heads):
    "CORRECT: unflatten the last axis into (H, -1), then permute."
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)

# ---------------------------------------------------------------- merge heads
@_reg(MERGE)
def merge_heads_view_noncontiguous(x):
    "MISTAKE: .view on the transposed (non-contiguous) tensor; raises as soon as H > 1."
    B, H, L, dh = x.shape
    return x.transpose(1, 2).view(B, L, H * dh)

@_reg(MERGE)
def merge_heads_squeezed(x):
    "MISTAKE: a trailing .squeeze() drops the batch or the length axis when it is 1."
    B, H, L, dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * dh).squeeze()

@_reg(MERGE)
def merge_heads_transpose_in_place(x):
    "MISTAKE: x.transpose_(1, 2) transposes the caller's tensor in place."
    B, H, L, dh = x.shape
    return x.transpose_(1, 2).reshape(B, L, H * dh)

@_reg(MERGE)
def merge_heads_transpose_1_3(x):
    "MISTAKE: transpose(1, 3) instead of transpose(1, 2) before the reshape."
    B, H, L, dh = x.shape
    return x.transpose(1, 3).reshape(B, L, H * dh)

@_reg(MERGE, correct=True)
def merge_heads_movedim_flatten(x):
    "CORRECT: movedim(1, 2) then flatten(2)."
    return x.movedim(1, 2).flatten(2)

@_reg(MERGE, correct=True)
def merge_heads_contiguous_view(x):
    "CORRECT: permute, .contiguous(), then view with -1."
    return x.permute(0, 2, 1, 3).contiguous().view(x.size(0), x.size(2), -1)

# ---------------------------------------------------------------- multi-head attention
def _attend(q, k, v, mask, scale): return _weigh(_scores(q, k, scale), v, mask)

class _MHABase(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))
    def attend(self, q_in, k_in, v_in, mask):
        "Project, split, attend, merge and apply W_O, right, on whichever inputs a mutant passes."
        q, k, v = (split_heads(f(t), self.num_heads) for f, t in ((self.w_q, q_in), (self.w_k, k_in), (self.w_v, v_in)))
        o, w = _attend(q, k, v, mask, self.d_head ** -0.5)
        return self.w_o(merge_heads(o)), w

@_reg(MHA)
class MHAKeyFromQuery(_MHABase):
    "MISTAKE: copy-paste slip: the key projection reads query (k = w_k(query)); breaks once Lk != Lq."
    def forward(self, query, key, value, mask=None):
        return self.attend(query, query, value, mask)

@_reg(MHA)
class MHAKeyFromValue(_MHABase):
    "MISTAKE: copy-paste slip: the key projection reads value (k = w_k(value)); right whenever key is value."
    def forward(self, query, key, value, mask=None):
        return self.attend(query, value, value, mask)

@_reg(MHA)
class MHAMaskUnsqueeze(_MHABase):
    "MISTAKE: assumes a (B, Lq, Lk) mask and always adds a head axis with mask.unsqueeze(1)."
    def forward(self, query, key, value, mask=None):
        return self.attend(query, key, value, None if mask is None else mask.unsqueeze(1))

@_reg(MHA)
class MHAScaleDModelMergeNoTranspose(_MHABase):
    "MISTAKE (two): scores scaled by sqrt(d_model) AND heads merged without the transpose (both invisible with one head)."
    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(f(t), self.num_heads) for f, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        o, w = _attend(q, k, v, mask, self.d_model ** -0.5)
        B, H, L, dh = o.shape
        return self.w_o(o.reshape(B, L, H * dh)), w

@_reg(MHA)
class MHATorchWrapperMaskNotInverted(nn.Module):
    "MISTAKE: wraps nn.MultiheadAttention but passes our mask as its attn_mask unchanged (PyTorch reads True = blocked)."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    def forward(self, query, key, value, mask=None):
        B, Lq, Lk = query.size(0), query.size(1), key.size(1)
        am = None if mask is None else mask.expand(B, self.h, Lq, Lk).reshape(B * self.h, Lq, Lk)
        return self.mha(query, key, value, attn_mask=am, need_weights=True, average_attn_weights=False)

@_reg(MHA, correct=True)
class MHARegisteredKVQ(nn.Module):
    "CORRECT: projections registered key, value, query, out (other names, other registration order)."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.key, self.value, self.query, self.out = (nn.Linear(d_model, d_model) for _ in range(4))
    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(f(t), self.h) for f, t in ((self.query, query), (self.key, key), (self.value, value)))
        o, w = _attend(q, k, v, mask, q.size(-1) ** -0.5)
        return self.out(merge_heads(o)), w

@_reg(MHA, correct=True)
class MHAFusedKV(nn.Module):
    "CORRECT: a query projection plus one fused key/value projection (2 d_model, d_model), common for cross-attention."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.to_q, self.to_kv, self.to_out = nn.Linear(d_model, d_model), nn.Linear(d_model, 2 * d_model), nn.Linear(d_model, d_model)
    def forward(self, query, key, value, mask=None):
        d = query.size(-1)
        W, b = self.to_kv.weight, self.to_kv.bias
        q = split_heads(self.to_q(query), self.h)
        k, v = split_heads(F.linear(key, W[:d], b[:d]), self.h), split_heads(F.linear(value, W[d:], b[d:]), self.h)
        o, w = _attend(q, k, v, mask, q.size(-1) ** -0.5)
        return self.to_out(merge_heads(o)), w

@_reg(MHA)
class MHAPerHeadLinears(nn.Module):
    "UNSUPPORTED: the paper's per-head projections W_i^Q, W_i^K, W_i^V (d_model -> d_head each, in ModuleLists), then W^O."
    def __init__(self, d_model, num_heads):
        super().__init__()
        dh = d_model // num_heads
        self.q_heads, self.k_heads, self.v_heads = (nn.ModuleList(nn.Linear(d_model, dh) for _ in range(num_heads)) for _ in range(3))
        self.w_o = nn.Linear(d_model, d_model)
    def forward(self, query, key, value, mask=None):
        q, k, v = (torch.stack([f(t) for f in fs], 1) for fs, t in ((self.q_heads, query), (self.k_heads, key), (self.v_heads, value)))
        o, w = _attend(q, k, v, mask, q.size(-1) ** -0.5)
        return self.w_o(merge_heads(o)), w

@_reg(MHA, correct=True)
class MHATorchWrapper(nn.Module):
    "CORRECT: wraps nn.MultiheadAttention (batch_first, average_attn_weights=False), mask turned into its True = blocked form."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.mha = nn.MultiheadAttention(d_model, num_heads, batch_first=True)
    def forward(self, query, key, value, mask=None):
        B, Lq, Lk = query.size(0), query.size(1), key.size(1)
        am = None if mask is None else (~mask).expand(B, self.h, Lq, Lk).reshape(B * self.h, Lq, Lk)
        return self.mha(query, key, value, attn_mask=am, need_weights=True, average_attn_weights=False)

# ---------------------------------------------------------------- positional encoding
def _angles(max_len, d_model, i_scale=1.0, start=0, multiply=False):
    pos = torch.arange(start, start + max_len, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    freq = 10000 ** (i_scale * i / d_model)
    return pos * freq if multiply else pos / freq

def _interleave(angle, d_model):
    pe = torch.zeros(angle.size(0), d_model)
    pe[:, 0::2], pe[:, 1::2] = angle.sin(), angle.cos()   # raises for odd d_model
    return pe

@_reg(PE)
def pe_exponent_doubled(max_len, d_model):
    "MISTAKE: i = arange(0, d, 2) is already 2i, but the exponent uses 2 * i / d_model (4i/d)."
    return _interleave(_angles(max_len, d_model, i_scale=2.0), d_model)

@_reg(PE)
def pe_integer_exponent(max_len, d_model):
    "MISTAKE: the exponent uses floor division, arange(0, d, 2) // d_model = 0, so every pair gets frequency 1."
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    return _interleave(pos / 10000 ** (torch.arange(0, d_model, 2) // d_model), d_model)

@_reg(PE)
def pe_arguments_swapped(d_model, max_len):
    "MISTAKE: signature (d_model, max_len), so fn(max_len, d_model) builds a correct table of the wrong size (d_model rows)."
    return sinusoidal_positional_encoding(max_len, d_model)

@_reg(PE)
def pe_positions_from_one(max_len, d_model):
    "MISTAKE: positions counted from 1 (arange(1, max_len + 1)), so row 0 is position 1."
    return _interleave(_angles(max_len, d_model, start=1), d_model)

@_reg(PE)
def pe_stack_interleave_float64(max_len, d_model):
    "MISTAKE: float64 angles from torch.pow, sin/cos stacked on a new axis and flattened (interleaved), cut to d_model, returned as float64 (the exercise asks for float32)."
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = pos * torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([angle.sin(), angle.cos()], -1).flatten(1)[:, :d_model]

@_reg(PE)
def pe_numpy(max_len, d_model):
    "MISTAKE: built in NumPy with a Python loop over pairs and returned via torch.from_numpy, as float64 (the exercise asks for float32)."
    import numpy as np
    pe = np.zeros((max_len, d_model))
    pos = np.arange(max_len)[:, None]
    for i in range(0, d_model, 2):
        pe[:, i] = np.sin(pos[:, 0] / 10000 ** (i / d_model))
        if i + 1 < d_model: pe[:, i + 1] = np.cos(pos[:, 0] / 10000 ** (i / d_model))
    return torch.from_numpy(pe)

# ---------------------------------------------------------------- layer norm
class _LNBase(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps
    def x_hat(self, x):
        "The right normalization, for the mutants whose mistake comes after it."
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps)

@_reg(LN)
class LNVarWithoutDim(_LNBase):
    "MISTAKE: mean over the last axis but x.var() with no dim: one variance for the whole tensor."
    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(unbiased=False) + self.eps) * self.weight + self.bias

@_reg(LN)
class LNNoKeepdim(_LNBase):
    "MISTAKE: mean and var without keepdim=True, so (B, L) does not broadcast against (B, L, d)."
    def forward(self, x):
        return (x - x.mean(-1)) / torch.sqrt(x.var(-1, unbiased=False) + self.eps) * self.weight + self.bias

@_reg(LN)
class LNForgotBias(_LNBase):
    "MISTAKE: registers a bias but only scales: x_hat * weight (no + bias)."
    def forward(self, x):
        return self.x_hat(x) * self.weight

@_reg(LN)
class LNShiftThenScale(_LNBase):
    "MISTAKE: shifts before scaling: (x_hat + bias) * weight."
    def forward(self, x):
        return (self.x_hat(x) + self.bias) * self.weight

@_reg(LN)
class LNInPlace(_LNBase):
    "MISTAKE: x -= mean; x /= std: normalizes the caller's tensor in place."
    def forward(self, x):
        x -= x.mean(-1, keepdim=True)
        x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * self.weight + self.bias

@_reg(LN)
class LNFixedAxis(_LNBase):
    "MISTAKE: statistics over dim=2 (a fixed axis): right for (B, L, d), raises for a 2-D (N, d) input."
    def forward(self, x):
        mu, var = x.mean(2, keepdim=True), x.var(2, keepdim=True, unbiased=False)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias

@_reg(LN)
class LNWeightBiasSwapped(_LNBase):
    "MISTAKE: uses the parameters swapped, x_hat * bias + weight: at initialization (weight 1, bias 0) it outputs all ones."
    def forward(self, x):
        return self.x_hat(x) * self.bias + self.weight

@_reg(LN)
class LNGammaInitZeros(_LNBase):
    "MISTAKE: copy-paste init, gamma = nn.Parameter(torch.zeros(d_model)): the fresh layer outputs 0 (the beta) everywhere."
    def __init__(self, d_model, eps=1e-5):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        return self.x_hat(x) * self.weight + self.bias

@_reg(LN, correct=True)
class LNFunctionalBiasFirst(nn.Module):
    "CORRECT: registers beta before gamma and calls F.layer_norm with eps=1e-6."
    def __init__(self, d_model):
        super().__init__()
        self.beta, self.gamma = nn.Parameter(torch.zeros(d_model)), nn.Parameter(torch.ones(d_model))
    def forward(self, x): return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta, 1e-6)

@_reg(LN)
class LNOnePassVariance(_LNBase):
    "MISTAKE (numerical): variance as E[x^2] - E[x]^2, which cancels when the mean is large against the std (eps is right)."
    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mu * mu
        return (x - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias

# ---------------------------------------------------------------- feed-forward
@_reg(FFN)
class FFNReluAfterSecond(PositionwiseFeedForward):
    "MISTAKE: ReLU moved after the second layer: relu(w_2(w_1(x)))."
    def forward(self, x): return self.w_2(self.w_1(x)).relu()

@_reg(FFN)
class FFNDropoutAlwaysOn(PositionwiseFeedForward):
    "MISTAKE: F.dropout(h, 0.1) (training=True by default), so dropout stays on in eval."
    def forward(self, x): return self.w_2(F.dropout(self.w_1(x).relu(), 0.1))

@_reg(FFN)
class FFNWithResidual(PositionwiseFeedForward):
    "MISTAKE: adds the residual inside the network, x + FFN(x) (the layer adds it again)."
    def forward(self, x): return x + self.w_2(self.w_1(x).relu())

@_reg(FFN)
class FFNReluOnInput(PositionwiseFeedForward):
    "MISTAKE: ReLU on the input instead of the hidden layer: w_2(w_1(relu(x)))."
    def forward(self, x): return self.w_2(self.w_1(x.relu()))

@_reg(FFN, correct=True)
class FFNConv1d(nn.Module):
    "CORRECT: the paper's 'two convolutions with kernel size 1' as nn.Conv1d over (B, d_model, L)."
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.c1, self.c2 = nn.Conv1d(d_model, d_ff, 1), nn.Conv1d(d_ff, d_model, 1)
    def forward(self, x): return self.c2(self.c1(x.transpose(1, 2)).relu()).transpose(1, 2)

@_reg(FFN, correct=True)
class FFNPaperLayout(nn.Module):
    "CORRECT: raw parameters in the paper's layout, max(0, x W1 + b1) W2 + b2 with W1 of shape (d_model, d_ff)."
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.W1, self.b1 = nn.Parameter(torch.randn(d_model, d_ff) * d_model ** -0.5), nn.Parameter(torch.zeros(d_ff))
        self.W2, self.b2 = nn.Parameter(torch.randn(d_ff, d_model) * d_ff ** -0.5), nn.Parameter(torch.zeros(d_model))
    def forward(self, x): return (x @ self.W1 + self.b1).relu() @ self.W2 + self.b2

@_reg(FFN, correct=True)
class FFNBiasFreeSecondFirst(nn.Module):
    "CORRECT: bias-free linears, the second registered first, plus an nn.Dropout that eval() turns off."
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.down, self.up, self.drop = nn.Linear(d_ff, d_model, bias=False), nn.Linear(d_model, d_ff, bias=False), nn.Dropout(0.1)
    def forward(self, x): return self.down(self.drop(F.relu(self.up(x))))

# ---------------------------------------------------------------- encoder layer
class _EncBase(nn.Module):
    Attn = MultiHeadAttention
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.attn, self.ff = self.Attn(d_model, num_heads), PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
    def forward(self, x, mask=None):
        y = self.norm1(x); x = x + self.attn(y, y, y, mask)[0]
        return x + self.ff(self.norm2(x))

@_reg(ENC)
class EncResidualFromNormed(_EncBase):
    "MISTAKE: the residual adds the normalized input: y = norm(x); x = y + attn(y) (same for the FFN)."
    def forward(self, x, mask=None):
        y = self.norm1(x); x = y + self.attn(y, y, y, mask)[0]
        y = self.norm2(x); return y + self.ff(y)

@_reg(ENC)
class EncNoFFResidual(_EncBase):
    "MISTAKE: the feed-forward sublayer has no residual: returns ff(norm2(x))."
    def forward(self, x, mask=None):
        y = self.norm1(x); x = x + self.attn(y, y, y, mask)[0]
        return self.ff(self.norm2(x))

@_reg(ENC)
class EncMaskInverted(_EncBase):
    "MISTAKE: passes ~mask to the attention (thinks the mask marks padding): polarity reversed in the layer only."
    def forward(self, x, mask=None):
        return super().forward(x, None if mask is None else ~mask)

@_reg(ENC)
class EncInPlaceResidual(_EncBase):
    "MISTAKE: x += attn(...): the residual updates the caller's tensor in place."
    def forward(self, x, mask=None):
        y = self.norm1(x); x += self.attn(y, y, y, mask)[0]
        return x + self.ff(self.norm2(x))

@_reg(ENC)
class EncAttnScaledByDModel(_EncBase):
    "MISTAKE: its attention scales by sqrt(d_model) instead of sqrt(d_head) (the layer wiring is right)."
    Attn = MultiHeadAttentionScaledByDModel

@_reg(ENC)
class EncExtraFinalNorm(_EncBase):
    "MISTAKE: a third LayerNorm applied to the layer's output (the stack's final norm put inside every layer)."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__(d_model, num_heads, d_ff)
        self.norm_out = LayerNorm(d_model)
    def forward(self, x, mask=None): return self.norm_out(super().forward(x, mask))

@_reg(ENC, correct=True)
class EncTorchBuiltin(nn.Module):
    "CORRECT: wraps nn.TransformerEncoderLayer(norm_first=True, dropout=0, batch_first=True), mask as True = blocked."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.h = num_heads
        self.layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True)
    def forward(self, x, mask=None):
        B, L = x.shape[:2]
        am = None if mask is None else (~mask).expand(B, self.h, L, L).reshape(B * self.h, L, L)
        return self.layer(x, src_mask=am)

@_reg(ENC, correct=True)
class EncBiasFreeFFN(_EncBase):
    "CORRECT: standard pre-LN layer whose feed-forward is nn.Sequential of bias-free Linears (bias=False)."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__(d_model, num_heads, d_ff)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff, bias=False), nn.ReLU(), nn.Linear(d_ff, d_model, bias=False))

@_reg(ENC, correct=True)
class EncNormsFirstBiasFree(nn.Module):
    "CORRECT: norms (nn.LayerNorm, eps=1e-6) in a ModuleList registered first, FFN next, bias-free attention last."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(d_model, eps=1e-6) for _ in range(2))
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.mha = MultiHeadAttention(d_model, num_heads, bias=False)
    def forward(self, x, mask=None):
        y = self.norms[0](x); x = x + self.mha(y, y, y, mask)[0]
        return x + self.mlp(self.norms[1](x))

# ---------------------------------------------------------------- decoder layer
class _DecBase(nn.Module):
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model, num_heads)
        self.ff = PositionwiseFeedForward(d_model, d_ff)
        self.n1, self.n2, self.n3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
    def _self(self, x, m):
        y = self.n1(x); return x + self.self_attn(y, y, y, m)[0]
    def _cross(self, x, memory, m):
        y = self.n2(x); return x + self.cross_attn(y, memory, memory, m)[0]
    def _ff(self, x):
        return x + self.ff(self.n3(x))

@_reg(DEC)
class DecMemoryMaskReversed(_DecBase):
    "MISTAKE: passes ~memory_mask to cross-attention (treats it as True = pad); tgt_mask is used right."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self._self(x, tgt_mask)
        x = self._cross(x, memory, None if memory_mask is None else ~memory_mask)
        return self._ff(x)

@_reg(DEC)
class DecTgtMaskInCross(_DecBase):
    "MISTAKE: passes tgt_mask to the cross-attention too, instead of memory_mask."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self._ff(self._cross(self._self(x, tgt_mask), memory, tgt_mask))

@_reg(DEC)
class DecCrossBeforeSelf(_DecBase):
    "MISTAKE: the cross-attention sublayer runs before the masked self-attention."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        y = self.n1(x); x = x + self.cross_attn(y, memory, memory, memory_mask)[0]
        y = self.n2(x); x = x + self.self_attn(y, y, y, tgt_mask)[0]
        return self._ff(x)

@_reg(DEC)
class DecQueryFromMemory(_DecBase):
    "MISTAKE: cross-attention roles swapped: queries from memory, keys/values from the decoder, cross_attn(memory, y, y)."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self._self(x, tgt_mask)
        y = self.n2(x); x = x + self.cross_attn(memory, y, y, memory_mask)[0]
        return self._ff(x)

@_reg(DEC)
class DecOwnCausalMask(_DecBase):
    "MISTAKE: ignores tgt_mask and always builds its own causal mask (target padding is never masked)."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        L = x.size(1)
        x = self._self(x, torch.ones(L, L, dtype=torch.bool).tril())
        return self._ff(self._cross(x, memory, memory_mask))

@_reg(DEC)
class DecIgnoresMemoryMask(_DecBase):
    "MISTAKE: memory_mask is accepted but never passed to the cross-attention (source padding is attended)."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self._ff(self._cross(self._self(x, tgt_mask), memory, None))

@_reg(DEC)
class DecPostLNNoMemoryMask(_DecBase):
    "MISTAKE (two): post-LN sublayers AND memory_mask never passed to the cross-attention."
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        x = self.n1(x + self.self_attn(x, x, x, tgt_mask)[0])
        x = self.n2(x + self.cross_attn(x, memory, memory)[0])
        return self.n3(x + self.ff(x))

@_reg(DEC, correct=True)
class DecFusedKVCross(_DecBase):
    "CORRECT: the cross-attention has a fused key/value projection (2 d_model, d_model); otherwise standard pre-LN."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__(d_model, num_heads, d_ff)
        self.cross_attn = MHAFusedKV(d_model, num_heads)
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self._ff(self._cross(self._self(x, tgt_mask), memory, memory_mask))

@_reg(DEC, correct=True)
class DecTorchBuiltin(nn.Module):
    "CORRECT: wraps nn.TransformerDecoderLayer(norm_first=True, dropout=0, batch_first=True), masks as True = blocked."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.h = num_heads
        self.layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True)
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        B, L, Lm = x.size(0), x.size(1), memory.size(1)
        conv = lambda m, lk: None if m is None else (~m).expand(B, self.h, L, lk).reshape(B * self.h, L, lk)
        return self.layer(x, memory, tgt_mask=conv(tgt_mask, L), memory_mask=conv(memory_mask, Lm))
