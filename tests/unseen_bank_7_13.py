"""An unseen bank of student mistakes (and unusual correct solutions) for exercises 7 to 13, written blind.

Written from the exercise statements and their reference solutions only, without reading the checks, chapter 14,
or the other banks (issue 45). Each entry: exercise, function, kind ('wrong' or 'correct'), name, mistake (one
sentence, as a teacher would say it), source (the student's code, defining the function with the exercise's
signature), and witness (an input on which the author saw the wrong entry differ from the reference solution, or
'contract' where the statement forbids what the code does though its values agree).

Sources of variants are built from a base text with `_v(base, (old, new), ...)`, which insists that each `old`
occurs exactly once, so that a variant cannot silently stop differing from its base.
"""

def _v(base, *repls):
    "`base` with each (old, new) replaced; each `old` must occur exactly once."
    for old, new in repls:
        n = base.count(old)
        if n != 1: raise ValueError(f"{old!r} occurs {n} times")
        base = base.replace(old, new)
    return base

BANK = []

def _add(exercise, function, kind, name, mistake, source, witness=''):
    BANK.append(dict(exercise=exercise, function=function, kind=kind, name=name, mistake=mistake, source=source, witness=witness))

# ---------------------------------------------------------------------------------------------------------------
# Exercise 7: label_smoothed_loss, warmup_schedule
# ---------------------------------------------------------------------------------------------------------------
_LS = '''import torch
def label_smoothed_loss(logits, target, pad_id, smoothing):
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -logp.mean(-1)
    per_position = (1 - smoothing) * nll + smoothing * uniform
    return per_position[target != pad_id].mean()
'''
_e = lambda *a, **k: _add('ex07', 'label_smoothed_loss', *a, **k)
_e('wrong', 'log_of_softmax', "Takes log(softmax(z)), which gives -inf (and an infinite loss) wherever a logit is far below the row's maximum; use log_softmax.",
   _v(_LS, ('logits.log_softmax(-1)', 'torch.log(logits.softmax(-1))')), 'logits with a spread of 500 in a row')
_e('wrong', 'eps_over_v_minus_1', "Spreads epsilon over the V - 1 other classes only, leaving the target out, where the exercise (and PyTorch) spread it over all V classes.",
   '''import torch
def label_smoothed_loss(logits, target, pad_id, smoothing):
    V = logits.size(-1)
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    others = -logp.sum(-1) - nll                     # -sum of log p over the classes other than the target
    per_position = (1 - smoothing) * nll + smoothing / (V - 1) * others
    return per_position[target != pad_id].mean()
''', 'any smoothing > 0')
_e('wrong', 'pad_counted', "Averages over every position, the padded ones included, instead of over the non-pad targets only.",
   _v(_LS, ('per_position[target != pad_id].mean()', 'per_position.mean()')), 'a target with pads')
_e('wrong', 'pad_zeroed_but_counted', "Zeroes the loss at padded positions but still divides by the number of all positions.",
   _v(_LS, ('per_position[target != pad_id].mean()', '(per_position * (target != pad_id)).sum() / target.numel()')), 'a target with pads')
_e('wrong', 'mean_per_sequence', "Averages the loss within each sequence and then over sequences, so a short sequence's tokens weigh more than a long one's.",
   _v(_LS, ('    return per_position[target != pad_id].mean()',
            '    real = (target != pad_id).to(per_position.dtype)\n    return ((per_position * real).sum(1) / real.sum(1)).mean()')), 'two rows with different numbers of pads')
_e('wrong', 'uniform_sum_not_mean', "Weighs the uniform part by epsilon times the sum of all V log-probabilities instead of their mean (epsilon / V each).",
   _v(_LS, ('-logp.mean(-1)', '-logp.sum(-1)')), 'any smoothing > 0')
_e('wrong', 'pad_hardcoded_zero', "Drops the positions whose target is 0 instead of those equal to pad_id.",
   _v(_LS, ('target != pad_id', 'target != 0')), 'pad_id=3')
_e('wrong', 'pad_column_excluded', "Leaves the pad column out of the uniform part (fairseq's way), where the exercise spreads epsilon over all V classes, the pad column included.",
   '''import torch
def label_smoothed_loss(logits, target, pad_id, smoothing):
    V = logits.size(-1)
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -(logp.sum(-1) - logp[..., pad_id]) / (V - 1)
    per_position = (1 - smoothing) * nll + smoothing * uniform
    return per_position[target != pad_id].mean()
''', 'any smoothing > 0')
_e('wrong', 'float32_inside', "Computes in float32 and casts the result back, so a float64 loss carries only float32's precision.",
   _v(_LS, ('logp = logits.log_softmax(-1)', 'logp = logits.float().log_softmax(-1)'),
           ('per_position[target != pad_id].mean()', 'per_position[target != pad_id].mean().to(logits.dtype)')), 'float64 logits, compared to 1e-12')
_e('wrong', 'returns_item', "Returns loss.item(), a Python float that backward() cannot go through, instead of a 0-dim tensor.",
   _v(_LS, ('per_position[target != pad_id].mean()', 'per_position[target != pad_id].mean().item()')), 'any input')
_e('correct', 'explicit_target_distribution', "Builds the smoothed target distribution q explicitly (eps/V everywhere plus 1 - eps on the target) and takes -(q * log p) summed over V.",
   '''import torch
import torch.nn.functional as F
def label_smoothed_loss(logits, target, pad_id, smoothing):
    V = logits.size(-1)
    q = torch.full_like(logits, smoothing / V) + (1 - smoothing) * F.one_hot(target, V).to(logits.dtype)
    per_position = -(q * F.log_softmax(logits, dim=-1)).sum(-1)
    keep = target != pad_id
    return per_position[keep].sum() / keep.sum()
''')
_e('correct', 'logsumexp_flattened', "Flattens to (N, V), keeps the real rows first, and writes log p as z - logsumexp(z).",
   '''import torch
def label_smoothed_loss(logits, target, pad_id, smoothing):
    z = logits.reshape(-1, logits.size(-1))
    y = target.reshape(-1)
    z, y = z[y != pad_id], y[y != pad_id]
    logp = z - torch.logsumexp(z, dim=-1, keepdim=True)
    nll = -logp[torch.arange(len(y)), y]
    return ((1 - smoothing) * nll - smoothing * logp.mean(-1)).mean()
''')
_e('correct', 'weighted_sum', "Weighs every position by a 0/1 mask and divides by the mask's sum.",
   '''import torch
def label_smoothed_loss(logits, target, pad_id, smoothing):
    logp = torch.log_softmax(logits, dim=-1)
    w = (target != pad_id).to(logits.dtype)
    nll = -torch.gather(logp, -1, target[..., None])[..., 0]
    per = nll - smoothing * (nll + logp.mean(-1))
    return (per * w).sum() / w.sum()
''')

_WS = '''import math
def warmup_schedule(step, warmup):
    s = step + 1
    return min(s / warmup, math.sqrt(warmup / s))
'''
_e = lambda *a, **k: _add('ex07', 'warmup_schedule', *a, **k)
_e('wrong', 'step_not_plus_one', "Uses the 0-based step as s, so the first update runs at a rate of 0 and the peak comes one step late.",
   '''import math
def warmup_schedule(step, warmup):
    return min(step / warmup, math.sqrt(warmup / max(step, 1)))
''', 'step=0')
_e('wrong', 'peak_at_step_warmup', "Clamps the step to at least 1 instead of adding 1, so the factor at step 1 is 1/warmup again and reaches 1 one step late.",
   '''import math
def warmup_schedule(step, warmup):
    s = max(step, 1)
    return min(s / warmup, math.sqrt(warmup / s))
''', 'step=1, warmup=4')
_e('wrong', 'inverse_not_sqrt', "Decays as warmup / s instead of the square root of it.",
   _v(_WS, ('math.sqrt(warmup / s)', 'warmup / s')), 'step=2*warmup')
_e('wrong', 'integer_division', "Divides with //, so the factor is 0 for the whole warmup.",
   _v(_WS, ('s / warmup', 's // warmup')), 'step=0, warmup=4')
_e('wrong', 'noam_unnormalized', "Uses the paper's formula without d_model and without rescaling, so the peak is 1/sqrt(warmup) instead of 1.",
   '''def warmup_schedule(step, warmup):
    s = step + 1
    return min(s ** -0.5, s * warmup ** -1.5)
''', 'step=warmup-1')
_e('wrong', 'max_not_min', "Takes the larger of the two branches instead of the smaller, so the factor never falls below 1.",
   _v(_WS, ('min(', 'max(')), 'step=0')
_e('wrong', 'decay_uses_step', "Adds 1 in the warmup branch but not in the decay branch, so after the peak every factor is one step behind.",
   '''import math
def warmup_schedule(step, warmup):
    return min((step + 1) / warmup, math.sqrt(warmup / max(step, 1)))
''', 'step=warmup')
_e('correct', 'if_else', "Writes the two branches with an if, switching at s = warmup where both equal 1.",
   '''import math
def warmup_schedule(step, warmup):
    s = step + 1
    if s <= warmup:
        return s / warmup
    return (warmup / s) ** 0.5
''')
_e('correct', 'noam_rescaled', "Uses the paper's form min(s^-0.5, s * warmup^-1.5), multiplied by sqrt(warmup) so that the peak is 1.",
   '''def warmup_schedule(step, warmup):
    s = step + 1
    return warmup ** 0.5 * min(s ** -0.5, s * warmup ** -1.5)
''')

# ---------------------------------------------------------------------------------------------------------------
# Exercise 8: online_softmax, tiled_attention, tiled_attention_backward
# ---------------------------------------------------------------------------------------------------------------
_OS = '''import math
import torch
def online_softmax(x, block):
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    l = torch.zeros_like(m)
    for j in range(0, x.size(-1), block):
        xb = x[..., j:j + block]
        m_new = torch.maximum(m, xb.amax(-1))
        safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        l = l * torch.exp(m - safe) + torch.exp(xb - safe[..., None]).sum(-1)
        m = m_new
    return torch.exp(x - m[..., None]) / l[..., None]
'''
_e = lambda *a, **k: _add('ex08', 'online_softmax', *a, **k)
_e('wrong', 'no_inf_guard', "Subtracts m' even while it is -inf, so a first block of only masked entries turns the row into NaN.",
   _v(_OS, ("safe = m_new.masked_fill(m_new == -math.inf, 0.0)", "safe = m_new")), 'x=[-inf, -inf, 1, 2], block=2')
_e('wrong', 'no_rescale', "Adds each block's sum without rescaling the running sum by e^(m - m'), so the sum is wrong whenever the maximum grows.",
   _v(_OS, ("l = l * torch.exp(m - safe) + ", "l = l + ")), 'x=[0, 1, 2, 3], block=2')
_e('wrong', 'drops_short_last_block', "Loops only over full blocks, so the last, shorter block never enters the maximum or the sum.",
   _v(_OS, ("range(0, x.size(-1), block)", "range(0, x.size(-1) - block + 1, block)")), 'L=5, block=2')
_e('wrong', 'whole_row_max', "Takes the maximum of the whole row with x.max(-1) before the loop, which the exercise forbids (one pass over blocks).",
   '''import math
import torch
def online_softmax(x, block):
    m = x.max(-1).values
    safe = m.masked_fill(m == -math.inf, 0.0)
    l = torch.zeros_like(m)
    for j in range(0, x.size(-1), block):
        l = l + torch.exp(x[..., j:j + block] - safe[..., None]).sum(-1)
    return torch.exp(x - m[..., None]) / l[..., None]
''', 'contract')
_e('wrong', 'softmax_at_the_end', "Runs the loop but returns x.softmax(-1), which the exercise forbids.",
   _v(_OS, ("return torch.exp(x - m[..., None]) / l[..., None]", "return x.softmax(-1)")), 'contract')
