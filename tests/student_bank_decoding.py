"""A bank of student implementations for the checks of exercise 11 (greedy decoding with a key/value cache): plausible
mistakes, each named with the mistake it makes, and correct versions written differently, which the checks must
accept. BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
import math
import torch
import torch.nn.functional as F
from transformer_tutorial.multi_head import split_heads, merge_heads
from transformer_tutorial.masks import padding_mask, causal_mask

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

ATTN, GREEDY = 'check_cached_self_attention', 'check_greedy_decode_cached'

# ---------------------------------------------------------------- one cached self-attention step
def _new(mha, y):
    "This position's query, key and value, split into heads (B, H, 1, d_head)."
    H = mha.num_heads
    return split_heads(mha.w_q(y), H), split_heads(mha.w_k(y), H), split_heads(mha.w_v(y), H)

@_reg(ATTN, correct=True)
def attn_cat_sdpa(mha, y, past_k, past_v):
    "CORRECT: concatenate, then PyTorch's fused attention."
    q, k, v = _new(mha, y)
    k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
    return mha.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v))), k, v

@_reg(ATTN, correct=True)
def attn_by_hand(mha, y, past_k, past_v):
    "CORRECT: scores, softmax and weighted sum written out."
    q, k, v = _new(mha, y)
    k, v = torch.cat((past_k, k), dim=-2), torch.cat((past_v, v), dim=-2)
    w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)      # (B, H, 1, t+1)
    return mha.w_o(merge_heads(w @ v)), k, v

@_reg(ATTN, correct=True)
def attn_einsum_no_split_helper(mha, y, past_k, past_v):
    "CORRECT: heads split with view, attention with einsum."
    B, H = y.size(0), mha.num_heads
    q = mha.w_q(y).view(B, 1, H, -1).transpose(1, 2)
    k = torch.cat([past_k, mha.w_k(y).view(B, 1, H, -1).transpose(1, 2)], 2)
    v = torch.cat([past_v, mha.w_v(y).view(B, 1, H, -1).transpose(1, 2)], 2)
    w = torch.einsum('bhqd,bhkd->bhqk', q, k).div(q.size(-1) ** 0.5).softmax(-1)
    out = torch.einsum('bhqk,bhkd->bhqd', w, v).transpose(1, 2).reshape(B, 1, -1)
    return mha.w_o(out), k, v

@_reg(ATTN)
def attn_before_append(mha, y, past_k, past_v):
    "MISTAKE: attends to the cache, then appends: the newest position does not see itself."
    q, k, v = _new(mha, y)
    out = F.scaled_dot_product_attention(q, past_k, past_v)
    return mha.w_o(merge_heads(out)), torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)

@_reg(ATTN)
def attn_append_twice(mha, y, past_k, past_v):
    "MISTAKE: appends the new key and value once to attend and once more to return."
    q, k, v = _new(mha, y)
    kk, vv = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
    out = F.scaled_dot_product_attention(q, kk, vv)
    return mha.w_o(merge_heads(out)), torch.cat([kk, k], 2), torch.cat([vv, v], 2)

@_reg(ATTN)
def attn_not_returned(mha, y, past_k, past_v):
    "MISTAKE: attends over the grown cache but returns the old one."
    q, k, v = _new(mha, y)
    out = F.scaled_dot_product_attention(q, torch.cat([past_k, k], 2), torch.cat([past_v, v], 2))
    return mha.w_o(merge_heads(out)), past_k, past_v

@_reg(ATTN)
def attn_causal_mask(mha, y, past_k, past_v):
    "MISTAKE: keeps the training-time causal mask: its first row, for one query, lets it see position 0 only."
    q, k, v = _new(mha, y)
    k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
    mask = causal_mask(k.size(2))[:, :, :1]                                 # (1, 1, 1, t+1)
    return mha.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask))), k, v

@_reg(ATTN)
def attn_values_from_keys(mha, y, past_k, past_v):
    "MISTAKE: the values projected with w_k."
    H = mha.num_heads
    q, k = split_heads(mha.w_q(y), H), split_heads(mha.w_k(y), H)
    k, v = torch.cat([past_k, k], 2), torch.cat([past_v, k], 2)
    return mha.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v))), k, v

@_reg(ATTN)
def attn_feature_axis(mha, y, past_k, past_v):
    "MISTAKE: concatenates along the last axis."
    q, k, v = _new(mha, y)
    k, v = torch.cat([past_k, k], -1), torch.cat([past_v, v], -1)
    return mha.w_o(merge_heads(q)), k, v

@_reg(ATTN)
def attn_new_first(mha, y, past_k, past_v):
    "MISTAKE: puts the new key and value before the cached ones."
    q, k, v = _new(mha, y)
    k, v = torch.cat([k, past_k], 2), torch.cat([v, past_v], 2)
    return mha.w_o(merge_heads(F.scaled_dot_product_attention(q, k, v))), k, v

@_reg(ATTN)
def attn_float32(mha, y, past_k, past_v):
    "MISTAKE: the attention computed in float32 whatever the input's dtype."
    q, k, v = _new(mha, y)
    k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    return mha.w_o(merge_heads(out).to(y.dtype)).float(), k, v

NAMED = {
    'attn_before_append': 'the newest position is missing',
    'attn_append_twice': 'appended twice',
    'attn_not_returned': 'were not appended',
    'attn_causal_mask': 'attends to position 0 only',
    'attn_values_from_keys': 'the new value is projected with w_k',
    'attn_feature_axis': 'concatenated along a wrong axis',
    'attn_new_first': "this position's key or value came first",
    'attn_float32': "keep the inputs' dtype",
}

# ---------------------------------------------------------------- greedy decoding with the cache
def _decode(model, src, max_len, start_id, end_id, pad_id, *, attend=attn_cat_sdpa, position=lambda t: t, memory_mask=True,
            encoder_mask=True, pad_after_end=True, stop=lambda done: bool(done.all()), argmax=lambda logits: logits[:, 0].argmax(-1),
            one_cache=False, memory_row0=False, cache=None, reencode=False, final_norm=True):
    "The pieces every version below shares, with the choice each one changes."
    src_mask = padding_mask(src, pad_id)                                    # (B, 1, 1, Ls)
    memory = model.encode(src, src_mask if encoder_mask else None)
    if memory_row0: memory = memory[:1].expand_as(memory)
    B, H = src.size(0), model.config.num_heads
    empty = memory.new_zeros(B, H, 0, model.config.d_model // H)
    layers = model.decoder.layers
    caches = cache if cache is not None else [(empty, empty) for _ in layers]
    token = torch.full((B,), start_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    out = []
    for t in range(max_len):
        if reencode: memory = model.encode(src, src_mask if encoder_mask else None)
        x = model.tgt_embed(token[:, None]) + model.positional.pe[position(t)]
        for i, layer in enumerate(layers):
            j = 0 if one_cache else i
            def self_attn(y, j=j):
                o, k, v = attend(layer.self_attn, y, *caches[j])
                caches[j] = (k, v)
                return o
            x = layer.sublayers[0](x, self_attn)
            x = layer.sublayers[1](x, lambda y: layer.cross_attn(y, memory, memory, src_mask if memory_mask else None)[0])
            x = layer.sublayers[2](x, layer.feed_forward)
        token = argmax(model.output(model.decoder.norm(x) if final_norm else x))
        if pad_after_end: token = token.masked_fill(done, pad_id)
        out.append(token)
        done = done | (token == end_id)
        if stop(done): break
    return torch.stack(out, 1)

@_reg(GREEDY, correct=True)
@torch.no_grad()
def greedy_lists(model, src, max_len, start_id, end_id, pad_id):
    "CORRECT: a list of (keys, values) per layer, tokens collected in a list, stops when every row has ended."
    return _decode(model, src, max_len, start_id, end_id, pad_id)

@_reg(GREEDY, correct=True)
@torch.no_grad()
def greedy_preallocated(model, src, max_len, start_id, end_id, pad_id):
    "CORRECT: a (B, max_len) output filled with pad_id up front, finished rows masked, cut after the step where the last row ended (the statement: stop when every row has ended)."
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    B, H, d = src.size(0), model.config.num_heads, model.config.d_model
    cache = {i: (memory.new_zeros(B, H, 0, d // H),) * 2 for i in range(len(model.decoder.layers))}
    out = torch.full((B, max_len), pad_id, dtype=torch.long)
    alive = torch.ones(B, dtype=torch.bool)
    prev = torch.full((B, 1), start_id, dtype=torch.long)
    for t in range(max_len):
        x = model.positional.pe[t:t + 1] + model.tgt_embed(prev)            # (B, 1, d_model)
        for i, layer in enumerate(model.decoder.layers):
            h = layer.sublayers[0].norm(x)
            a, *cache[i] = attn_by_hand(layer.self_attn, h, *cache[i])
            x = x + a
            x = x + layer.cross_attn(layer.sublayers[1].norm(x), memory, memory, src_mask)[0]
            x = x + layer.feed_forward(layer.sublayers[2].norm(x))
        nxt = model.output(model.decoder.norm(x)).squeeze(1).argmax(dim=1)
        out[alive, t] = nxt[alive]
        alive &= nxt != end_id
        if not alive.any(): return out[:, :t + 1]
        prev = nxt[:, None]
    return out

@_reg(GREEDY, correct=True)
@torch.no_grad()
def greedy_stop_when_all_ended(model, src, max_len, start_id, end_id, pad_id):
    "CORRECT: a while loop, the einsum attention, torch.where for the finished rows."
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    B, H = src.size(0), model.config.num_heads
    ks = [memory.new_zeros(B, H, 0, model.config.d_model // H) for _ in model.decoder.layers]
    vs = list(ks)
    ys, finished, t = [], torch.zeros(B, dtype=torch.bool), 0
    last = torch.full((B,), start_id)
    while t < max_len and not finished.all():
        x = model.tgt_embed(last.unsqueeze(1)) + model.positional.pe[t]
        for i, layer in enumerate(model.decoder.layers):
            def sa(y, i=i):
                o, ks[i], vs[i] = attn_einsum_no_split_helper(layer.self_attn, y, ks[i], vs[i])
                return o
            x = layer.sublayers[0](x, sa)
            x = layer.sublayers[1](x, lambda y: layer.cross_attn(y, memory, memory, src_mask)[0])
            x = layer.sublayers[2](x, layer.feed_forward)
        last = torch.where(finished, torch.full_like(last, pad_id), model.output(model.decoder.norm(x))[:, -1].argmax(-1))
        ys.append(last)
        finished |= last == end_id
        t += 1
    return torch.stack(ys, dim=1)

@_reg(GREEDY)
@torch.no_grad()
def greedy_position_zero(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: model.positional(...) on the one new token adds position 0's encoding at every step."
    return _decode(model, src, max_len, start_id, end_id, pad_id, position=lambda t: 0)

@_reg(GREEDY)
@torch.no_grad()
def greedy_position_next(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: the token generated at step t is fed at position t + 1 (counting the start token as position 1)."
    return _decode(model, src, max_len, start_id, end_id, pad_id, position=lambda t: t + 1)

@_reg(GREEDY)
@torch.no_grad()
def greedy_no_memory_mask(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: cross-attention without the source's padding mask."
    return _decode(model, src, max_len, start_id, end_id, pad_id, memory_mask=False)

@_reg(GREEDY)
@torch.no_grad()
def greedy_no_encoder_mask(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: model.encode(src) without the mask."
    return _decode(model, src, max_len, start_id, end_id, pad_id, encoder_mask=False)

@_reg(GREEDY)
@torch.no_grad()
def greedy_no_pad_after_end(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: a finished row keeps generating while the others go on."
    return _decode(model, src, max_len, start_id, end_id, pad_id, pad_after_end=False)

@_reg(GREEDY)
@torch.no_grad()
def greedy_stop_at_first_end(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: breaks as soon as any row produces end_id."
    return _decode(model, src, max_len, start_id, end_id, pad_id, stop=lambda done: bool(done.any()))

@_reg(GREEDY)
@torch.no_grad()
def greedy_argmax_wrong_axis(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: argmax over the length axis of (B, 1, V): always 0."
    return _decode(model, src, max_len, start_id, end_id, pad_id, argmax=lambda logits: logits.argmax(1)[:, 0])

@_reg(GREEDY)
@torch.no_grad()
def greedy_attend_before_append(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: its cached attention attends before appending (at step 0 to nothing at all: zeros)."
    def attend(mha, y, pk, pv):
        q, k, v = _new(mha, y)
        out = F.scaled_dot_product_attention(q, pk, pv) if pk.size(2) else torch.zeros_like(q)
        return mha.w_o(merge_heads(out)), torch.cat([pk, k], 2), torch.cat([pv, v], 2)
    return _decode(model, src, max_len, start_id, end_id, pad_id, attend=attend)

@_reg(GREEDY)
@torch.no_grad()
def greedy_one_cache_for_all_layers(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: every layer appends to the same cache."
    return _decode(model, src, max_len, start_id, end_id, pad_id, one_cache=True)

@_reg(GREEDY)
@torch.no_grad()
def greedy_memory_of_row0(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: the cross-attention keys of row 0 serve the whole batch (memory[:1] broadcast)."
    return _decode(model, src, max_len, start_id, end_id, pad_id, memory_row0=True)

_SHARED = []
@_reg(GREEDY)
@torch.no_grad()
def greedy_cache_outlives_call(model, src, max_len, start_id, end_id, pad_id, cache=_SHARED):
    "MISTAKE: the cache is a default argument, kept from one call to the next."
    if not cache:
        B, H = src.size(0), model.config.num_heads
        empty = torch.zeros(B, H, 0, model.config.d_model // H, dtype=next(model.parameters()).dtype)
        cache.extend((empty, empty) for _ in model.decoder.layers)
    if cache[0][0].size(0) != src.size(0): cache[:] = [(c[0][:0].new_zeros(src.size(0), *c[0].shape[1:3], 0)[..., :0].new_zeros(src.size(0), c[0].size(1), 0, c[0].size(3)),) * 2 for c in cache]
    return _decode(model, src, max_len, start_id, end_id, pad_id, cache=cache)

@_reg(GREEDY)
@torch.no_grad()
def greedy_recompute(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: no cache: the whole prefix through the decoder at every step (right tokens, quadratic work)."
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_id, dtype=torch.long)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        nxt = model.decode(ys, memory, causal_mask(ys.size(1)), src_mask)[:, -1].argmax(-1).masked_fill(done, pad_id)
        ys = torch.cat([ys, nxt[:, None]], 1)
        done |= nxt == end_id
        if done.all(): break
    return ys[:, 1:]

@_reg(GREEDY)
@torch.no_grad()
def greedy_with_start(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: returns the start token as the first column."
    out = _decode(model, src, max_len, start_id, end_id, pad_id)
    return torch.cat([torch.full_like(out[:, :1], start_id), out], 1)

@_reg(GREEDY)
@torch.no_grad()
def greedy_encodes_every_step(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: calls model.encode again at every step (the tokens agree; the exercise encodes the source once)."
    return _decode(model, src, max_len, start_id, end_id, pad_id, reencode=True)

@_reg(GREEDY)
@torch.no_grad()
def greedy_never_stops(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: always runs max_len steps, returning columns of pads after every row has ended."
    return _decode(model, src, max_len, start_id, end_id, pad_id, stop=lambda done: False)

@_reg(GREEDY)
@torch.no_grad()
def greedy_no_final_norm(model, src, max_len, start_id, end_id, pad_id):
    "MISTAKE: the decoder's final norm is left out before the output layer."
    return _decode(model, src, max_len, start_id, end_id, pad_id, final_norm=False)

NAMED.update({
    'greedy_encodes_every_step': 'encode the source once',
    'greedy_never_stops': 'stop when every row has produced end_id',
    'greedy_no_final_norm': "the decoder's final norm is missing",
    'greedy_position_zero': "position 0's positional encoding",
    'greedy_position_next': 'one position ahead',
    'greedy_no_memory_mask': 'cross-attention reads the source',
    'greedy_no_encoder_mask': 'the encoder reads the source',
    'greedy_no_pad_after_end': 'a row goes on after its end_id',
    'greedy_stop_at_first_end': 'stops when the first row ends',
    'greedy_argmax_wrong_axis': 'argmax ran over a wrong axis',
    'greedy_attend_before_append': 'missing from its own self-attention',
    'greedy_one_cache_for_all_layers': 'each layer needs a cache of its own',
    'greedy_memory_of_row0': 'the rows of the batch share something',
    'greedy_cache_outlives_call': 'the cache outlives the call',
    'greedy_recompute': 'recomputes the keys of the whole prefix',
    'greedy_with_start': 'the start token is not part of the output',
})

# ---------------------------------------------------------------- exercise 12: the length penalty and beam search
PENALTY, BEAM = 'check_length_penalty', 'check_beam_search'

@_reg(PENALTY, correct=True)
def penalty_formula(length, alpha):
    "CORRECT: GNMT's formula as written."
    return ((5 + length) / 6) ** alpha

@_reg(PENALTY, correct=True)
def penalty_one_plus(length, alpha):
    "CORRECT: the same number as 1 + (length - 1) / 6."
    return (1 + (length - 1) / 6) ** alpha

@_reg(PENALTY, correct=True)
def penalty_builtin_pow(length, alpha):
    "CORRECT: the builtin pow, which works on numbers and tensors."
    return pow((length + 5) / 6, alpha)

@_reg(PENALTY)
def penalty_six_outside(length, alpha):
    "MISTAKE: (5 + length) ** alpha / 6."
    return (5 + length) ** alpha / 6

@_reg(PENALTY)
def penalty_length_power(length, alpha):
    "MISTAKE: length ** alpha, the simpler normalization."
    return length ** alpha

@_reg(PENALTY)
def penalty_times_alpha(length, alpha):
    "MISTAKE: alpha multiplies instead of being the exponent."
    return (5 + length) / 6 * alpha

@_reg(PENALTY)
def penalty_no_denominator(length, alpha):
    "MISTAKE: (5 + length) ** alpha, without dividing by (5 + 1) ** alpha."
    return (5 + length) ** alpha

@_reg(PENALTY)
def penalty_math_pow(length, alpha):
    "MISTAKE: math.pow, which turns a tensor of lengths into an error."
    return math.pow((5 + length) / 6, alpha)

@_reg(PENALTY)
def penalty_number_at_alpha_zero(length, alpha):
    "MISTAKE: returns the number 1 at alpha = 0, also for a tensor of lengths."
    return 1.0 if alpha == 0 else ((5 + length) / 6) ** alpha

@_reg(PENALTY)
def penalty_six_to_the_alpha(length, alpha):
    "MISTAKE: (5 + length) / 6 ** alpha: ** binds tighter than /."
    return (5 + length) / 6 ** alpha

@_reg(PENALTY)
def penalty_over_five(length, alpha):
    "MISTAKE: divides by 5 instead of 6."
    return ((5 + length) / 5) ** alpha

NAMED.update({
    'penalty_number_at_alpha_zero': 'at alpha=0: return a tensor like the lengths',
    'penalty_six_to_the_alpha': 'only the 6 is raised to alpha',
    'penalty_over_five': 'divided by 5 instead of 6',
    'penalty_six_outside': 'the division by 6 is outside the power',
    'penalty_length_power': 'length ** alpha is the simpler penalty',
    'penalty_times_alpha': 'alpha multiplies instead of being the exponent',
    'penalty_no_denominator': 'the denominator (5 + 1) ** alpha is missing',
    'penalty_math_pow': 'math.pow and math.exp do not',
})

from transformer_tutorial.decoding import KVCache, decode_step

def _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, *, normalize=True, at_the_end=False,
                 finished='pad', joint=True, probabilities=False, all_beams_live=False, flat_ids=False, final_raw=False, start_counted=False):
    "The pieces every beam search below shares, with the choice each one changes."
    K, V = beam_size, model.config.tgt_vocab_size
    src_mask = padding_mask(src, pad_id).repeat_interleave(K, 0)           # (K, 1, 1, Ls)
    cache = KVCache(model, model.encode(src.repeat_interleave(K, 0), src_mask), max_len)
    ys = torch.full((K, 1), start_id, dtype=torch.long)
    flat = ys.clone()                                                       # each step's index into the K * V candidates
    score = torch.zeros(K, dtype=cache.keys.dtype)
    if not all_beams_live: score[1:] = -math.inf
    if probabilities: score = score.exp()
    length, done = torch.full((K,), float(start_counted)), torch.zeros(K, dtype=torch.bool)
    for t in range(max_len):
        step = decode_step(model, ys[:, -1], cache, src_mask).log_softmax(-1)
        if finished == 'pad':
            step = step.masked_fill(done[:, None], -math.inf)
            step[done, pad_id] = 0.0
        elif finished == 'drop': step = step.masked_fill(done[:, None], -math.inf)
        cand = score[:, None] * step.exp() if probabilities else score[:, None] + step
        cand_len = (length + (1.0 if finished == 'extend' else (~done).float()))[:, None].expand(K, V)
        rank = cand / penalty_formula(cand_len, alpha) if normalize and not at_the_end else cand
        if joint or t == 0: best = rank.flatten().topk(K).indices
        else: best = torch.arange(K) * V + rank.argmax(-1)
        rows, token = best // V, best % V
        score, length = cand.flatten()[best], cand_len.flatten()[best]
        ys, flat = torch.cat([ys[rows], token[:, None]], 1), torch.cat([flat[rows], best[:, None]], 1)
        cache.reorder(rows)
        done = (torch.zeros_like(done) if finished == 'extend' else done[rows]) | (token == end_id)
        if done.all(): break
    final = score / penalty_formula(length, alpha) if normalize and not final_raw else score
    top = int(final.argmax())
    return (flat if flat_ids else ys)[top:top + 1, 1:int(length[top]) - int(start_counted) + 1]

@_reg(BEAM, correct=True)
@torch.no_grad()
def beam_masked_fill(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "CORRECT: finished rows masked to -inf but pad, one flat topk."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id)

@_reg(BEAM, correct=True)
@torch.no_grad()
def beam_python_candidates(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "CORRECT: hypotheses as Python lists, the prefix recomputed for the live ones, candidates ranked with sorted()."
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    hyps = [([], 0.0, False)]                                               # (tokens, log-probability, finished)
    for t in range(max_len):
        live = [h for h in hyps if not h[2]]
        tgt = torch.tensor([[start_id] + h[0] for h in live])              # every live hypothesis has t tokens
        logp = model.decode(tgt, memory.expand(len(live), -1, -1), causal_mask(t + 1), src_mask.expand(len(live), -1, -1, -1))[:, -1].log_softmax(-1)
        cands = [h for h in hyps if h[2]]                                   # finished ones compete as they are
        for (tokens, s, _), row in zip(live, logp):
            cands += [(tokens + [v], s + row[v].item(), v == end_id) for v in range(row.numel())]
        hyps = sorted(cands, key=lambda h: -h[1] / penalty_formula(len(h[0]), alpha))[:beam_size]
        if all(h[2] for h in hyps): break
    best = max(hyps, key=lambda h: h[1] / penalty_formula(len(h[0]), alpha))
    return torch.tensor([best[0]])

@_reg(BEAM, correct=True)
@torch.no_grad()
def beam_course_kvcache(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "CORRECT: the course's beam_search on a batch of one."
    from transformer_tutorial.decoding import beam_search
    return beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id)

@_reg(BEAM)
@torch.no_grad()
def beam_unnormalized(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: alpha never used: hypotheses ranked by their summed log-probability."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, normalize=False)

@_reg(BEAM)
@torch.no_grad()
def beam_normalized_at_the_end(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: raw log-probabilities while searching, the penalty only for the final choice."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, at_the_end=True)

@_reg(BEAM)
@torch.no_grad()
def beam_extends_finished(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: a beam that produced end_id goes on like any other."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, finished='extend')

@_reg(BEAM)
@torch.no_grad()
def beam_drops_finished(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: finished beams get -inf for every token, so they fall out of the beam."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, finished='drop')

@_reg(BEAM)
@torch.no_grad()
def beam_topk_per_beam(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: after the first step each beam takes its own best token."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, joint=False)

@_reg(BEAM)
@torch.no_grad()
def beam_probabilities_multiplied(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: probabilities multiplied (and divided by the penalty) instead of log-probabilities added."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, probabilities=True)

@_reg(BEAM)
@torch.no_grad()
def beam_all_start_live(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: every beam starts at score 0: the first step picks the same token K times, and the beam holds copies."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, all_beams_live=True)

@_reg(BEAM)
@torch.no_grad()
def beam_returns_flat_indices(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: returns each step's index into the flattened beam_size * V candidates (beam * V + token), not the token (best % V)."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, flat_ids=True)

@_reg(BEAM)
@torch.no_grad()
def beam_final_by_raw_score(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: ranks by score / length_penalty while searching, but returns the hypothesis of highest raw score."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, final_raw=True)

@_reg(BEAM)
@torch.no_grad()
def beam_length_counts_start(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    "MISTAKE: the start token is counted in the length the penalty divides by."
    return _beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id, start_counted=True)

NAMED.update({
    'beam_final_by_raw_score': 'the one of highest raw log-probability',
    'beam_length_counts_start': 'the start token is counted in the length',
    'beam_returns_flat_indices': 'returned ids outside 0..12',
    'beam_unnormalized': 'without the length penalty',
    'beam_normalized_at_the_end': 'divides only at the final choice',
    'beam_extends_finished': 'a finished beam is not extended',
    'beam_drops_finished': 'finished hypotheses are dropped',
    'beam_topk_per_beam': 'each beam is extended by its own best token',
    'beam_probabilities_multiplied': 'product of probabilities',
    'beam_all_start_live': 'the beam holds copies',
})
