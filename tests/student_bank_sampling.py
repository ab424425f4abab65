"""A bank of student implementations for the checks of exercise 13 (a GPT's forward, top-k, top-p and sampling):
plausible mistakes, each named with the mistake it makes, and correct versions written differently, which the checks
must accept. BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
import math
import torch
from transformer_tutorial.masks import causal_mask

BANK, NAMED = [], {}
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

FORWARD, TOP_K, TOP_P, SAMPLE = 'check_gpt_forward', 'check_top_k_filter', 'check_top_p_filter', 'check_sample_next'

# ---------------------------------------------------------------- the GPT's forward
def _blocks(model, x, mask):
    for layer in model.layers: x = layer(x, mask)
    return x

@_reg(FORWARD, correct=True)
def forward_with_course_modules(model, idx):
    "CORRECT: the position module and the course's causal_mask, (1, 1, L, L)."
    x = model.positions(model.embed(idx))
    return model.head(model.norm(_blocks(model, x, causal_mask(idx.size(1), idx.device))))

@_reg(FORWARD, correct=True)
def forward_positions_compared(model, idx):
    "CORRECT: the mask from comparing positions, the tied head as a matrix product."
    pos = torch.arange(idx.size(1), device=idx.device)
    x = model.embed(idx) + model.positions.table(pos)
    return model.norm(_blocks(model, x, pos[None, :] <= pos[:, None])) @ model.embed.weight.T

@_reg(FORWARD, correct=True)
def forward_triu_negated(model, idx):
    "CORRECT: the mask as the negated strict upper triangle, positions added by broadcasting a (1, L, d) slice."
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[None, :L]
    mask = ~torch.ones(L, L, dtype=torch.bool).triu(1)
    return model.head(model.norm(_blocks(model, x, mask)))

@_reg(FORWARD)
def forward_calls_the_model(model, idx):
    "MISTAKE: calls the model's own forward."
    return model(idx)

@_reg(FORWARD)
def forward_no_mask(model, idx):
    "MISTAKE: no mask: every position sees the future."
    x = model.embed(idx) + model.positions.table.weight[:idx.size(1)]
    return model.head(model.norm(_blocks(model, x, None)))

@_reg(FORWARD)
def forward_upper_mask(model, idx):
    "MISTAKE: triu instead of tril."
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[:L]
    return model.head(model.norm(_blocks(model, x, torch.ones(L, L, dtype=torch.bool).triu())))

@_reg(FORWARD)
def forward_sees_next(model, idx):
    "MISTAKE: tril(1): each position also sees the next token."
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[:L]
    return model.head(model.norm(_blocks(model, x, torch.ones(L, L, dtype=torch.bool).tril(1))))

@_reg(FORWARD)
def forward_no_positions(model, idx):
    "MISTAKE: the position table is never added."
    return model.head(model.norm(_blocks(model, model.embed(idx), causal_mask(idx.size(1)))))

@_reg(FORWARD)
def forward_positions_from_one(model, idx):
    "MISTAKE: positions 1..L."
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[1:L + 1]
    return model.head(model.norm(_blocks(model, x, causal_mask(L))))

@_reg(FORWARD)
def forward_no_final_norm(model, idx):
    "MISTAKE: the head reads the last block's output directly."
    x = model.positions(model.embed(idx))
    return model.head(_blocks(model, x, causal_mask(idx.size(1))))

@_reg(FORWARD)
def forward_scaled_embeddings(model, idx):
    "MISTAKE: the 2017 paper's sqrt(d_model) scale on the token embeddings."
    x = model.positions(model.embed(idx) * math.sqrt(model.embed.embedding_dim))
    return model.head(model.norm(_blocks(model, x, causal_mask(idx.size(1)))))

@_reg(FORWARD)
def forward_last_position(model, idx):
    "MISTAKE: only the last position's logits, as for generation."
    x = model.positions(model.embed(idx))
    return model.head(model.norm(_blocks(model, x, causal_mask(idx.size(1)))))[:, -1]

@_reg(FORWARD)
def forward_probabilities(model, idx):
    "MISTAKE: a softmax at the end."
    x = model.positions(model.embed(idx))
    return model.head(model.norm(_blocks(model, x, causal_mask(idx.size(1))))).softmax(-1)

@_reg(FORWARD)
def forward_norm_after_every_block(model, idx):
    "MISTAKE: the final norm applied after every block as well."
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[:L]
    for layer in model.layers: x = model.norm(layer(x, causal_mask(L)))
    return model.head(model.norm(x))

NAMED.update({
    'forward_norm_after_every_block': 'model.norm is applied after every block',
    'forward_calls_the_model': 'calls the whole model',
    'forward_no_mask': 'no causal mask',
    'forward_upper_mask': 'the mask is the upper triangle',
    'forward_sees_next': 'see the next one (tril(1))',
    'forward_no_positions': 'no positions are added',
    'forward_positions_from_one': 'positions counted from 1',
    'forward_no_final_norm': 'the final norm is missing',
    'forward_scaled_embeddings': 'scaled by sqrt(d_model)',
    'forward_last_position': 'not only the last',
    'forward_probabilities': 'returned probabilities (a softmax)',
})

# ---------------------------------------------------------------- top-k
@_reg(TOP_K, correct=True)
def top_k_scatter(logits, k):
    "CORRECT: topk's indices scattered into a row of -inf."
    values, indices = logits.topk(k, dim=-1)
    return torch.full_like(logits, -math.inf).scatter(-1, indices, values)

@_reg(TOP_K, correct=True)
def top_k_kthvalue(logits, k):
    "CORRECT: the k-th largest as the (V - k + 1)-th smallest, a threshold with where."
    kth = logits.kthvalue(logits.size(-1) - k + 1, dim=-1, keepdim=True).values
    return torch.where(logits >= kth, logits, torch.tensor(-math.inf))

@_reg(TOP_K, correct=True)
def top_k_sorted_threshold(logits, k):
    "CORRECT: sort, take the k-th, fill with float('-inf')."
    kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
    return logits.masked_fill(logits < kth, float('-inf'))

@_reg(TOP_K)
def top_k_smallest(logits, k):
    "MISTAKE: topk(largest=False)."
    values, indices = logits.topk(k, dim=-1, largest=False)
    return torch.full_like(logits, -math.inf).scatter(-1, indices, values)

@_reg(TOP_K)
def top_k_filled_with_zero(logits, k):
    "MISTAKE: dropped logits set to 0, which is not improbable at all."
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)

@_reg(TOP_K)
def top_k_strict_threshold(logits, k):
    "MISTAKE: keeps only logits strictly above the k-th largest."
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits <= kth, -math.inf)

@_reg(TOP_K)
def top_k_one_more(logits, k):
    "MISTAKE: the threshold is the (k + 1)-th largest."
    kth = logits.sort(dim=-1, descending=True).values[..., k:k + 1] if k < logits.size(-1) else logits.min(-1, keepdim=True).values
    return logits.masked_fill(logits < kth, -math.inf)

@_reg(TOP_K)
def top_k_whole_tensor(logits, k):
    "MISTAKE: the k largest of the whole tensor."
    kth = logits.flatten().topk(k).values[-1]
    return logits.masked_fill(logits < kth, -math.inf)

@_reg(TOP_K)
def top_k_in_place(logits, k):
    "MISTAKE: fills the caller's logits in place."
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill_(logits < kth, -math.inf)

@_reg(TOP_K)
def top_k_other_device(logits, k):
    "MISTAKE: the result moved to another device (a hard-coded .to('cuda'); 'meta' stands for it on a machine without a GPU)."
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf).to('meta')

@_reg(TOP_K)
def top_k_large_negative(logits, k):
    "MISTAKE: dropped logits set to -1e9 instead of -inf."
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e9)

@_reg(TOP_K)
def top_k_in_float32(logits, k):
    "MISTAKE: computes in float32, so float64 logits come back float32."
    logits = logits.float()
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf)

NAMED.update({
    'top_k_large_negative': 'not -inf: set dropped logits to exactly -inf',
    'top_k_in_float32': "keep the logits' dtype",
    'top_k_other_device': "returned a tensor on meta (called with (4, 10), 3): keep the inputs' device (cpu)",
    'top_k_smallest': 'kept the k smallest logits',
    'top_k_filled_with_zero': 'set dropped logits to -inf',
    'top_k_strict_threshold': 'a strict > against the k-th largest',
    'top_k_one_more': 'kept k + 1',
    'top_k_whole_tensor': 'keep k in each row',
    'top_k_in_place': 'changed its input tensor',
})

# ---------------------------------------------------------------- top-p
@_reg(TOP_P, correct=True)
def top_p_shifted_cumsum(logits, p):
    "CORRECT: the cumulative sum shifted right by one with a column of zeros."
    probs, order = logits.softmax(-1).sort(dim=-1, descending=True)
    cum = probs.cumsum(-1)
    above = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)
    keep = torch.zeros_like(above, dtype=torch.bool).scatter(-1, order, above < p)
    return torch.where(keep, logits, torch.tensor(-math.inf))

@_reg(TOP_P, correct=True)
def top_p_rows_in_python(logits, p):
    "CORRECT: one row at a time, adding probabilities until the sum reaches p."
    flat, out = logits.reshape(-1, logits.size(-1)), []
    for row in flat:
        probs = row.softmax(-1).tolist()
        kept, total = [], 0.0
        for i in sorted(range(len(probs)), key=lambda i: -probs[i]):
            kept.append(i); total += probs[i]
            if total >= p: break
        new = torch.full_like(row, -math.inf); new[kept] = row[kept]
        out.append(new)
    return torch.stack(out).reshape(logits.shape)

@_reg(TOP_P, correct=True)
def top_p_scatter_ranked(logits, p):
    "CORRECT: mask the sorted logits, scatter them back (chapter 17a's way)."
    ranked, order = logits.sort(-1, descending=True)
    probs = ranked.softmax(-1)
    return logits.scatter(-1, order, ranked.masked_fill(probs.cumsum(-1) - probs >= p, -math.inf))

@_reg(TOP_P)
def top_p_drops_the_reaching_token(logits, p):
    "MISTAKE: keeps tokens while the cumulative sum, their own included, is below p."
    probs, order = logits.softmax(-1).sort(dim=-1, descending=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, probs.cumsum(-1) < p)
    return logits.masked_fill(~keep, -math.inf)

@_reg(TOP_P)
def top_p_ascending(logits, p):
    "MISTAKE: sorted least likely first."
    probs, order = logits.softmax(-1).sort(dim=-1)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, probs.cumsum(-1) - probs < p)
    return logits.masked_fill(~keep, -math.inf)

@_reg(TOP_P)
def top_p_on_logits(logits, p):
    "MISTAKE: the cumulative sum of the sorted logits, not of the probabilities."
    ranked, order = logits.sort(-1, descending=True)
    keep = torch.zeros_like(ranked, dtype=torch.bool).scatter(-1, order, ranked.cumsum(-1) - ranked < p)
    return logits.masked_fill(~keep, -math.inf)

@_reg(TOP_P)
def top_p_sorted_order(logits, p):
    "MISTAKE: masks the sorted logits and returns them sorted."
    ranked, _ = logits.sort(-1, descending=True)
    probs = ranked.softmax(-1)
    return ranked.masked_fill(probs.cumsum(-1) - probs >= p, -math.inf)

@_reg(TOP_P)
def top_p_filled_with_minus_100(logits, p):
    "MISTAKE: dropped logits set to -100, which a softmax does not make 0 next to logits near 0."
    ranked, order = logits.sort(-1, descending=True)
    probs = ranked.softmax(-1)
    return logits.scatter(-1, order, ranked.masked_fill(probs.cumsum(-1) - probs >= p, -100.0))

@_reg(TOP_P)
def top_p_strict_at_the_boundary(logits, p):
    "MISTAKE: drops a token only when the mass above it exceeds p (> p), so a token whose more likely tokens sum to exactly p is kept."
    ranked, order = logits.sort(-1, descending=True)
    probs = ranked.softmax(-1)
    return logits.scatter(-1, order, ranked.masked_fill(probs.cumsum(-1) - probs > p, -math.inf))

@_reg(TOP_P)
def top_p_in_float32(logits, p):
    "MISTAKE: computes in float32, so float64 logits come back float32."
    logits = logits.float()
    ranked, order = logits.sort(-1, descending=True)
    probs = ranked.softmax(-1)
    return logits.scatter(-1, order, ranked.masked_fill(probs.cumsum(-1) - probs >= p, -math.inf))

@_reg(TOP_P)
def top_p_unsorted(logits, p):
    "MISTAKE: the cumulative sum in the vocabulary's order, without sorting."
    probs = logits.softmax(-1)
    return logits.masked_fill(probs.cumsum(-1) - probs >= p, -math.inf)

NAMED.update({
    'top_p_strict_at_the_boundary': 'sum to exactly p',
    'top_p_in_float32': "keep the logits' dtype",
    'top_p_unsorted': "summed in the vocabulary's order",
    'top_p_drops_the_reaching_token': 'the token that reaches p is dropped',
    'top_p_ascending': 'ranked least likely first',
    'top_p_on_logits': 'summed the logits, not the probabilities',
    'top_p_sorted_order': "put the logits back in the vocabulary's order",
    'top_p_filled_with_minus_100': 'set dropped logits to -inf',
})

# ---------------------------------------------------------------- sampling
def _filtered(logits, top_k, top_p):
    from transformer_tutorial.sampling import top_k_filter, top_p_filter
    if top_k is not None: logits = top_k_filter(logits, top_k)
    if top_p is not None: logits = top_p_filter(logits, top_p)
    return logits

@_reg(SAMPLE, correct=True)
def sample_multinomial(logits, temperature, top_k, top_p, generator):
    "CORRECT: torch.multinomial on the filtered softmax."
    if temperature == 0: return logits.argmax(-1)
    probs = _filtered(logits / temperature, top_k, top_p).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)

@_reg(SAMPLE, correct=True)
def sample_inverse_cdf(logits, temperature, top_k, top_p, generator):
    "CORRECT: a uniform draw per row located in the cumulative distribution."
    if temperature == 0: return logits.argmax(-1)
    cdf = _filtered(logits / temperature, top_k, top_p).softmax(-1).cumsum(-1)
    u = torch.rand(logits.size(0), 1, generator=generator) * cdf[:, -1:]
    return torch.searchsorted(cdf, u).squeeze(1).clamp(max=logits.size(-1) - 1)

@_reg(SAMPLE, correct=True)
def sample_gumbel_max(logits, temperature, top_k, top_p, generator):
    "CORRECT: the Gumbel-max trick: argmax of the log-probabilities plus Gumbel noise."
    if temperature == 0: return torch.argmax(logits, dim=1)
    z = _filtered(logits / temperature, top_k, top_p).log_softmax(-1)
    u = torch.rand(z.shape, generator=generator).clamp_min(1e-20)
    return (z - (-u.log()).log()).argmax(-1)

@_reg(SAMPLE)
def sample_temperature_ignored(logits, temperature, top_k, top_p, generator):
    "MISTAKE: the temperature only switches greedy decoding on."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial(_filtered(logits, top_k, top_p).softmax(-1), 1, generator=generator)[:, 0]

@_reg(SAMPLE)
def sample_temperature_multiplied(logits, temperature, top_k, top_p, generator):
    "MISTAKE: logits times the temperature."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial(_filtered(logits * temperature, top_k, top_p).softmax(-1), 1, generator=generator)[:, 0]

@_reg(SAMPLE)
def sample_filters_before_temperature(logits, temperature, top_k, top_p, generator):
    "MISTAKE: filters the raw logits, then divides by the temperature."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial((_filtered(logits, top_k, top_p) / temperature).softmax(-1), 1, generator=generator)[:, 0]

@_reg(SAMPLE)
def sample_top_p_first(logits, temperature, top_k, top_p, generator):
    "MISTAKE: top-p on the full distribution, then top-k."
    from transformer_tutorial.sampling import top_k_filter, top_p_filter
    if temperature == 0: return logits.argmax(-1)
    z = logits / temperature
    if top_p is not None: z = top_p_filter(z, top_p)
    if top_k is not None: z = top_k_filter(z, top_k)
    return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]

@_reg(SAMPLE)
def sample_argmax_always(logits, temperature, top_k, top_p, generator):
    "MISTAKE: the most likely token whatever the temperature."
    return _filtered(logits, top_k, top_p).argmax(-1)

@_reg(SAMPLE)
def sample_global_rng(logits, temperature, top_k, top_p, generator):
    "MISTAKE: ignores the generator."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial(_filtered(logits / temperature, top_k, top_p).softmax(-1), 1)[:, 0]

@_reg(SAMPLE)
def sample_column(logits, temperature, top_k, top_p, generator):
    "MISTAKE: returns multinomial's (B, 1)."
    if temperature == 0: return logits.argmax(-1, keepdim=True)
    return torch.multinomial(_filtered(logits / temperature, top_k, top_p).softmax(-1), 1, generator=generator)

@_reg(SAMPLE)
def sample_top_k_ignored(logits, temperature, top_k, top_p, generator):
    "MISTAKE: only top-p is applied."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial(_filtered(logits / temperature, None, top_p).softmax(-1), 1, generator=generator)[:, 0]

NAMED.update({
    'sample_temperature_ignored': 'the temperature is ignored',
    'sample_temperature_multiplied': 'multiplied by the temperature',
    'sample_filters_before_temperature': 'applied before the temperature',
    'sample_top_p_first': 'top-p is applied before top-k',
    'sample_argmax_always': 'always the most likely token',
    'sample_global_rng': 'draw from the generator argument',
    'sample_column': 'argmax(-1, keepdim=True) keeps a column',
    'sample_top_k_ignored': 'top_k is ignored',
})

@_reg(SAMPLE)
def sample_top_p_zero_is_off(logits, temperature, top_k, top_p, generator):
    "MISTAKE: `if top_p:` reads top_p=0.0, which keeps the most likely token alone, as no top-p at all."
    if temperature == 0: return logits.argmax(-1)
    z = logits / temperature
    if top_k: z = _filtered(z, top_k, None)
    if top_p: z = _filtered(z, None, top_p)
    return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]

@_reg(SAMPLE)
def sample_squeezed(logits, temperature, top_k, top_p, generator):
    "MISTAKE: squeeze() on multinomial's (B, 1), which for a batch of one gives a 0-dim tensor."
    if temperature == 0: return logits.argmax(-1)
    return torch.multinomial(_filtered(logits / temperature, top_k, top_p).softmax(-1), 1, generator=generator).squeeze()

NAMED.update({
    'sample_top_p_zero_is_off': 'top_p=0.0 is read as off',
    'sample_squeezed': 'squeeze() drops the batch axis of a batch of one',
})