_e('wrong', 'float32_inside', "Computes in float32 and casts back, so float64 inputs get only float32 precision.",
   _v(_OS, ("    m = torch.full(", "    dtype, x = x.dtype, x.float()\n    m = torch.full("),
           ("return torch.exp(x - m[..., None]) / l[..., None]", "return (torch.exp(x - m[..., None]) / l[..., None]).to(dtype)")), 'float64 x compared to 1e-12')
_e('wrong', 'normalizes_per_block', "Writes each block's output with the maximum and sum known so far, which later blocks change.",
   '''import math
import torch
def online_softmax(x, block):
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    l = torch.zeros_like(m)
    out = torch.empty_like(x)
    for j in range(0, x.size(-1), block):
        xb = x[..., j:j + block]
        m_new = torch.maximum(m, xb.amax(-1))
        safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        l = l * torch.exp(m - safe) + torch.exp(xb - safe[..., None]).sum(-1)
        m = m_new
        out[..., j:j + block] = torch.exp(xb - m[..., None]) / l[..., None]
    return out
''', 'x=[0, 1, 2, 3], block=2')
_e('wrong', 'guard_keeps_zero_max', "Stores the guarded maximum (0 instead of -inf) as the running maximum, so a row of large negative entries after a masked block underflows to 0/0.",
   _v(_OS, ("        m = m_new\n", "        m = safe\n")), 'x=[-inf, -inf, -300, -301] in float32, block=2')
_e('wrong', 'second_axis_not_last', "Reads the length from x.shape[1] instead of the last axis, so a 3-D input is only partly read.",
   _v(_OS, ("range(0, x.size(-1), block)", "range(0, x.shape[1], block)")), 'x of shape (2, 3, 5), block=2')
_e('correct', 'logaddexp', "Keeps the running log-normalizer with logaddexp of each block's logsumexp (per block, not per row).",
   '''import math
import torch
def online_softmax(x, block):
    lse = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    for j in range(0, x.size(-1), block):
        lse = torch.logaddexp(lse, torch.logsumexp(x[..., j:j + block], dim=-1))
    return torch.exp(x - lse[..., None])
''')
_e('correct', 'where_guard', "Guards with torch.where and walks the blocks with torch.split.",
   '''import math
import torch
def online_softmax(x, block):
    m = x.new_full(x.shape[:-1], float('-inf'))
    l = x.new_zeros(x.shape[:-1])
    for xb in torch.split(x, block, dim=-1):
        m_new = torch.maximum(m, xb.max(dim=-1).values)
        ref = torch.where(torch.isinf(m_new) & (m_new < 0), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - ref) + torch.exp(xb - ref.unsqueeze(-1)).sum(-1)
        m = m_new
    return torch.exp(x - m.unsqueeze(-1)) / l.unsqueeze(-1)
''')

_TA = '''import math
import torch
def tiled_attention(q, k, v, causal, block):
    Lq, Lk = q.size(-2), k.size(-2)
    m = q.new_full(q.shape[:-1], -math.inf)
    l = q.new_zeros(q.shape[:-1])
    out = q.new_zeros(*q.shape[:-1], v.size(-1))
    for j in range(0, Lk, block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.size(-1))
        if causal:
            future = torch.arange(j, min(j + block, Lk))[None] > torch.arange(Lq)[:, None]
            s = s.masked_fill(future, -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        p = torch.exp(s - safe[..., None])
        rescale = torch.exp(m - safe)
        l = l * rescale + p.sum(-1)
        out = out * rescale[..., None] + p @ v[..., j:j + block, :]
        m = m_new
    return out / l[..., None]
'''
_e = lambda *a, **k: _add('ex08', 'tiled_attention', *a, **k)
_e('wrong', 'no_scale', "Forgets to divide the scores by sqrt(d_k).",
   _v(_TA, (" / math.sqrt(q.size(-1))", "")), 'any input')
_e('wrong', 'scale_by_dv', "Divides the scores by sqrt(d_v), the value width, instead of sqrt(d_k).",
   _v(_TA, ("math.sqrt(q.size(-1))", "math.sqrt(v.size(-1))")), 'd_k=4, d_v=6')
_e('wrong', 'causal_excludes_diagonal', "Masks keys at or after the query (>=) instead of after it, so a query cannot see itself and the first query sees nothing.",
   _v(_TA, ("[None] > torch.arange(Lq)", "[None] >= torch.arange(Lq)")), 'causal=True')
_e('wrong', 'causal_block_relative', "Compares the query's position with the key's position inside the block (0..block-1) instead of its position in the sequence.",
   _v(_TA, ("torch.arange(j, min(j + block, Lk))[None]", "torch.arange(min(j + block, Lk) - j)[None]")), 'causal=True, L=6, block=2')
_e('wrong', 'no_output_rescale', "Rescales the running sum but not the unnormalized output when the maximum grows.",
   _v(_TA, ("out = out * rescale[..., None] + ", "out = out + ")), 'L=6, block=2')
_e('wrong', 'divide_each_block', "Divides the output by the running sum inside the loop, then again at the end.",
   _v(_TA, ("        m = m_new\n", "        out = out / l[..., None]\n        m = m_new\n")), 'any input with two blocks')
_e('wrong', 'full_causal_mask', "Builds the whole (Lq, Lk) causal mask before the loop, a tensor the exercise forbids.",
   _v(_TA, ("    for j in range(0, Lk, block):\n", "    full = torch.ones(Lq, Lk, dtype=torch.bool).triu(1)\n    for j in range(0, Lk, block):\n"),
           ("future = torch.arange(j, min(j + block, Lk))[None] > torch.arange(Lq)[:, None]", "future = full[:, j:j + block]")), 'contract')
_e('wrong', 'full_scores_first', "Computes the whole score matrix q kᵀ once and slices it per block, the (Lq, Lk) tensor the exercise forbids.",
   _v(_TA, ("    for j in range(0, Lk, block):\n", "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n    for j in range(0, Lk, block):\n"),
           ("s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.size(-1))", "s = scores[..., j:j + block]")), 'contract')
_e('wrong', 'mask_ignores_short_block', "Builds the causal mask for a full block even when the last block is shorter, which fails when the length is not a multiple of the block.",
   _v(_TA, ("torch.arange(j, min(j + block, Lk))", "torch.arange(j, j + block)")), 'causal=True, L=5, block=2')
_e('wrong', 'max_starts_at_zero', "Starts the running maximum at 0 instead of -inf, so rows whose scores are all far below 0 underflow to 0/0.",
   _v(_TA, ("m = q.new_full(q.shape[:-1], -math.inf)", "m = q.new_zeros(q.shape[:-1])")), 'float32 scores near -300 (q = -30 * k)')
_e('wrong', 'float32_inside', "Casts q, k, v to float32 and the result back, so float64 inputs get only float32 precision.",
   _v(_TA, ("    Lq, Lk = q.size(-2), k.size(-2)\n", "    dtype = q.dtype\n    q, k, v = q.float(), k.float(), v.float()\n    Lq, Lk = q.size(-2), k.size(-2)\n"),
           ("return out / l[..., None]", "return (out / l[..., None]).to(dtype)")), 'float64 inputs compared to 1e-12')
_e('correct', 'no_guard_needed', "Has no -inf guard: for Lq = Lk every query may read key 0, which is in the first block, so m' is finite from the start.",
   '''import math
import torch
def tiled_attention(q, k, v, causal, block):
    Lq, Lk = q.size(-2), k.size(-2)
    m = q.new_full(q.shape[:-1], -math.inf)
    l = q.new_zeros(q.shape[:-1])
    out = q.new_zeros(*q.shape[:-1], v.size(-1))
    for j in range(0, Lk, block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.size(-1))
        if causal:
            s = s.masked_fill(torch.arange(j, min(j + block, Lk))[None] > torch.arange(Lq)[:, None], -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        l = alpha * l + p.sum(-1)
        out = alpha[..., None] * out + p @ v[..., j:j + block, :]
        m = m_new
    return out / l[..., None]
''')
_e('correct', 'einsum_keepdim', "Uses einsum and keeps m and l with a trailing axis of 1 (keepdim) throughout.",
   '''import math
import torch
def tiled_attention(q, k, v, causal, block):
    Lq, Lk, scale = q.shape[-2], k.shape[-2], q.shape[-1] ** -0.5
    m = torch.full_like(q[..., :1], float('-inf'))
    l = torch.zeros_like(q[..., :1])
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for j in range(0, Lk, block):
        kb, vb = k[..., j:j + block, :], v[..., j:j + block, :]
        s = torch.einsum('bhqd,bhkd->bhqk', q, kb) * scale
        if causal:
            qi = torch.arange(Lq, device=q.device)[:, None]
            kj = torch.arange(j, j + kb.shape[-2], device=q.device)[None, :]
            s = torch.where(kj <= qi, s, torch.full_like(s, float('-inf')))
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        ref = torch.where(m_new == float('-inf'), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - ref)
        a = torch.exp(m - ref)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + torch.einsum('bhqk,bhkd->bhqd', p, vb)
        m = m_new
    return acc / l
''')
_e('correct', 'split_blocks', "Walks the keys and values with torch.split, counting the start of each block itself.",
   '''import math
import torch
def tiled_attention(q, k, v, causal, block):
    d = q.size(-1)
    m = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype)
    l = torch.zeros(q.shape[:-1], dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.size(-1),), dtype=q.dtype)
    start = 0
    for kb, vb in zip(k.split(block, dim=-2), v.split(block, dim=-2)):
        s = torch.matmul(q, kb.transpose(-1, -2)) / d ** 0.5
        if causal:
            keys = torch.arange(start, start + kb.size(-2))
            s = s.masked_fill(keys[None, :] > torch.arange(q.size(-2))[:, None], -math.inf)
        m2 = torch.maximum(m, s.amax(dim=-1))
        sub = torch.nan_to_num(m2, neginf=0.0)
        p = (s - sub[..., None]).exp()
        c = (m - sub).exp()
        l = c * l + p.sum(-1)
        o = c[..., None] * o + torch.matmul(p, vb)
        m = m2
        start += kb.size(-2)
    return o / l[..., None]
''')

_TB = '''import math
import torch
def tiled_attention_backward(q, k, v, out, lse, d_out, causal, block):
    Lq, Lk, c = q.size(-2), k.size(-2), 1 / math.sqrt(q.size(-1))
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (d_out * out).sum(-1)
    for j in range(0, Lk, block):
        kj, vj = k[..., j:j + block, :], v[..., j:j + block, :]
        s = q @ kj.transpose(-2, -1) * c
        if causal:
            s = s.masked_fill(torch.arange(j, j + kj.size(-2))[None] > torch.arange(Lq)[:, None], -math.inf)
        p = torch.exp(s - lse[..., None])
        dv[..., j:j + block, :] += p.transpose(-2, -1) @ d_out
        ds = p * (d_out @ vj.transpose(-2, -1) - D[..., None])
        dq += ds @ kj * c
        dk[..., j:j + block, :] += ds.transpose(-2, -1) @ q * c
    return dq, dk, dv
'''
_e = lambda *a, **k: _add('ex08', 'tiled_attention_backward', *a, **k)
_e('wrong', 'D_summed_over_all', "Sums dO * O over everything into one number instead of one number per query (the row sum).",
   _v(_TB, ("D = (d_out * out).sum(-1)", "D = (d_out * out).sum() * torch.ones(out.shape[:-1], dtype=out.dtype)")), 'any input')
_e('wrong', 'D_over_queries', "Sums dO * O over the query axis instead of the feature axis.",
   _v(_TB, ("D = (d_out * out).sum(-1)", "D = (d_out * out).sum(-2)")), 'd_v equal to Lq (otherwise it fails to broadcast)')
_e('wrong', 'dq_unscaled', "Forgets the 1/sqrt(d_k) factor in dQ.",
   _v(_TB, ("dq += ds @ kj * c", "dq += ds @ kj")), 'any input')
_e('wrong', 'dk_unscaled', "Forgets the 1/sqrt(d_k) factor in dK.",
   _v(_TB, ("@ q * c", "@ q")), 'any input')
_e('wrong', 'no_causal_mask', "Recomputes the weights without the causal mask, so keys after a query receive gradient.",
   _v(_TB, ("        if causal:\n            s = s.masked_fill(torch.arange(j, j + kj.size(-2))[None] > torch.arange(Lq)[:, None], -math.inf)\n", "")), 'causal=True')
_e('wrong', 'block_local_softmax', "Recomputes P with a softmax over each block instead of e^(S - L) with the saved log-sum-exp.",
   _v(_TB, ("p = torch.exp(s - lse[..., None])", "p = s.softmax(-1)")), 'L=4, block=2, causal=False')
_e('wrong', 'no_D', "Takes dS = P * dP without subtracting D, the softmax's correction.",
   _v(_TB, ("ds = p * (d_out @ vj.transpose(-2, -1) - D[..., None])", "ds = p * (d_out @ vj.transpose(-2, -1))")), 'any input')
_e('wrong', 'dq_overwritten', "Assigns dQ for each block instead of adding to it, so only the last block of keys counts.",
   _v(_TB, ("dq += ds @ kj * c", "dq = ds @ kj * c")), 'L=4, block=2')
_e('wrong', 'dv_from_ds', "Accumulates dV from dS instead of P.",
   _v(_TB, ("dv[..., j:j + block, :] += p.transpose(-2, -1) @ d_out", "dv[..., j:j + block, :] += (p * (d_out @ vj.transpose(-2, -1))).transpose(-2, -1) @ d_out")), 'any input')
_e('correct', 'einsum_tril', "Uses einsum and builds the block's mask with tril(diagonal=-j) on an (Lq, b) tile.",
   '''import math
import torch
def tiled_attention_backward(q, k, v, out, lse, d_out, causal, block):
    scale = q.shape[-1] ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = torch.einsum('bhqd,bhqd->bhq', d_out, out)
    for j in range(0, k.shape[-2], block):
        kb, vb = k[..., j:j + block, :], v[..., j:j + block, :]
        s = torch.einsum('bhqd,bhkd->bhqk', q, kb) * scale
        if causal:
            keep = torch.ones(q.shape[-2], kb.shape[-2], dtype=torch.bool).tril(diagonal=-j)
            s = s.masked_fill(~keep, float('-inf'))
        p = (s - lse.unsqueeze(-1)).exp()
        dv[..., j:j + block, :] += torch.einsum('bhqk,bhqd->bhkd', p, d_out)
        dp = torch.einsum('bhqd,bhkd->bhqk', d_out, vb)
        ds = p * (dp - D.unsqueeze(-1))
        dq += torch.einsum('bhqk,bhkd->bhqd', ds, kb) * scale
        dk[..., j:j + block, :] += torch.einsum('bhqk,bhqd->bhkd', ds, q) * scale
    return dq, dk, dv
''')
_e('correct', 'lists_then_cat', "Collects dK and dV block by block in lists and concatenates them at the end.",
   '''import math
import torch
def tiled_attention_backward(q, k, v, out, lse, d_out, causal, block):
    c = 1.0 / math.sqrt(q.size(-1))
    D = (d_out * out).sum(-1, keepdim=True)
    dq = torch.zeros_like(q)
    dks, dvs = [], []
    qpos = torch.arange(q.size(-2))[:, None]
    for j in range(0, k.size(-2), block):
        kj, vj = k[..., j:j + block, :], v[..., j:j + block, :]
        s = (q @ kj.mT) * c
        if causal:
            s = s.masked_fill(torch.arange(j, j + kj.size(-2))[None, :] > qpos, -math.inf)
        p = torch.exp(s - lse[..., None])
        dvs.append(p.mT @ d_out)
        ds = p * (d_out @ vj.mT - D)
        dq = dq + (ds @ kj) * c
        dks.append((ds.mT @ q) * c)
    return dq, torch.cat(dks, -2), torch.cat(dvs, -2)
''')

# ---------------------------------------------------------------------------------------------------------------
# Exercise 9: merge, encode
# ---------------------------------------------------------------------------------------------------------------
_MG = '''def merge(ids, pair, new_id):
    out, k = [], 0
    while k < len(ids):
        if k + 1 < len(ids) and (ids[k], ids[k + 1]) == tuple(pair): out.append(new_id); k += 2
        else: out.append(ids[k]); k += 1
    return out
'''
_e = lambda *a, **k: _add('ex09', 'merge', *a, **k)
_e('wrong', 'overlapping', "Checks every position without skipping the second id of a merged pair, so overlapping occurrences are merged twice.",
   '''def merge(ids, pair, new_id):
    out = []
    for k in range(len(ids)):
        if k + 1 < len(ids) and ids[k] == pair[0] and ids[k + 1] == pair[1]:
            out.append(new_id)
        elif k > 0 and ids[k - 1] == pair[0] and ids[k] == pair[1]:
            continue
        else:
            out.append(ids[k])
    return out
''', 'ids=[5, 5, 5], pair=(5, 5)')
_e('wrong', 'in_place', "Edits the caller's list in place (and returns it) instead of building a new list.",
   '''def merge(ids, pair, new_id):
    k = 0
    while k < len(ids) - 1:
        if ids[k] == pair[0] and ids[k + 1] == pair[1]:
            ids[k] = new_id
            del ids[k + 1]
        k += 1
    return ids
''', "any ids containing the pair: the caller's list changes")
_e('wrong', 'returns_caller_list', "Returns the caller's own list when the pair does not occur, so a later change to the result changes the caller's list.",
   '''def merge(ids, pair, new_id):
    if tuple(pair) not in set(zip(ids, ids[1:])):
        return ids
    out, k = [], 0
    while k < len(ids):
        if k + 1 < len(ids) and ids[k] == pair[0] and ids[k + 1] == pair[1]:
            out.append(new_id); k += 2
        else:
            out.append(ids[k]); k += 1
    return out
''', 'ids without the pair: result is ids')
_e('wrong', 'drops_last', "Stops one position early and never appends the last id when it is not part of a pair.",
   '''def merge(ids, pair, new_id):
    out, k = [], 0
    while k < len(ids) - 1:
        if (ids[k], ids[k + 1]) == tuple(pair): out.append(new_id); k += 2
        else: out.append(ids[k]); k += 1
    return out
''', 'ids=[1, 2, 3], pair=(1, 2)')
_e('wrong', 'right_to_left', "Scans from the right, so in [5, 5, 5] it merges the last two instead of the first two.",
   '''def merge(ids, pair, new_id):
    out, k = [], len(ids) - 1
    while k >= 0:
        if k > 0 and (ids[k - 1], ids[k]) == tuple(pair): out.append(new_id); k -= 2
        else: out.append(ids[k]); k -= 1
    return out[::-1]
''', 'ids=[5, 5, 5], pair=(5, 5)')
_e('wrong', 'list_vs_tuple', "Compares a list [a, b] with the pair, which never equals a tuple, so nothing is ever merged when the pair is a tuple.",
   '''def merge(ids, pair, new_id):
    out, k = [], 0
    while k < len(ids):
        if k + 1 < len(ids) and [ids[k], ids[k + 1]] == pair: out.append(new_id); k += 2
        else: out.append(ids[k]); k += 1
    return out
''', 'pair=(1, 2) as a tuple')
_e('wrong', 'string_replace', "Joins the ids into a string and replaces the text of the pair, which also matches across id boundaries (15,5 contains 5,5).",
   '''def merge(ids, pair, new_id):
    s = ',' + ','.join(map(str, ids)) + ','
    s = s.replace(f',{pair[0]},{pair[1]},', f',{new_id},')
    return [int(t) for t in s.strip(',').split(',') if t]
''', 'ids=[1, 2, 1, 2], pair=(1, 2): the shared comma stops the second replacement')
_e('wrong', 'first_only', "Replaces only the first occurrence of the pair.",
   '''def merge(ids, pair, new_id):
    ids = list(ids)
    for k in range(len(ids) - 1):
        if (ids[k], ids[k + 1]) == tuple(pair):
            return ids[:k] + [new_id] + ids[k + 2:]
    return ids
''', 'ids=[1, 2, 1, 2], pair=(1, 2)')
_e('correct', 'skip_flag', "Uses a for loop with a flag that skips the second id of each merged pair.",
   '''def merge(ids, pair, new_id):
    out, skip = [], False
    for a, b in zip(ids, list(ids[1:]) + [None]):
        if skip:
            skip = False
            continue
        if (a, b) == (pair[0], pair[1]):
            out.append(new_id)
            skip = True
        else:
            out.append(a)
    return out
''')
_e('correct', 'copy_then_del', "Copies the list first and edits the copy in place with del.",
   '''def merge(ids, pair, new_id):
    ids = list(ids)
    k = 0
    while k < len(ids) - 1:
        if ids[k] == pair[0] and ids[k + 1] == pair[1]:
            ids[k:k + 2] = [new_id]
        k += 1
    return ids
''')
_e('correct', 'index_search', "Jumps from one occurrence of the first id to the next with list.index.",
   '''def merge(ids, pair, new_id):
    a, b = pair
    out, k, n = [], 0, len(ids)
    while k < n:
        try:
            j = ids.index(a, k)
        except ValueError:
            out.extend(ids[k:])
            break
        out.extend(ids[k:j])
        if j + 1 < n and ids[j + 1] == b:
            out.append(new_id); k = j + 2
        else:
            out.append(a); k = j + 1
    return out
''')

_ENC_MERGE = '''def merge(ids, pair, new_id):
    out, k = [], 0
    while k < len(ids):
        if k + 1 < len(ids) and (ids[k], ids[k + 1]) == tuple(pair): out.append(new_id); k += 2
        else: out.append(ids[k]); k += 1
    return out

'''
_EN = _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present: break
        pair = min(present, key=merges.get)
        ids = merge(ids, pair, merges[pair])
    return ids
'''
_e = lambda *a, **k: _add('ex09', 'encode', *a, **k)
_e('wrong', 'code_points', "Starts from the characters' code points (ord) instead of the UTF-8 bytes, so 'é' is the one id 233 instead of 195, 169.",
   _v(_EN, ("ids = list(text.encode('utf-8'))", "ids = [ord(c) for c in text]")), "text='é', merges={(195, 169): 256}")
_e('wrong', 'latin1_when_possible', "Uses one byte per character when the code point fits in a byte and UTF-8 only otherwise, so 'é' is 233 instead of 195, 169.",
   _v(_EN, ("ids = list(text.encode('utf-8'))", "ids = [b for c in text for b in ([ord(c)] if ord(c) < 256 else list(c.encode('utf-8')))]")), "text='é'")
_e('wrong', 'dict_order', "Applies the merges once each in the dict's order, not by rank: a dict not built in rank order gives the wrong tokens.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    for pair, new_id in merges.items():
        ids = merge(ids, pair, new_id)
    return ids
''', "text='the', merges={(104, 101): 257, (116, 104): 256}")
_e('wrong', 'largest_id', "Merges the pair with the largest new id (the latest learned) instead of the smallest.",
   _v(_EN, ("pair = min(present, key=merges.get)", "pair = max(present, key=merges.get)")), "text='the', merges={(116, 104): 256, (104, 101): 257}")
_e('wrong', 'most_frequent', "Merges the most frequent pair present, as training chooses, instead of the earliest learned.",
   _v(_EN, ("pair = min(present, key=merges.get)", "pair = max(set(present), key=present.count)")), "text='heee', merges={(104, 101): 256, (101, 101): 257}")
_e('wrong', 'pair_order_not_rank', "Takes min over the pairs themselves (ordered by their ids), not over their ranks in merges.",
   _v(_EN, ("pair = min(present, key=merges.get)", "pair = min(present)")), "text='the', merges={(104, 101): 257, (116, 104): 256}")
_e('wrong', 'pops_caller_merges', "Deletes each applied merge from the caller's merges dict.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present: break
        pair = min(present, key=merges.get)
        ids = merge(ids, pair, merges.pop(pair))
    return ids
''', "any text that uses a merge: the caller's dict loses it")
_e('wrong', 'one_pass', "Merges the pairs present in the raw bytes once, in rank order, and never looks again, so merges that build on new ids never apply.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    present = sorted({p for p in zip(ids, ids[1:]) if p in merges}, key=merges.get)
    for pair in present:
        ids = merge(ids, pair, merges[pair])
    return ids
''', "text='the', merges={(116, 104): 256, (256, 101): 257}")
_e('wrong', 'length_off_by_one', "Loops only while more than two ids remain, so a text of two bytes is never merged.",
   _v(_EN, ("while len(ids) >= 2:", "while len(ids) > 2:")), "text='th', merges={(116, 104): 256}")
_e('wrong', 'min_of_empty', "Takes the min over the pairs without a guard, which raises for a text of one byte or the empty text.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    while True:
        pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, float('inf')))
        if pair not in merges: break
        ids = merge(ids, pair, merges[pair])
    return ids
''', "text='a'")
_e('wrong', 'inline_overlapping_merge', "Replaces with its own merge that merges overlapping occurrences, so 'aaa' becomes two merged ids.",
   '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present: break
        pair = min(present, key=merges.get)
        new = []
        for k in range(len(ids)):
            if k + 1 < len(ids) and (ids[k], ids[k + 1]) == pair: new.append(merges[pair])
            elif k > 0 and (ids[k - 1], ids[k]) == pair: pass
            else: new.append(ids[k])
        ids = new
    return ids
''', "text='aaa', merges={(97, 97): 256}")
_e('wrong', 'per_word', "Encodes each space-separated word on its own, so merges across a space (a pair with byte 32) never apply.",
   _ENC_MERGE + '''def encode_word(word, merges):
    ids = list(word.encode('utf-8'))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present: break
        pair = min(present, key=merges.get)
        ids = merge(ids, pair, merges[pair])
    return ids

def encode(text, merges):
    out = []
    for i, word in enumerate(text.split(' ')):
        if i: out.append(32)
        out.extend(encode_word(word, merges))
    return out
''', "text='a b', merges={(97, 32): 256}")
_e('correct', 'minbpe_style', "Karpathy's minbpe loop: counts the pairs, takes the one with the lowest rank (inf when absent), stops when it is not a merge.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = list(text.encode("utf-8"))
    while len(ids) >= 2:
        stats = {}
        for p in zip(ids, ids[1:]):
            stats[p] = stats.get(p, 0) + 1
        pair = min(stats, key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break
        ids = merge(ids, pair, merges[pair])
    return ids
''')
_e('correct', 'scan_positions', "Scans positions for the lowest-ranked pair and merges with its own left-to-right loop.",
   '''def encode(text, merges):
    ids = list(text.encode('utf-8'))
    while True:
        best = None
        for a, b in zip(ids, ids[1:]):
            r = merges.get((a, b))
            if r is not None and (best is None or r < merges[best]):
                best = (a, b)
        if best is None:
            return ids
        out, k = [], 0
        while k < len(ids):
            if k + 1 < len(ids) and ids[k] == best[0] and ids[k + 1] == best[1]:
                out.append(merges[best]); k += 2
            else:
                out.append(ids[k]); k += 1
        ids = out
''')
_e('correct', 'bytes_iteration', "Iterates over the bytes object directly (which yields ints) and sorts the candidate pairs by rank.",
   _ENC_MERGE + '''def encode(text, merges):
    ids = [b for b in text.encode('utf-8')]
    while True:
        cands = sorted((merges[p], p) for p in set(zip(ids, ids[1:])) if p in merges)
        if not cands:
            break
        rank, pair = cands[0]
        ids = merge(ids, pair, rank)
    return ids
''')

# ---------------------------------------------------------------------------------------------------------------
# Exercise 10: train_step, train_loop
# ---------------------------------------------------------------------------------------------------------------
_TS = '''import torch
from transformer_tutorial.training import sequence_loss
def train_step(model, batch, optimizer, pad_id, clip):
    model.train()
    optimizer.zero_grad()
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    loss = sequence_loss(logits, batch.tgt_out, pad_id)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()
'''
_e = lambda *a, **k: _add('ex10', 'train_step', *a, **k)
_e('wrong', 'no_train_mode', "Never calls model.train(), so after an evaluation the step trains without dropout (and leaves the model in eval mode).",
   _v(_TS, ("    model.train()\n", "")), 'a model with dropout 0.1 left in eval mode')
_e('wrong', 'no_zero_grad', "Never zeroes the gradients, so each step's gradient holds the previous steps' too.",
   _v(_TS, ("    optimizer.zero_grad()\n", "")), 'a model whose .grad holds an earlier backward')
_e('wrong', 'zero_grad_after_backward', "Zeroes the gradients after backward, throwing away the gradient just computed, so the step uses none.",
   _v(_TS, ("    optimizer.zero_grad()\n", ""), ("    loss.backward()\n", "    loss.backward()\n    optimizer.zero_grad()\n")), 'any batch')
_e('wrong', 'zero_grad_at_end', "Zeroes the gradients after the step instead of before the backward pass, so gradients left in .grad by anything else (an earlier backward) are added into this step.",
   _v(_TS, ("    optimizer.zero_grad()\n", ""), ("    optimizer.step()\n", "    optimizer.step()\n    optimizer.zero_grad()\n")), 'a model whose .grad holds an earlier backward')
_e('wrong', 'clip_after_step', "Clips the gradients after optimizer.step(), when they have already been used.",
   _v(_TS, ("    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n    optimizer.step()\n",
            "    optimizer.step()\n    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n")), 'clip=0.01')
_e('wrong', 'clip_by_value', "Clamps each gradient entry with clip_grad_value_ instead of scaling the whole gradient to norm clip.",
   _v(_TS, ("clip_grad_norm_(model.parameters(), clip)", "clip_grad_value_(model.parameters(), clip)")), 'clip=0.01')
_e('wrong', 'clip_inf_norm', "Clips with the max norm (norm_type=inf) instead of the 2-norm of all gradients together.",
   _v(_TS, ("clip_grad_norm_(model.parameters(), clip)", "clip_grad_norm_(model.parameters(), clip, norm_type=float('inf'))")), 'clip=0.01')
_e('wrong', 'clip_per_parameter', "Clips each parameter's gradient to norm clip on its own instead of the norm of all of them together.",
   _v(_TS, ("    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)\n",
            "    for p in model.parameters():\n        if p.grad is not None: torch.nn.utils.clip_grad_norm_([p], clip)\n")), 'clip=0.01')
_e('wrong', 'returns_tensor', "Returns the loss tensor, tied to its graph, instead of loss.item().",
   _v(_TS, ("return loss.item()", "return loss")), 'any batch')
_e('wrong', 'pad_in_loss', "Uses F.cross_entropy without ignore_index, so padded targets count in the loss.",
   _v(_TS, ("loss = sequence_loss(logits, batch.tgt_out, pad_id)",
            "loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten())")), 'a batch with padded targets')
_e('wrong', 'targets_not_shifted', "Scores the logits against the decoder's input tgt_in instead of the shifted targets tgt_out.",
   _v(_TS, ("sequence_loss(logits, batch.tgt_out, pad_id)", "sequence_loss(logits, batch.tgt_in, pad_id)")), 'any batch')
_e('wrong', 'mean_per_sequence', "Averages the cross-entropy within each sequence, then over sequences, instead of over all real tokens together.",
   _v(_TS, ("loss = sequence_loss(logits, batch.tgt_out, pad_id)",
            "per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=pad_id, reduction='none')\n"
            "    real = (batch.tgt_out != pad_id).float()\n    loss = ((per * real).sum(1) / real.sum(1)).mean()")), 'rows with different numbers of pads')
_e('wrong', 'no_masks', "Calls the model without its masks, so the decoder sees future tokens and padding.",
   _v(_TS, ("model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)", "model(batch.src, batch.tgt_in, None, None)")), 'any batch')
_e('correct', 'batch_logits_set_to_none', "Uses batch.logits(model), zero_grad(set_to_none=True) before model.train(), and returns float(loss).",
   '''import torch
from transformer_tutorial.training import sequence_loss
def train_step(model, batch, optimizer, pad_id, clip):
    optimizer.zero_grad(set_to_none=True)
    model.train()
    loss = sequence_loss(batch.logits(model), batch.tgt_out, pad_id)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip, norm_type=2.0)
    optimizer.step()
    return float(loss.detach())
''')
_e('correct', 'manual_clip', "Clips by hand the way PyTorch does: the 2-norm of all gradients together, scaled by clip / (norm + 1e-6) when that is below 1.",
   '''import torch
from transformer_tutorial.training import sequence_loss
def train_step(model, batch, optimizer, pad_id, clip):
    model.train()
    for p in model.parameters():
        p.grad = None
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    loss = sequence_loss(logits, batch.targets, pad_id)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    coef = torch.clamp(clip / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef)
    optimizer.step()
    return loss.item()
''')
_e('correct', 'cross_entropy_ignore_index', "Writes the loss with F.cross_entropy and ignore_index=pad_id instead of sequence_loss.",
   '''import torch
import torch.nn.functional as F
def train_step(model, batch, optimizer, pad_id, clip):
    model.train()
    optimizer.zero_grad()
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1), ignore_index=pad_id)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()
''')

_TL = _TS + '''
def train_loop(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    losses = []
    for _ in range(steps):
        losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))
        scheduler.step()
    return losses
'''
_e = lambda *a, **k: _add('ex10', 'train_loop', *a, **k)
_e('wrong', 'scheduler_before', "Steps the scheduler before the training step, so the first update skips the schedule's first rate.",
   _v(_TL, ("        losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))\n        scheduler.step()\n",
            "        scheduler.step()\n        losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))\n")), 'a warmup schedule')
_e('wrong', 'one_batch', "Calls next_batch() once before the loop and trains every step on that same batch.",
   _v(_TL, ("    losses = []\n    for _ in range(steps):\n        losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))",
            "    losses = []\n    batch = next_batch()\n    for _ in range(steps):\n        losses.append(train_step(model, batch, optimizer, pad_id, clip))")), 'steps=2')
_e('wrong', 'returns_mean', "Returns the mean loss instead of the list of the losses, one per step.",
   _v(_TL, ("    return losses\n", "    return sum(losses) / len(losses)\n")), 'any run')
_e('wrong', 'extra_optimizer_step', "Calls optimizer.step() again after train_step, which already stepped, so each batch updates the weights twice.",
   _v(_TL, ("        scheduler.step()\n    return", "        optimizer.step()\n        scheduler.step()\n    return")), 'steps=2')
_e('wrong', 'steps_off_by_one', "Loops over range(1, steps), one step short.",
   _v(_TL, ("for _ in range(steps):", "for _ in range(1, steps):")), 'steps=3')
_e('wrong', 'no_scheduler', "Never steps the scheduler, so every update runs at the first step's rate.",
   _v(_TL, ("        scheduler.step()\n    return", "    return")), 'a warmup schedule, steps=2')
_e('wrong', 'pad_constant', "Passes the course's PAD constant instead of the pad_id it was given.",
   _v(_TL, ("losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))",
            "from transformer_tutorial.training import PAD\n        losses.append(train_step(model, next_batch(), optimizer, PAD, clip))")), 'pad_id other than 0')
_e('wrong', 'clip_constant', "Clips at 1.0 instead of the clip it was given.",
   _v(_TL, ("losses.append(train_step(model, next_batch(), optimizer, pad_id, clip))",
            "losses.append(train_step(model, next_batch(), optimizer, pad_id, 1.0))")), 'clip=0.01')
_e('wrong', 'scheduler_primed', "Steps the scheduler once before the loop as well, so the whole schedule runs one step ahead.",
   _v(_TL, ("    losses = []\n", "    losses = []\n    scheduler.step()\n")), 'a warmup schedule')
_e('wrong', 'loss_recorded_after_eval', "Records a second loss, computed after the update in eval mode, instead of the loss train_step returned.",
   _TS + '''
from transformer_tutorial.training import sequence_loss as _sl
def train_loop(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    losses = []
    for _ in range(steps):
        batch = next_batch()
        train_step(model, batch, optimizer, pad_id, clip)
        scheduler.step()
        model.eval()
        with torch.no_grad():
            losses.append(_sl(batch.logits(model), batch.tgt_out, pad_id).item())
    return losses
''', 'any run: the loss is measured after the update')
_e('correct', 'comprehension', "Writes the loop as a list comprehension over a helper that steps the scheduler and hands the loss back.",
   _TS + '''
def train_loop(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    def one():
        loss = train_step(model, next_batch(), optimizer, pad_id, clip)
        scheduler.step()
        return loss
    return [one() for _ in range(steps)]
''')
_e('correct', 'while_loop', "Uses a while loop with a counter and collects the losses with +=.",
   _TS + '''
def train_loop(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    losses, done = [], 0
    while done < steps:
        batch = next_batch()
        losses += [train_step(model, batch, optimizer, pad_id, clip)]
        scheduler.step()
        done += 1
    return losses
''')

# ---------------------------------------------------------------------------------------------------------------
# Exercise 11: cached_self_attention, greedy_decode_cached
# ---------------------------------------------------------------------------------------------------------------
_CS = '''import torch
import torch.nn.functional as F
from transformer_tutorial.multi_head import split_heads, merge_heads
def cached_self_attention(mha, y, past_k, past_v):
    H = mha.num_heads
    k = torch.cat([past_k, split_heads(mha.w_k(y), H)], dim=2)
    v = torch.cat([past_v, split_heads(mha.w_v(y), H)], dim=2)
    q = split_heads(mha.w_q(y), H)
    out = F.scaled_dot_product_attention(q, k, v)
    return mha.w_o(merge_heads(out)), k, v
'''
_e = lambda *a, **k: _add('ex11', 'cached_self_attention', *a, **k)
_e('wrong', 'attend_before_append', "Attends over the cached keys before appending the new one, so the newest position never sees itself (and the first step attends to nothing).",
   _v(_CS, ("    out = F.scaled_dot_product_attention(q, k, v)\n", "    out = F.scaled_dot_product_attention(q, past_k, past_v) if past_k.size(2) else torch.zeros_like(q)\n")), 't=2')
_e('wrong', 'cat_heads_axis', "Appends along axis 1 (the heads) instead of axis 2 (the positions).",
   _v(_CS, ("split_heads(mha.w_k(y), H)], dim=2)", "split_heads(mha.w_k(y), H)], dim=1)"),
           ("split_heads(mha.w_v(y), H)], dim=2)", "split_heads(mha.w_v(y), H)], dim=1)")), 't=2')
_e('wrong', 'prepend', "Puts the new key and value before the cached ones, so the returned cache is out of position order.",
   _v(_CS, ("torch.cat([past_k, split_heads(mha.w_k(y), H)], dim=2)", "torch.cat([split_heads(mha.w_k(y), H), past_k], dim=2)"),
           ("torch.cat([past_v, split_heads(mha.w_v(y), H)], dim=2)", "torch.cat([split_heads(mha.w_v(y), H), past_v], dim=2)")), 't=2: the cache')
_e('wrong', 'no_w_o', "Returns the merged heads without the output projection w_o.",
   _v(_CS, ("return mha.w_o(merge_heads(out)), k, v", "return merge_heads(out), k, v")), 'any input')
_e('wrong', 'is_causal', "Passes is_causal=True: with one query and t + 1 keys PyTorch aligns the mask top-left, so the query sees key 0 only.",
   _v(_CS, ("F.scaled_dot_product_attention(q, k, v)", "F.scaled_dot_product_attention(q, k, v, is_causal=True)")), 't=2')
_e('wrong', 'cache_only_new', "Returns only the new key and value as the cache instead of the grown one.",
   _v(_CS, ("return mha.w_o(merge_heads(out)), k, v", "return mha.w_o(merge_heads(out)), k[:, :, -1:], v[:, :, -1:]")), 't=2')
_e('wrong', 'no_scaling', "Computes the attention by hand without dividing the scores by sqrt(d_head).",
   _v(_CS, ("    out = F.scaled_dot_product_attention(q, k, v)\n", "    out = (q @ k.transpose(-2, -1)).softmax(-1) @ v\n")), 'any input')
_e('wrong', 'scale_d_model', "Divides the scores by sqrt(d_model) instead of sqrt(d_head).",
   _v(_CS, ("    out = F.scaled_dot_product_attention(q, k, v)\n", "    out = (q @ k.transpose(-2, -1) / y.size(-1) ** 0.5).softmax(-1) @ v\n")), 'H > 1')
_e('wrong', 'softmax_wrong_axis', "Takes the softmax over the query axis (of length 1) instead of the keys, so every weight is 1 and the values are summed.",
   _v(_CS, ("    out = F.scaled_dot_product_attention(q, k, v)\n", "    out = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).softmax(-2) @ v\n")), 't=2')
_e('correct', 'view_without_transpose', "Reshapes the one position straight to (B, H, 1, d_head) and back with view, which matches split_heads and merge_heads because the position axis has length 1.",
   '''import torch
def cached_self_attention(mha, y, past_k, past_v):
    B, _, D = y.shape
    H = mha.num_heads
    d = D // H
    q = mha.w_q(y).view(B, H, 1, d)
    k = torch.cat((past_k, mha.w_k(y).view(B, H, 1, d)), dim=-2)
    v = torch.cat((past_v, mha.w_v(y).view(B, H, 1, d)), dim=-2)
    w = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, dim=-1)
    return mha.w_o((w @ v).reshape(B, 1, D)), k, v
''')
_e('correct', 'einsum', "Writes the attention with einsum and math.sqrt.",
   '''import math
import torch
from transformer_tutorial.multi_head import split_heads, merge_heads
def cached_self_attention(mha, y, past_k, past_v):
    q, k_new, v_new = (split_heads(w(y), mha.num_heads) for w in (mha.w_q, mha.w_k, mha.w_v))
    k = torch.cat([past_k, k_new], 2)
    v = torch.cat([past_v, v_new], 2)
    scores = torch.einsum('bhqd,bhkd->bhqk', q, k) / math.sqrt(q.size(-1))
    out = torch.einsum('bhqk,bhkd->bhqd', scores.softmax(-1), v)
    return mha.w_o(merge_heads(out)), k, v
''')

_GD = '''import torch
from transformer_tutorial.masks import padding_mask
from transformer_tutorial.multi_head import split_heads, merge_heads
import torch.nn.functional as F

def cached_self_attention(mha, y, past_k, past_v):
    H = mha.num_heads
    k = torch.cat([past_k, split_heads(mha.w_k(y), H)], dim=2)
    v = torch.cat([past_v, split_heads(mha.w_v(y), H)], dim=2)
    out = F.scaled_dot_product_attention(split_heads(mha.w_q(y), H), k, v)
    return mha.w_o(merge_heads(out)), k, v

@torch.no_grad()
def greedy_decode_cached(model, src, max_len, start_id, end_id, pad_id):
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    B, H = src.size(0), model.config.num_heads
    empty = memory.new_zeros(B, H, 0, model.config.d_model // H)
    cache = [(empty, empty) for _ in model.decoder.layers]
    token = torch.full((B,), start_id, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    out = []
    for t in range(max_len):
        x = model.tgt_embed(token[:, None]) + model.positional.pe[t]
        for i, layer in enumerate(model.decoder.layers):
            attn, *cache[i] = cached_self_attention(layer.self_attn, layer.sublayers[0].norm(x), *cache[i])
            x = x + attn
            x = x + layer.cross_attn(layer.sublayers[1].norm(x), memory, memory, src_mask)[0]
            x = x + layer.feed_forward(layer.sublayers[2].norm(x))
        token = model.output(model.decoder.norm(x))[:, 0].argmax(-1)
        token = token.masked_fill(done, pad_id)
        out.append(token)
        done |= token == end_id
        if done.all(): break
    return torch.stack(out, dim=1)
'''
_e = lambda *a, **k: _add('ex11', 'greedy_decode_cached', *a, **k)
_e('wrong', 'encoder_unmasked', "Encodes the source without its padding mask, so the encoder attends to pads.",
   _v(_GD, ("memory = model.encode(src, src_mask)", "memory = model.encode(src, None)")), 'a source row with pads')
_e('wrong', 'cross_unmasked', "Lets cross-attention read the memory without the source's padding mask.",
   _v(_GD, ("layer.cross_attn(layer.sublayers[1].norm(x), memory, memory, src_mask)", "layer.cross_attn(layer.sublayers[1].norm(x), memory, memory)")), 'a source row with pads')
_e('wrong', 'position_off_by_one', "Embeds the token of step t at position t + 1.",
   _v(_GD, ("model.positional.pe[t]", "model.positional.pe[t + 1]")), 'any source')
_e('wrong', 'position_zero', "Adds position 0's encoding at every step.",
   _v(_GD, ("model.positional.pe[t]", "model.positional.pe[0]")), 'any source, max_len >= 2')
_e('wrong', 'no_final_norm', "Forgets the decoder's final norm before the output layer.",
   _v(_GD, ("model.output(model.decoder.norm(x))", "model.output(x)")), 'any source')
_e('wrong', 'post_ln', "Normalizes after each residual addition (post-LN) where the model is pre-LN.",
   _v(_GD, ("            attn, *cache[i] = cached_self_attention(layer.self_attn, layer.sublayers[0].norm(x), *cache[i])\n            x = x + attn\n            x = x + layer.cross_attn(layer.sublayers[1].norm(x), memory, memory, src_mask)[0]\n            x = x + layer.feed_forward(layer.sublayers[2].norm(x))\n",
            "            attn, *cache[i] = cached_self_attention(layer.self_attn, x, *cache[i])\n            x = layer.sublayers[0].norm(x + attn)\n            x = layer.sublayers[1].norm(x + layer.cross_attn(x, memory, memory, src_mask)[0])\n            x = layer.sublayers[2].norm(x + layer.feed_forward(x))\n")), 'any source')
_e('wrong', 'no_pad_after_end', "Keeps emitting the argmax after a row has produced end_id instead of pad_id.",
   _v(_GD, ("        token = token.masked_fill(done, pad_id)\n", "")), 'a batch whose rows end at different steps')
_e('wrong', 'end_replaced_by_pad', "Marks the row finished before filling, so the end token itself is replaced by pad_id.",
   _v(_GD, ("        token = token.masked_fill(done, pad_id)\n        out.append(token)\n        done |= token == end_id\n",
            "        done |= token == end_id\n        token = token.masked_fill(done, pad_id)\n        out.append(token)\n")), 'a row that produces end_id')
_e('wrong', 'stops_at_first_end', "Stops as soon as any row has ended instead of every row.",
   _v(_GD, ("if done.all(): break", "if done.any(): break")), 'a batch whose rows end at different steps')
_e('wrong', 'keeps_start', "Returns the start token as the first column.",
   _v(_GD, ("    out = []\n", "    out = [token]\n")), 'any source')
_e('wrong', 'reencodes', "Calls model.encode at every step, where the exercise asks to encode the source once (the tokens agree).",
   _v(_GD, ("        x = model.tgt_embed(token[:, None]) + model.positional.pe[t]\n",
            "        memory = model.encode(src, src_mask)\n        x = model.tgt_embed(token[:, None]) + model.positional.pe[t]\n")), 'contract')
_e('wrong', 'never_stops', "Always runs max_len steps, returning columns of pads after every row has ended instead of stopping.",
   _v(_GD, ("        if done.all(): break\n", "")), 'every row ends before max_len')
_e('wrong', 'squeeze_batch_of_one', "Squeezes the stacked tokens to drop a stray axis, which for a batch of one also drops the batch axis, so the output is 1-D.",
   _v(_GD, ("return torch.stack(out, dim=1)", "return torch.stack(out, dim=1).squeeze()")), 'B=1')
_e('wrong', 'one_cache_for_all_layers', "Keeps one cache shared by every layer, so the second layer attends to the first layer's keys too.",
   _v(_GD, ("    cache = [(empty, empty) for _ in model.decoder.layers]\n", "    shared = [(empty, empty)]\n"),
           ("            attn, *cache[i] = cached_self_attention(layer.self_attn, layer.sublayers[0].norm(x), *cache[i])\n",
            "            attn, k_, v_ = cached_self_attention(layer.self_attn, layer.sublayers[0].norm(x), *shared[0])\n            shared[0] = (k_, v_)\n")), 'num_layers=2')
_e('correct', 'sublayer_wrappers', "Calls each residual wrapper layer.sublayers[i](x, f) as the layer's own forward does, and keeps the cache in a dict.",
   _v(_GD, ("    cache = [(empty, empty) for _ in model.decoder.layers]\n", "    cache = {i: (empty, empty) for i in range(len(model.decoder.layers))}\n"),
           ("            attn, *cache[i] = cached_self_attention(layer.self_attn, layer.sublayers[0].norm(x), *cache[i])\n            x = x + attn\n            x = x + layer.cross_attn(layer.sublayers[1].norm(x), memory, memory, src_mask)[0]\n            x = x + layer.feed_forward(layer.sublayers[2].norm(x))\n",
            "            def self_attn(y, i=i, layer=layer):\n                o, k, v = cached_self_attention(layer.self_attn, y, *cache[i])\n                cache[i] = (k, v)\n                return o\n"
            "            x = layer.sublayers[0](x, self_attn)\n            x = layer.sublayers[1](x, lambda y: layer.cross_attn(y, memory, memory, src_mask)[0])\n            x = layer.sublayers[2](x, layer.feed_forward)\n")))
_e('correct', 'preallocated_output', "Preallocates a (B, max_len) output of pads, writes column t each step and cuts it at the last step taken.",
   _v(_GD, ("    out = []\n", "    out = torch.full((B, max_len), pad_id, dtype=torch.long)\n    n = 0\n"),
           ("        token = token.masked_fill(done, pad_id)\n        out.append(token)\n        done |= token == end_id\n        if done.all(): break\n    return torch.stack(out, dim=1)\n",
            "        token = torch.where(done, torch.full_like(token, pad_id), token)\n        out[:, t] = token\n        n = t + 1\n        done = done | (token == end_id)\n        if bool(done.all()): break\n    return out[:, :n]\n")))

# ---------------------------------------------------------------------------------------------------------------
# Exercise 12: length_penalty, beam_search
# ---------------------------------------------------------------------------------------------------------------
_e = lambda *a, **k: _add('ex12', 'length_penalty', *a, **k)
_e('wrong', 'denominator_unpowered', "Raises only the numerator to alpha and divides by 6, not by 6 ** alpha.",
   '''def length_penalty(length, alpha):
    return (5 + length) ** alpha / 6
''', 'length=1, alpha=0.6')
_e('wrong', 'precedence', "Writes (5 + length) / 6 ** alpha, which raises only the 6 to alpha.",
   '''def length_penalty(length, alpha):
    return (5 + length) / 6 ** alpha
''', 'length=3, alpha=0.6')
_e('wrong', 'floor_division', "Divides with //, which floors (5 + length) / 6 for integer lengths.",
   '''def length_penalty(length, alpha):
    return ((5 + length) // 6) ** alpha
''', 'length=3, alpha=1.0')
_e('wrong', 'over_five', "Divides by 5 + 0 instead of 5 + 1, so one token's penalty is not 1.",
   '''def length_penalty(length, alpha):
    return ((5 + length) / 5) ** alpha
''', 'length=1, alpha=0.6')
_e('wrong', 'math_pow', "Uses math.pow, which fails on a tensor of lengths.",
   '''import math
def length_penalty(length, alpha):
    return math.pow((5 + length) / 6, alpha)
''', 'a tensor of several lengths')
_e('wrong', 'torch_pow_number', "Uses torch.pow, which refuses two plain numbers.",
   '''import torch
def length_penalty(length, alpha):
    return torch.pow((5 + length) / 6, alpha)
''', 'length=3 (an int), alpha=0.6')
_e('wrong', 'alpha_zero_scalar', "Returns the number 1 when alpha is 0, also for a tensor of lengths, which should give a tensor of ones.",
   '''def length_penalty(length, alpha):
    if alpha == 0:
        return 1.0
    return ((5 + length) / 6) ** alpha
''', 'a tensor of lengths, alpha=0')
_e('wrong', 'float_cast', "Converts the length to a float first, which fails for a tensor of several lengths.",
   '''def length_penalty(length, alpha):
    return ((5 + float(length)) / 6) ** alpha
''', 'a tensor of several lengths')
_e('correct', 'split_powers', "Computes (5 + length) ** alpha / 6 ** alpha.",
   '''def length_penalty(length, alpha):
    return (5 + length) ** alpha / 6 ** alpha
''')
_e('correct', 'type_dispatch', "Dispatches on the type: torch.pow for a tensor, ** for a number.",
   '''import torch
def length_penalty(length, alpha):
    if isinstance(length, torch.Tensor):
        return torch.pow((length + 5) / 6, alpha)
    return ((length + 5) / 6) ** alpha
''')

_BS = '''import math
import torch
from transformer_tutorial.masks import padding_mask
from transformer_tutorial.decoding import KVCache, decode_step

def length_penalty(length, alpha):
    return ((5 + length) / 6) ** alpha

@torch.no_grad()
def beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    K, V = beam_size, model.config.tgt_vocab_size
    src_mask = padding_mask(src, pad_id).repeat_interleave(K, 0)
    cache = KVCache(model, model.encode(src.repeat_interleave(K, 0), src_mask), max_len)
    ys = torch.full((K, 1), start_id, dtype=torch.long)
    score = torch.full((K,), -math.inf, dtype=cache.keys.dtype)
    score[0] = 0.0
    length = torch.zeros(K)
    done = torch.zeros(K, dtype=torch.bool)
    for t in range(max_len):
        logp = decode_step(model, ys[:, -1], cache, src_mask).log_softmax(-1)
        logp[done] = -math.inf
        logp[done, pad_id] = 0.0
        cand = score[:, None] + logp
        cand_len = (length + ~done)[:, None].expand(K, V)
        best = (cand / length_penalty(cand_len, alpha)).flatten().topk(K).indices
        rows, token = best // V, best % V
        score, length = cand.flatten()[best], cand_len.flatten()[best]
        ys = torch.cat([ys[rows], token[:, None]], dim=1)
        cache.reorder(rows)
        done = done[rows] | (token == end_id)
        if done.all(): break
    top = int((score / length_penalty(length, alpha)).argmax())
    return ys[top:top + 1, 1:int(length[top]) + 1]
'''
_e = lambda *a, **k: _add('ex12', 'beam_search', *a, **k)
_e('wrong', 'all_beams_live', "Starts every beam at score 0, so the first step fills the beam with copies of the same hypothesis.",
   _v(_BS, ("torch.full((K,), -math.inf, dtype=cache.keys.dtype)", "torch.zeros(K, dtype=cache.keys.dtype)")), 'beam_size=3')
_e('wrong', 'rank_by_raw_score', "Ranks the candidates by their raw log-probability, without the length penalty.",
   _v(_BS, ("best = (cand / length_penalty(cand_len, alpha)).flatten().topk(K).indices", "best = cand.flatten().topk(K).indices")), 'the witness script\'s case 22: its random Transformer(6, 6) of seed 3, beam_size=3, alpha=3.0')
_e('wrong', 'final_by_raw_score', "Picks the returned hypothesis by raw score instead of score / length_penalty.",
   _v(_BS, ("top = int((score / length_penalty(length, alpha)).argmax())", "top = int(score.argmax())")), 'the witness script\'s cases 17 and 22: random Transformer(6, 6) of seeds 2 and 3, beam_size=4 alpha=2.0 and beam_size=3 alpha=3.0')
_e('wrong', 'end_not_counted', "Does not count the end token in the length.",
   _v(_BS, ("cand_len = (length + ~done)[:, None].expand(K, V)",
            "cand_len = (length[:, None] + (~done)[:, None] * (torch.arange(V) != end_id)).to(length.dtype)")), 'alpha=1.0, a hypothesis that ends')
_e('wrong', 'finished_length_grows', "Lets a finished beam's length keep growing with each pad it is extended by.",
   _v(_BS, ("cand_len = (length + ~done)[:, None].expand(K, V)", "cand_len = (length + 1)[:, None].expand(K, V)")), 'alpha=1.0, a beam that ends before the others')
_e('wrong', 'finished_extended', "Extends finished beams like live ones instead of with pad at log-probability 0.",
   _v(_BS, ("        logp[done] = -math.inf\n        logp[done, pad_id] = 0.0\n", "")), 'a beam that ends before max_len')
_e('wrong', 'best_of_each_beam', "Keeps the best extension of each beam instead of the best K of all K × V candidates.",
   _v(_BS, ("        best = (cand / length_penalty(cand_len, alpha)).flatten().topk(K).indices\n",
            "        per = (cand / length_penalty(cand_len, alpha)).argmax(-1)\n        best = torch.arange(K) * V + per\n")), 'beam_size=3')
_e('wrong', 'includes_start', "Returns the start token with the hypothesis.",
   _v(_BS, ("return ys[top:top + 1, 1:int(length[top]) + 1]", "return ys[top:top + 1, :int(length[top]) + 1]")), 'any source')
_e('wrong', 'keeps_trailing_pads', "Returns the whole row, with the pads that follow the end token.",
   _v(_BS, ("return ys[top:top + 1, 1:int(length[top]) + 1]", "return ys[top:top + 1, 1:]")), 'a best hypothesis that ends before another beam')
_e('wrong', 'no_reorder', "Never reorders the cache, so each surviving beam reads the keys and values of the beam in its old row.",
   _v(_BS, ("        cache.reorder(rows)\n", "")), 'beam_size=3')
_e('wrong', 'rows_divided_by_K', "Finds a candidate's beam as best // K instead of best // V.",
   _v(_BS, ("rows, token = best // V, best % V", "rows, token = best // K, best % V")), 'beam_size=3, V != K')
_e('wrong', 'done_not_reordered', "Carries the finished flags by old row position instead of following the surviving beams.",
   _v(_BS, ("done = done[rows] | (token == end_id)", "done = done | (token == end_id)")), 'beam_size=3')
_e('wrong', 'probabilities_added', "Adds probabilities (softmax) instead of log-probabilities to the score.",
   _v(_BS, ("decode_step(model, ys[:, -1], cache, src_mask).log_softmax(-1)", "decode_step(model, ys[:, -1], cache, src_mask).softmax(-1)")), 'beam_size=2')
_e('wrong', 'stops_when_best_ends', "Stops when the first beam has ended instead of when every beam has.",
   _v(_BS, ("if done.all(): break", "if done[0]: break")), 'the witness script\'s cases 17 and 22: random Transformer(6, 6) of seeds 2 and 3, beam_size=4 alpha=2.0 and beam_size=3 alpha=3.0')
_e('wrong', 'length_counts_start', "Counts the start token in the length the penalty uses.",
   _v(_BS, ("    length = torch.zeros(K)\n", "    length = torch.ones(K)\n"),
           ("return ys[top:top + 1, 1:int(length[top]) + 1]", "return ys[top:top + 1, 1:int(length[top])]")), 'the witness script\'s cases 17 and 22: random Transformer(6, 6) of seeds 2 and 3, beam_size=4 alpha=2.0 and beam_size=3 alpha=3.0')
_e('correct', 'sort_not_topk', "Takes the K best with a stable descending sort instead of topk.",
   _v(_BS, ("best = (cand / length_penalty(cand_len, alpha)).flatten().topk(K).indices",
            "best = (cand / length_penalty(cand_len, alpha)).flatten().sort(descending=True, stable=True).indices[:K]")))
_e('correct', 'python_lists', "Keeps each beam's tokens as a Python list and reorders the lists, building the result with torch.tensor.",
   '''import math
import torch
from transformer_tutorial.masks import padding_mask
from transformer_tutorial.decoding import KVCache, decode_step

def length_penalty(length, alpha):
    return ((5 + length) / 6) ** alpha

@torch.no_grad()
def beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id):
    K, V = beam_size, model.config.tgt_vocab_size
    mask = padding_mask(src, pad_id).repeat_interleave(K, 0)
    cache = KVCache(model, model.encode(src.repeat_interleave(K, 0), mask), max_len)
    hyps = [[] for _ in range(K)]
    last = torch.full((K,), start_id, dtype=torch.long)
    score = torch.tensor([0.0] + [-math.inf] * (K - 1))
    length = torch.zeros(K)
    done = torch.zeros(K, dtype=torch.bool)
    only_pad = torch.full((V,), -math.inf); only_pad[pad_id] = 0.0
    for _ in range(max_len):
        logp = decode_step(model, last, cache, mask).log_softmax(-1)
        logp = torch.where(done[:, None], only_pad, logp)
        cand = score[:, None] + logp
        cand_len = (length + (~done).float())[:, None].expand(K, V)
        flat = (cand / length_penalty(cand_len, alpha)).reshape(-1)
        best = flat.topk(K).indices
        rows, toks = best // V, best % V
        hyps = [hyps[r] + ([] if done[r] else [t]) for r, t in zip(rows.tolist(), toks.tolist())]
        score, length = cand.reshape(-1)[best], cand_len.reshape(-1)[best]
        cache.reorder(rows)
        done = done[rows] | (toks == end_id)
        last = toks
        if bool(done.all()): break
    top = int((score / length_penalty(length, alpha)).argmax())
    return torch.tensor([hyps[top]], dtype=torch.long)
''')

# ---------------------------------------------------------------------------------------------------------------
# Exercise 13: gpt_forward, top_k_filter, top_p_filter, sample_next
# ---------------------------------------------------------------------------------------------------------------
_GF = '''import torch
def gpt_forward(model, idx):
    L = idx.size(1)
    x = model.embed(idx) + model.positions.table.weight[:L]
    mask = torch.ones(L, L, dtype=torch.bool, device=idx.device).tril()
    for layer in model.layers: x = layer(x, mask)
    return model.head(model.norm(x))
'''
_e = lambda *a, **k: _add('ex13', 'gpt_forward', *a, **k)
_e('wrong', 'no_final_norm', "Forgets the final norm before the output layer.",
   _v(_GF, ("return model.head(model.norm(x))", "return model.head(x)")), 'any ids')
_e('wrong', 'no_positions', "Leaves out the position table, so the model cannot tell positions apart.",
   _v(_GF, ("x = model.embed(idx) + model.positions.table.weight[:L]", "x = model.embed(idx)")), 'any ids')
_e('wrong', 'positions_from_one', "Adds the position rows 1..L instead of 0..L-1.",
   _v(_GF, ("model.positions.table.weight[:L]", "model.positions.table.weight[1:L + 1]")), 'L < max_len')
_e('wrong', 'positions_by_token', "Looks the position table up with the token ids instead of the positions.",
   _v(_GF, ("model.positions.table.weight[:L]", "model.positions.table(idx)")), 'ids < max_len')
_e('wrong', 'mask_transposed', "Builds the mask with triu, so each query sees the keys after it instead of before it.",
   _v(_GF, (".tril()", ".triu()")), 'L >= 2')
_e('wrong', 'no_mask', "Runs the layers without a mask, so every position reads the future.",
   _v(_GF, ("for layer in model.layers: x = layer(x, mask)", "for layer in model.layers: x = layer(x, None)")), 'L >= 2')
_e('wrong', 'additive_mask', "Passes an additive float mask (0 and -inf) where the layers expect a boolean one, True where a query may attend.",
   _v(_GF, ("mask = torch.ones(L, L, dtype=torch.bool, device=idx.device).tril()",
            "mask = torch.full((L, L), float('-inf'), device=idx.device).triu(1)")), 'L >= 2')
_e('wrong', 'mask_on_cpu', "Builds the mask on the CPU whatever the ids' device, which the exercise asks not to do (it fails for ids on a GPU).",
   _v(_GF, ("torch.ones(L, L, dtype=torch.bool, device=idx.device)", "torch.ones(L, L, dtype=torch.bool)")), 'ids on another device (a GPU, or meta)')
_e('wrong', 'scaled_embedding', "Multiplies the token embedding by sqrt(d_model) as the encoder-decoder's embedding does; the GPT's is not scaled.",
   _v(_GF, ("x = model.embed(idx) + ", "x = model.embed(idx) * model.embed.embedding_dim ** 0.5 + ")), 'any ids')
_e('wrong', 'calls_model', "Calls model(idx), which the exercise forbids (the logits must come from the pieces).",
   '''import torch
def gpt_forward(model, idx):
    return model(idx)
''', 'contract')
_e('wrong', 'norm_every_layer', "Applies the final norm after every block instead of once at the end.",
   _v(_GF, ("for layer in model.layers: x = layer(x, mask)", "for layer in model.layers: x = model.norm(layer(x, mask))")), 'any ids')
_e('correct', 'positions_module', "Adds the positions through the module model.positions(...) instead of its table's weight.",
   '''import torch
def gpt_forward(model, idx):
    x = model.positions(model.embed(idx))
    L = idx.shape[1]
    mask = torch.tril(torch.ones((L, L), device=idx.device)).bool()
    for block in model.layers:
        x = block(x, mask)
    return model.head(model.norm(x))
''')
_e('correct', 'table_lookup_arange', "Looks the positions up with table(arange(L)) and broadcasts a (1, 1, L, L) mask from causal_mask.",
   '''import torch
from transformer_tutorial.masks import causal_mask
def gpt_forward(model, idx):
    B, L = idx.shape
    pos = torch.arange(L, device=idx.device)
    x = model.embed(idx) + model.positions.table(pos)[None]
    mask = causal_mask(L, device=idx.device)
    for layer in model.layers:
        x = layer(x, mask)
    return model.head(model.norm(x))
''')
_e('correct', 'compare_aranges', "Builds the mask by comparing two aranges (j <= i).",
   '''import torch
def gpt_forward(model, idx):
    L = idx.size(-1)
    i = torch.arange(L, device=idx.device)
    mask = i[None, :] <= i[:, None]
    h = model.embed(idx) + model.positions.table.weight[:L].unsqueeze(0)
    for layer in model.layers:
        h = layer(h, mask)
    return model.head(model.norm(h))
''')

_TK = '''import math
import torch
def top_k_filter(logits, k):
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf)
'''
_e = lambda *a, **k: _add('ex13', 'top_k_filter', *a, **k)
_e('wrong', 'returns_mask', "Returns the boolean mask of the kept entries instead of the filtered logits.",
   _v(_TK, ("return logits.masked_fill(logits < kth, -math.inf)", "return logits >= kth")), 'any logits')
_e('wrong', 'in_place', "Writes -inf into the caller's logits in place (and returns them).",
   _v(_TK, ("return logits.masked_fill(logits < kth, -math.inf)", "logits[logits < kth] = -math.inf\n    return logits")), "any logits: the caller's tensor changes")
_e('wrong', 'returns_values', "Returns the k largest values themselves, shape (..., k), instead of the V logits with the others at -inf.",
   _v(_TK, ("return logits.masked_fill(logits < kth, -math.inf)", "return logits.topk(k, dim=-1).values")), 'any k < V')
_e('wrong', 'off_by_one', "Takes the threshold from the ascending sort at index k, i.e. the (k+1)-th smallest, not the k-th largest.",
   _v(_TK, ("kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.sort(dim=-1, descending=True).values[..., k:k + 1]")), 'k < V: keeps k + 1')
_e('wrong', 'dim_one', "Takes the top k over axis 1, which is the last axis only for 2-D logits.",
   _v(_TK, ("logits.topk(k, dim=-1)", "logits.topk(k, dim=1)")), 'logits of shape (2, 3, 5), k=2')
_e('wrong', 'global_topk', "Keeps the k largest of the whole tensor instead of the k largest of each row.",
   _v(_TK, ("kth = logits.topk(k, dim=-1).values[..., -1:]", "kth = logits.flatten().topk(k).values[-1]")), 'two rows')
_e('wrong', 'zero_not_inf', "Sets the dropped logits to 0 instead of -inf, so they keep probability.",
   _v(_TK, ("masked_fill(logits < kth, -math.inf)", "masked_fill(logits < kth, 0.0)")), 'any k < V')
_e('wrong', 'large_negative', "Sets the dropped logits to -1e9 instead of -inf.",
   _v(_TK, ("masked_fill(logits < kth, -math.inf)", "masked_fill(logits < kth, -1e9)")), 'any k < V')
_e('wrong', 'drops_kth', "Drops logits less than or equal to the k-th largest, so only k - 1 survive.",
   _v(_TK, ("logits < kth", "logits <= kth")), 'any k')
_e('wrong', 'float32', "Converts the logits to float32, so float64 logits come back in float32.",
   _v(_TK, ("    kth = logits", "    logits = logits.float()\n    kth = logits")), 'float64 logits')
_e('correct', 'sort_threshold', "Takes the threshold from a descending sort at index k - 1.",
   '''import torch
def top_k_filter(logits, k):
    thresh = torch.sort(logits, dim=-1, descending=True).values[..., k - 1].unsqueeze(-1)
    return torch.where(logits < thresh, torch.full_like(logits, float('-inf')), logits)
''')
_e('correct', 'clone_then_index', "Clones the logits and writes -inf into the clone with boolean indexing.",
   '''import math
import torch
def top_k_filter(logits, k):
    out = logits.clone()
    kth = torch.topk(logits, k, dim=-1).values.min(dim=-1, keepdim=True).values
    out[out < kth] = -math.inf
    return out
''')
_e('correct', 'kthvalue', "Finds the threshold with kthvalue on the negated logits.",
   '''import math
import torch
def top_k_filter(logits, k):
    kth = -torch.kthvalue(-logits, k, dim=-1, keepdim=True).values
    return logits.masked_fill(logits < kth, -math.inf)
''')

_TP = '''import math
import torch
def top_p_filter(logits, p):
    ranked, order = logits.sort(dim=-1, descending=True)
    probs = ranked.softmax(-1)
    above = probs.cumsum(-1) - probs
    dropped = (above >= p).scatter(-1, order, above >= p)
    return logits.masked_fill(dropped, -math.inf)
'''
_e = lambda *a, **k: _add('ex13', 'top_p_filter', *a, **k)
_e('wrong', 'drops_the_token_reaching_p', "Keeps only the tokens whose cumulative probability, their own included, is below p, dropping the token that reaches p.",
   _v(_TP, ("above = probs.cumsum(-1) - probs", "above = probs.cumsum(-1)")), 'probs [0.5, 0.3, 0.2], p=0.6')
_e('wrong', 'boundary_strict', "Drops a token only when the mass above it exceeds p, so when that mass equals p exactly it keeps one token too many.",
   _v(_TP, ("dropped = (above >= p).scatter(-1, order, above >= p)", "dropped = (above > p).scatter(-1, order, above > p)")), 'probs [0.5, 0.25, 0.25], p=0.5')
_e('wrong', 'sorted_order', "Returns the filtered logits in the sorted order instead of the vocabulary's.",
   _v(_TP, ("    dropped = (above >= p).scatter(-1, order, above >= p)\n    return logits.masked_fill(dropped, -math.inf)\n",
            "    return ranked.masked_fill(above >= p, -math.inf)\n")), 'logits not already sorted')
_e('wrong', 'gather_not_scatter', "Puts the mask back with gather(order) where the inverse permutation (scatter) is needed.",
   _v(_TP, ("dropped = (above >= p).scatter(-1, order, above >= p)", "dropped = (above >= p).gather(-1, order)")), 'logits [1, 3, 2, 0], p=0.5')
_e('wrong', 'no_sort', "Takes the cumulative sum in the vocabulary's order, without sorting by probability.",
   '''import math
import torch
def top_p_filter(logits, p):
    probs = logits.softmax(-1)
    above = probs.cumsum(-1) - probs
    return logits.masked_fill(above >= p, -math.inf)
''', 'logits [0, 3, 1], p=0.5')
_e('wrong', 'in_place', "Writes -inf into the caller's logits in place.",
   _v(_TP, ("return logits.masked_fill(dropped, -math.inf)", "logits.masked_fill_(dropped, -math.inf)\n    return logits")), "any p < 1: the caller's tensor changes")
_e('wrong', 'sort_dim_one', "Sorts along axis 1, which is the last axis only for 2-D logits.",
   _v(_TP, ("logits.sort(dim=-1, descending=True)", "logits.sort(dim=1, descending=True)")), 'logits of shape (2, 3, 5)')
_e('wrong', 'float32', "Converts the logits to float32, so float64 logits come back in float32.",
   _v(_TP, ("    ranked, order = logits.sort", "    logits = logits.float()\n    ranked, order = logits.sort")), 'float64 logits')
_e('wrong', 'one_row_indexing', "Puts the mask back with dropped[order] (fancy indexing), which only inverts the sort for a single 1-D row.",
   '''import math
import torch
def top_p_filter(logits, p):
    ranked, order = logits.sort(dim=-1, descending=True)
    probs = ranked.softmax(-1)
    above = probs.cumsum(-1) - probs
    dropped = torch.zeros_like(above, dtype=torch.bool)
    dropped[..., order] = above >= p
    return logits.masked_fill(dropped, -math.inf)
''', 'two rows sorted differently')
_e('wrong', 'keeps_above_p', "Keeps the tokens whose own probability is at least p instead of the smallest set whose mass reaches p.",
   '''import math
import torch
def top_p_filter(logits, p):
    probs = logits.softmax(-1)
    keep = (probs >= p) | (probs == probs.amax(-1, keepdim=True))
    return logits.masked_fill(~keep, -math.inf)
''', 'probs [0.5, 0.3, 0.2], p=0.6')
_e('correct', 'exclusive_cumsum', "Writes the mass above each token as an exclusive cumulative sum (zero, then the cumsum without its last entry), as the formula reads.",
   '''import math
import torch
def top_p_filter(logits, p):
    ranked, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(ranked, dim=-1)
    c = torch.cumsum(probs, dim=-1)
    above = torch.cat([torch.zeros_like(c[..., :1]), c[..., :-1]], dim=-1)
    keep_sorted = above < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return torch.where(keep, logits, torch.full_like(logits, -math.inf))
''')
_e('correct', 'argsort_inverse', "Inverts the sort with argsort of the order and gathers the mask back.",
   '''import math
import torch
def top_p_filter(logits, p):
    order = logits.argsort(dim=-1, descending=True)
    probs = logits.softmax(-1).gather(-1, order)
    above = probs.cumsum(-1) - probs
    inverse = order.argsort(dim=-1)
    dropped = (above >= p).gather(-1, inverse)
    return logits.masked_fill(dropped, float('-inf'))
''')
_e('correct', 'keeps_top_always', "Also keeps the most likely token explicitly, as the statement says (whatever p), which changes nothing for p > 0.",
   _v(_TP, ("    dropped = (above >= p).scatter(", "    drop_sorted = above >= p\n    drop_sorted[..., 0] = False\n    dropped = drop_sorted.scatter("),
           (".scatter(-1, order, above >= p)", ".scatter(-1, order, drop_sorted)")))

_SN_HELP = '''import math
import torch

def top_k_filter(logits, k):
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf)

def top_p_filter(logits, p):
    ranked, order = logits.sort(dim=-1, descending=True)
    probs = ranked.softmax(-1)
    above = probs.cumsum(-1) - probs
    dropped = (above >= p).scatter(-1, order, above >= p)
    return logits.masked_fill(dropped, -math.inf)

'''
_SN = _SN_HELP + '''def sample_next(logits, temperature, top_k, top_p, generator):
    if temperature == 0: return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None: z = top_k_filter(z, top_k)
    if top_p is not None: z = top_p_filter(z, top_p)
    return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]
'''
_e = lambda *a, **k: _add('ex13', 'sample_next', *a, **k)
_e('wrong', 'temperature_after_filters', "Divides by the temperature after top-p, which changes which tokens top-p keeps.",
   _v(_SN, ("    z = logits / temperature\n", "    z = logits\n"),
           ("    return torch.multinomial(z.softmax(-1)", "    z = z / temperature\n    return torch.multinomial(z.softmax(-1)")), 'temperature=2, top_p=0.6')
_e('wrong', 'top_p_before_top_k', "Applies top-p before top-k instead of after, the order the exercise asks for.",
   _v(_SN, ("    if top_k is not None: z = top_k_filter(z, top_k)\n    if top_p is not None: z = top_p_filter(z, top_p)\n",
            "    if top_p is not None: z = top_p_filter(z, top_p)\n    if top_k is not None: z = top_k_filter(z, top_k)\n")), 'top_k=2, top_p=0.5 on a flat distribution')
_e('wrong', 'returns_column', "Returns multinomial's (B, 1) column instead of (B,).",
   _v(_SN, ("generator=generator)[:, 0]", "generator=generator)")), 'any logits')
_e('wrong', 'multiplies_temperature', "Multiplies the logits by the temperature instead of dividing.",
   _v(_SN, ("z = logits / temperature", "z = logits * temperature")), 'temperature=0.5')
_e('wrong', 'global_rng', "Draws with the global random generator, ignoring the generator it was given.",
   _v(_SN, ("torch.multinomial(z.softmax(-1), 1, generator=generator)", "torch.multinomial(z.softmax(-1), 1)")), 'a seeded generator')
_e('wrong', 'filter_result_ignored', "Calls the filters without using what they return, so nothing is filtered.",
   _v(_SN, ("    if top_k is not None: z = top_k_filter(z, top_k)\n    if top_p is not None: z = top_p_filter(z, top_p)\n",
            "    if top_k is not None: top_k_filter(z, top_k)\n    if top_p is not None: top_p_filter(z, top_p)\n")), 'top_k=1')
_e('wrong', 'top_p_zero_is_off', "Tests `if top_p:`, so top_p=0.0, which keeps only the most likely token, is read as no top-p at all.",
   _v(_SN, ("if top_p is not None:", "if top_p:")), 'top_p=0.0: the statement keeps the most likely token alone, so the draw must be the argmax (the reference solution raises there: its top_p_filter drops every token at p=0)')
_e('wrong', 'top_k_zero_guard', "Tests `if top_k:` and `if top_p:` to skip unset options, reading top_k=0 or top_p=0.0 as off; and also divides when temperature is 0.",
   _SN_HELP + '''def sample_next(logits, temperature, top_k, top_p, generator):
    z = logits / max(temperature, 1e-8)
    if top_k: z = top_k_filter(z, top_k)
    if top_p: z = top_p_filter(z, top_p)
    return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]
''', 'temperature=0 on tied maxima (argmax picks the first; the draw may not), or top_p=0.0')
_e('wrong', 'in_place_temperature', "Divides the caller's logits by the temperature in place.",
   _v(_SN, ("    z = logits / temperature\n", "    logits /= temperature\n    z = logits\n")), "temperature=2: the caller's tensor changes")
_e('wrong', 'squeeze_batch_of_one', "Squeezes multinomial's output, which for a batch of one gives a 0-dim tensor instead of shape (1,).",
   _v(_SN, ("generator=generator)[:, 0]", "generator=generator).squeeze()")), 'B=1')
_e('wrong', 'argmax_keepdim', "Returns the argmax with keepdim=True at temperature 0, shape (B, 1).",
   _v(_SN, ("if temperature == 0: return logits.argmax(-1)", "if temperature == 0: return logits.argmax(-1, keepdim=True)")), 'temperature=0')
_e('wrong', 'softmax_batch_axis', "Takes the softmax over axis 0, the batch, instead of the vocabulary.",
   _v(_SN, ("z.softmax(-1)", "z.softmax(0)")), 'B=2')
_e('correct', 'exp_normalize', "Normalizes by hand, exp(z - max) / sum, before multinomial.",
   _v(_SN, ("return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]",
            "e = torch.exp(z - z.amax(-1, keepdim=True))\n    return torch.multinomial(e / e.sum(-1, keepdim=True), 1, generator=generator).view(-1)")))
_e('correct', 'skip_temperature_one', "Skips the division when the temperature is 1 and checks `temperature <= 0` for the greedy case.",
   _v(_SN, ("    if temperature == 0: return logits.argmax(-1)\n    z = logits / temperature\n",
            "    if temperature <= 0:\n        return torch.argmax(logits, dim=-1)\n    z = logits if temperature == 1 else logits / temperature\n")))
_e('correct', 'probs_multinomial_squeeze_last', "Takes the probabilities with F.softmax and squeezes only the last axis of the draw.",
   _v(_SN, ("return torch.multinomial(z.softmax(-1), 1, generator=generator)[:, 0]",
            "probs = torch.nn.functional.softmax(z, dim=-1)\n    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)")))
