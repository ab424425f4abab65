"""A bank of student implementations for the checks of exercise 8 (the online softmax and tiled attention): plausible
mistakes, each named with the mistake it makes, and correct versions written differently, which the checks must
accept. BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
import importlib.util
import math
import torch

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

SOFTMAX, TILED = 'check_online_softmax', 'check_tiled_attention'

# ---------------------------------------------------------------- the online softmax
def _online(x, block, rescale=lambda m, m_new: torch.exp(m - m_new), guard=True, top='running', stop=None, shift=True):
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    l = torch.zeros_like(m)
    for j in range(0, x.size(-1) if stop is None else stop(x.size(-1), block), block):
        xb = x[..., j:j + block]
        m_new = torch.maximum(m, xb.amax(-1)) if shift else torch.zeros_like(m)
        safe = m_new.masked_fill(m_new == -math.inf, 0.0) if guard else m_new
        l = l * rescale(m, safe) + torch.exp(xb - safe[..., None]).sum(-1)
        m, last = m_new, xb.amax(-1)
    return torch.exp(x - (m if top == 'running' else last)[..., None]) / l[..., None]

@_reg(SOFTMAX, correct=True)
def online_softmax_running(x, block):
    "CORRECT: running maximum and sum, -inf guarded."
    return _online(x, block)

@_reg(SOFTMAX, correct=True)
def online_softmax_logsumexp(x, block):
    "CORRECT: a running log-sum-exp, combined with logaddexp."
    lse = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    for j in range(0, x.size(-1), block):
        lse = torch.logaddexp(lse, x[..., j:j + block].logsumexp(-1))
    return torch.exp(x - lse[..., None])

@_reg(SOFTMAX, correct=True)
def online_softmax_per_row(x, block):
    "CORRECT: Python floats, one row at a time, as Milakov and Gimelshein's Algorithm 3 reads."
    out = torch.empty_like(x)
    for r, row in enumerate(x.reshape(-1, x.size(-1))):
        m, l = -math.inf, 0.0
        for j in range(0, len(row), block):
            for xi in row[j:j + block].tolist():
                m_new = max(m, xi)
                if m_new == -math.inf: continue
                l = l * math.exp(m - m_new) + math.exp(xi - m_new)
                m = m_new
        out.view(-1, x.size(-1))[r] = torch.exp(row - m) / l
    return out

@_reg(SOFTMAX)
def online_softmax_no_rescale(x, block):
    "MISTAKE: the running sum is never rescaled when the maximum grows."
    return _online(x, block, rescale=lambda m, m_new: torch.ones_like(m))

@_reg(SOFTMAX)
def online_softmax_inverted(x, block):
    "MISTAKE: rescaled by exp(m_new - m_old)."
    return _online(x, block, rescale=lambda m, m_new: torch.exp(m_new - m))

@_reg(SOFTMAX)
def online_softmax_last_max(x, block):
    "MISTAKE: the final exp uses the last block's maximum."
    return _online(x, block, top='last')

@_reg(SOFTMAX)
def online_softmax_full_blocks_only(x, block):
    "MISTAKE: range(0, L - block + 1, block): the last, shorter block is skipped."
    return _online(x, block, stop=lambda L, b: L - b + 1)

@_reg(SOFTMAX)
def online_softmax_no_max(x, block):
    "MISTAKE: exp(x) summed block by block, no maximum subtracted: overflows for large inputs."
    l = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for j in range(0, x.size(-1), block): l = l + x[..., j:j + block].exp().sum(-1)
    return x.exp() / l[..., None]

@_reg(SOFTMAX)
def online_softmax_unguarded(x, block):
    "MISTAKE: exp(m_old - m_new) with both -inf: NaN for a row whose first block is masked."
    return _online(x, block, guard=False)

@_reg(SOFTMAX)
def online_softmax_float32(x, block):
    "MISTAKE: torch.full(..., -inf) without dtype: float32 running values for a float64 input."
    m = torch.full(x.shape[:-1], -math.inf)
    l = torch.zeros_like(m)
    for j in range(0, x.size(-1), block):
        xb = x[..., j:j + block].float()
        m_new = torch.maximum(m, xb.amax(-1))
        safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        l = l * torch.exp(m - safe) + torch.exp(xb - safe[..., None]).sum(-1)
        m = m_new
    return torch.exp(x.float() - m[..., None]) / l[..., None]

@_reg(SOFTMAX)
def online_softmax_max_from_zero(x, block):
    "MISTAKE: the running maximum starts at 0, not -inf: a row whose entries are all far below 0 underflows to a sum of 0 and gives NaN."
    m = torch.zeros(x.shape[:-1], dtype=x.dtype)
    l = torch.zeros_like(m)
    for j in range(0, x.size(-1), block):
        xb = x[..., j:j + block]
        m_new = torch.maximum(m, xb.amax(-1))
        l = l * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(-1)
        m = m_new
    return torch.exp(x - m[..., None]) / l[..., None]

NAMED = {
    'online_softmax_max_from_zero': 'the running maximum started at 0, not -inf',
    'online_softmax_no_rescale': 'the running sum is not rescaled',
    'online_softmax_inverted': 'is the rescale inverted?',
    'online_softmax_last_max': "uses the last block's maximum",
    'online_softmax_full_blocks_only': 'the last, shorter block is skipped',
    'online_softmax_no_max': 'subtract the running maximum',
    'online_softmax_unguarded': 'first block is all -inf',
    'online_softmax_float32': "keep the input's dtype",
}

# ---------------------------------------------------------------- tiled attention
def _tiled(q, k, v, causal, block, scale=True, rescale_out=True, rescale_sum=True, divide=True, reads_own=True):
    Lq, Lk = q.size(-2), k.size(-2)
    m = q.new_full(q.shape[:-1], -math.inf)
    l = q.new_zeros(q.shape[:-1])
    out = q.new_zeros(*q.shape[:-1], v.size(-1))
    for j in range(0, Lk, block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1)
        if scale: s = s / math.sqrt(q.size(-1))
        if causal:
            keys, queries = torch.arange(j, min(j + block, Lk)), torch.arange(Lq)[:, None]
            s = s.masked_fill(keys > queries if reads_own else keys >= queries, -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        safe = m_new.masked_fill(m_new == -math.inf, 0.0)
        p, r = torch.exp(s - safe[..., None]), torch.exp(m - safe)
        l = (l * r if rescale_sum else l) + p.sum(-1)
        out = (out * r[..., None] if rescale_out else out) + p @ v[..., j:j + block, :]
        m = m_new
    return out / l[..., None] if divide else out

@_reg(TILED, correct=True)
def tiled_key_blocks(q, k, v, causal, block):
    "CORRECT: key blocks outside, every query at once (FlashAttention's Algorithm 1 order, without query tiles)."
    return _tiled(q, k, v, causal, block)

@_reg(TILED, correct=True)
def tiled_query_blocks_outside(q, k, v, causal, block):
    "CORRECT: query blocks outside, key blocks inside, causal tiles past the diagonal skipped (FlashAttention-2's order)."
    out = q.new_empty(*q.shape[:-1], v.size(-1))
    for i in range(0, q.size(-2), block):
        qi = q[..., i:i + block, :]
        m = qi.new_full(qi.shape[:-1], -math.inf); l = qi.new_zeros(qi.shape[:-1]); acc = qi.new_zeros(*qi.shape[:-1], v.size(-1))
        for j in range(0, k.size(-2), block):
            if causal and j > i + qi.size(-2) - 1: break
            s = qi @ k[..., j:j + block, :].transpose(-2, -1) * q.size(-1) ** -0.5
            if causal:
                s = s.masked_fill(torch.arange(j, j + s.size(-1))[None] > torch.arange(i, i + qi.size(-2))[:, None], -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            p = torch.exp(s - m_new[..., None]); r = torch.exp(m - m_new)
            l, acc, m = l * r + p.sum(-1), acc * r[..., None] + p @ v[..., j:j + block, :], m_new
        out[..., i:i + block, :] = acc / l[..., None]
    return out

@_reg(TILED, correct=True)
def tiled_course_flash(q, k, v, causal, block):
    "CORRECT: the course's flash_attention (chapter 19) with square tiles."
    from transformer_tutorial.flash import flash_attention
    return flash_attention(q, k, v, causal=causal, block_q=block, block_k=block)

@_reg(TILED, correct=True)
def tiled_logsumexp(q, k, v, causal, block):
    "CORRECT: a running log-sum-exp, the output kept normalized after every block."
    lse = q.new_full(q.shape[:-1], -math.inf); out = q.new_zeros(*q.shape[:-1], v.size(-1))
    for j in range(0, k.size(-2), block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.size(-1))
        if causal: s = s.masked_fill(torch.arange(j, j + s.size(-1))[None] > torch.arange(q.size(-2))[:, None], -math.inf)
        new = torch.logaddexp(lse, s.logsumexp(-1))
        safe = new.masked_fill(new == -math.inf, 0.0)
        out = out * torch.exp(lse - safe)[..., None] + torch.exp(s - safe[..., None]) @ v[..., j:j + block, :]
        lse = new
    return out

@_reg(TILED)
def tiled_unscaled(q, k, v, causal, block):
    "MISTAKE: no 1/sqrt(d_k)."
    return _tiled(q, k, v, causal, block, scale=False)

@_reg(TILED)
def tiled_output_not_rescaled(q, k, v, causal, block):
    "MISTAKE: the running output is not rescaled when the maximum grows."
    return _tiled(q, k, v, causal, block, rescale_out=False)

@_reg(TILED)
def tiled_sum_not_rescaled(q, k, v, causal, block):
    "MISTAKE: the running sum is not rescaled when the maximum grows."
    return _tiled(q, k, v, causal, block, rescale_sum=False)

@_reg(TILED)
def tiled_not_divided(q, k, v, causal, block):
    "MISTAKE: forgets the final division by the running sum."
    return _tiled(q, k, v, causal, block, divide=False)

@_reg(TILED)
def tiled_misses_own_key(q, k, v, causal, block):
    "MISTAKE: causal with keys j < i, the diagonal hidden."
    return _tiled(q, k, v, causal, block, reads_own=False)

@_reg(TILED)
def tiled_whole_matrix(q, k, v, causal, block):
    "MISTAKE: not tiled: the whole score matrix, then a softmax."
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal: s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return s.softmax(-1) @ v

@_reg(TILED)
def tiled_ignores_causal(q, k, v, causal, block):
    "MISTAKE: the causal flag is never used."
    return _tiled(q, k, v, False, block)

@_reg(TILED)
def tiled_max_from_zero(q, k, v, causal, block):
    "MISTAKE: the running maximum starts at 0 (q.new_zeros), not -inf: NaN for a query whose scores are all below about -88."
    Lq, Lk = q.size(-2), k.size(-2)
    m, l = q.new_zeros(q.shape[:-1]), q.new_zeros(q.shape[:-1])
    out = q.new_zeros(*q.shape[:-1], v.size(-1))
    for j in range(0, Lk, block):
        s = q @ k[..., j:j + block, :].transpose(-2, -1) / math.sqrt(q.size(-1))
        if causal: s = s.masked_fill(torch.arange(j, min(j + block, Lk)) > torch.arange(Lq)[:, None], -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        p, r = torch.exp(s - m_new[..., None]), torch.exp(m - m_new)
        l, out, m = l * r + p.sum(-1), out * r[..., None] + p @ v[..., j:j + block, :], m_new
    return out / l[..., None]

NAMED.update({
    'tiled_max_from_zero': 'the running maximum started at 0, not -inf',
    'tiled_unscaled': 'not scaled by 1/sqrt(d_k)',
    'tiled_output_not_rescaled': 'the running output is not rescaled',
    'tiled_sum_not_rescaled': 'the running sum is not rescaled',
    'tiled_not_divided': 'not divided by the running sum',
    'tiled_misses_own_key': 'does not read its own key',
    'tiled_whole_matrix': 'the full (64, 64) score matrix',
    'tiled_ignores_causal': 'causal=True is ignored',
})

# ---------------------------------------------------------------- the backward pass, tiled (going further)
BACKWARD = 'check_tiled_attention_backward'

def _backward(q, k, v, out, lse, d_out, causal, block, d=lambda p, dp, D: D, scale=True, mask=True, weights=None):
    "Key blocks outside; `d` gives the D subtracted from dP (the right one by default), `weights` another way to get P."
    c = 1 / math.sqrt(q.size(-1))
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    D = (d_out * out).sum(-1, keepdim=True)                              # (B, H, Lq, 1)
    for j in range(0, k.size(-2), block):
        kj, vj = k[..., j:j + block, :], v[..., j:j + block, :]
        s = q @ kj.transpose(-2, -1) * c
        if causal and mask: s = s.masked_fill(torch.arange(j, j + kj.size(-2)) > torch.arange(q.size(-2))[:, None], float('-inf'))
        p = torch.exp(s - lse.unsqueeze(-1)) if weights is None else weights(s)
        dp = d_out @ vj.transpose(-2, -1)
        ds = p * (dp - d(p, dp, D))
        dv[..., j:j + block, :] += p.transpose(-2, -1) @ d_out
        dq += ds @ kj * (c if scale else 1)
        dk[..., j:j + block, :] += ds.transpose(-2, -1) @ q * (c if scale else 1)
    return dq, dk, dv

@_reg(BACKWARD, correct=True)
def backward_key_blocks(q, k, v, out, lse, d_out, causal, block):
    "CORRECT: key blocks outside, D from the output."
    return _backward(q, k, v, out, lse, d_out, causal, block)

@_reg(BACKWARD, correct=True)
def backward_query_blocks(q, k, v, out, lse, d_out, causal, block):
    "CORRECT: query blocks outside, key blocks inside, einsum."
    c = q.size(-1) ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(0, q.size(-2), block):
        qi, doi, oi, li = q[..., i:i + block, :], d_out[..., i:i + block, :], out[..., i:i + block, :], lse[..., i:i + block]
        Di = torch.einsum('bhqd,bhqd->bhq', doi, oi)
        for j in range(0, k.size(-2), block):
            kj, vj = k[..., j:j + block, :], v[..., j:j + block, :]
            s = torch.einsum('bhqd,bhkd->bhqk', qi, kj) * c
            if causal:
                later = torch.arange(j, j + kj.size(-2))[None, :] > torch.arange(i, i + qi.size(-2))[:, None]
                s = s.masked_fill(later, -math.inf)
            p = (s - li[..., None]).exp()
            dv[..., j:j + block, :] += torch.einsum('bhqk,bhqd->bhkd', p, doi)
            ds = p * (torch.einsum('bhqd,bhkd->bhqk', doi, vj) - Di[..., None])
            dq[..., i:i + block, :] += torch.einsum('bhqk,bhkd->bhqd', ds, kj) * c
            dk[..., j:j + block, :] += torch.einsum('bhqk,bhqd->bhkd', ds, qi) * c
    return dq, dk, dv

@_reg(BACKWARD, correct=True)
def backward_chapter_19(q, k, v, out, lse, d_out, causal, block):
    "CORRECT: chapter 19's backward, called with square tiles."
    from transformer_tutorial.flash import _flash_backward
    return _flash_backward(q, k, v, out, lse, d_out, None, causal, block, block)

@_reg(BACKWARD)
def backward_no_d_term(q, k, v, out, lse, d_out, causal, block):
    "MISTAKE: dS = P * dP, the softmax's correction forgotten."
    return _backward(q, k, v, out, lse, d_out, causal, block, d=lambda p, dp, D: 0)

@_reg(BACKWARD)
def backward_d_from_block(q, k, v, out, lse, d_out, causal, block):
    "MISTAKE: D as rowsum(P * dP) of the current block."
    return _backward(q, k, v, out, lse, d_out, causal, block, d=lambda p, dp, D: (p * dp).sum(-1, keepdim=True))

@_reg(BACKWARD)
def backward_unscaled(q, k, v, out, lse, d_out, causal, block):
    "MISTAKE: dq and dk without 1/sqrt(d_k)."
    return _backward(q, k, v, out, lse, d_out, causal, block, scale=False)

@_reg(BACKWARD)
def backward_unmasked(q, k, v, out, lse, d_out, causal, block):
    "MISTAKE: the recomputed weights are not masked."
    return _backward(q, k, v, out, lse, d_out, causal, block, mask=False)

@_reg(BACKWARD)
def backward_whole_matrix(q, k, v, out, lse, d_out, causal, block):
    "MISTAKE: right gradients from the whole weight matrix."
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal: s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    p = torch.exp(s - lse[..., None])
    ds = p * (d_out @ v.transpose(-2, -1) - (d_out * out).sum(-1, keepdim=True))
    return ds @ k / math.sqrt(q.size(-1)), ds.transpose(-2, -1) @ q / math.sqrt(q.size(-1)), p.transpose(-2, -1) @ d_out

NAMED.update({
    'backward_no_d_term': 'the D term is missing',
    'backward_d_from_block': "D is computed from one block's weights",
    'backward_unscaled': 'lack the factor 1/sqrt(d_k)',
    'backward_unmasked': 'causal=True is ignored in the backward',
    'backward_whole_matrix': 'the full (64, 64) matrix',
})

# ---------------------------------------------------------------- the forward as a Triton kernel (going further)
# The exercise's student writes `attention_tile`, the update of one tile of keys, and the notebook's launcher runs it in
# a given kernel; the check takes the launcher. `_kernel` and `_launch` are that given code, with the tile update an
# argument; each entry below is a launcher of the kernel with a tile update written one way, or a whole kernel of its own.
# pytest imports this module after conftest.py has set TRITON_INTERPRET (without a GPU), so triton is first imported as the
# interpreter's.
TRITON = 'check_triton_tiled_attention'

if importlib.util.find_spec('triton') is not None:
    import triton
    import triton.language as tl

    @triton.jit
    def _kernel(Q, K, V, OUT, Lq, Lk, scale, tile: tl.constexpr, CAUSAL: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
                DV: tl.constexpr, DIVIDE: tl.constexpr):
        bh = tl.program_id(0)
        rows = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        feats, vfeats = tl.arange(0, D), tl.arange(0, DV)
        q = tl.load(Q + bh * Lq * D + rows[:, None] * D + feats[None, :], mask=rows[:, None] < Lq, other=0.0).to(tl.float32)
        m = tl.full([BLOCK], float('-inf'), tl.float32)
        l = tl.zeros([BLOCK], tl.float32)
        acc = tl.zeros([BLOCK, DV], tl.float32)
        for start in range(0, Lk, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            k = tl.load(K + bh * Lk * D + cols[:, None] * D + feats[None, :], mask=cols[:, None] < Lk, other=0.0).to(tl.float32)
            v = tl.load(V + bh * Lk * DV + cols[:, None] * DV + vfeats[None, :], mask=cols[:, None] < Lk, other=0.0).to(tl.float32)
            m, l, acc = tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL)
        if DIVIDE: acc = acc / l[:, None]
        tl.store(OUT + bh * Lq * DV + rows[:, None] * DV + vfeats[None, :], acc.to(OUT.dtype.element_ty), mask=rows[:, None] < Lq)

    def _launch(tile, q, k, v, causal, block, divide=True):
        B, H, Lq, d = q.shape
        Lk, dv = k.size(-2), v.size(-1)
        D, DV = (max(16, triton.next_power_of_2(n)) for n in (d, dv))
        flat = lambda x, width: torch.nn.functional.pad(x, (0, width - x.size(-1))).reshape(B * H, x.size(-2), width).contiguous()
        out = q.new_empty(B * H, Lq, DV)
        _kernel[(B * H, triton.cdiv(Lq, block))](flat(q, D), flat(k, D), flat(v, DV), out, Lq, Lk, d ** -0.5, tile, causal, block, D, DV, divide)
        return out[..., :dv].reshape(B, H, Lq, dv)

    @triton.jit
    def _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr, SCALE: tl.constexpr = True, RESCALE_ACC: tl.constexpr = True,
              RESCALE_SUM: tl.constexpr = True, PAST_END: tl.constexpr = False, DIAGONAL: tl.constexpr = True, USE_CAUSAL: tl.constexpr = True):
        "The tile update as the solution writes it, each mistake a flag."
        s = tl.dot(q, tl.trans(k), input_precision='ieee')
        if SCALE: s = s * scale
        allowed = cols[None, :] < Lk
        if PAST_END: allowed = cols[None, :] >= 0                        # every column, the zeros past Lk too
        if CAUSAL and USE_CAUSAL:
            if DIAGONAL: allowed = allowed & (cols[None, :] <= rows[:, None])
            else: allowed = allowed & (cols[None, :] < rows[:, None])
        s = tl.where(allowed, s, float('-inf'))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        if RESCALE_SUM: l = l * alpha
        if RESCALE_ACC: acc = acc * alpha[:, None]
        return m_new, l + tl.sum(p, 1), acc + tl.dot(p, v, input_precision='ieee')

    @triton.jit
    def _tile_exp2(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        "Base 2 throughout, as Triton's fused-attention tutorial writes it: scores times scale * log2(e), then exp2."
        s = tl.dot(q, tl.trans(k), input_precision='ieee') * (scale * 1.4426950408889634)
        keep = cols[None, :] < Lk
        if CAUSAL: keep = keep & (rows[:, None] >= cols[None, :])
        s = tl.where(keep, s, -float('inf'))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        corr = tl.math.exp2(m - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        return m_new, l * corr + tl.sum(p, axis=1), acc * corr[:, None] + tl.dot(p, v, input_precision='ieee')

    @triton.jit
    def _tile_zeroed_weights(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        "The maximum over the readable scores only, the weights of the others set to 0 after the exp."
        keep = cols[None, :] < Lk
        if CAUSAL: keep = keep & (cols[None, :] <= rows[:, None])
        s = tl.dot(q, tl.trans(k), input_precision='ieee') * scale
        m_new = tl.maximum(m, tl.max(tl.where(keep, s, float('-inf')), 1))
        p = tl.where(keep, tl.exp(s - m_new[:, None]), 0.0)
        alpha = tl.exp(m - m_new)
        return m_new, alpha * l + tl.sum(p, 1), alpha[:, None] * acc + tl.dot(p, v, input_precision='ieee')

    @triton.jit
    def _tile_unscaled(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, SCALE=False)

    @triton.jit
    def _tile_acc_not_rescaled(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, RESCALE_ACC=False)

    @triton.jit
    def _tile_sum_not_rescaled(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, RESCALE_SUM=False)

    @triton.jit
    def _tile_past_end(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, PAST_END=True)

    @triton.jit
    def _tile_no_diagonal(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, DIAGONAL=False)

    @triton.jit
    def _tile_no_causal(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL: tl.constexpr):
        return _tile(q, k, v, rows, cols, m, l, acc, Lk, scale, CAUSAL, USE_CAUSAL=False)

    @_reg(TRITON, correct=True)
    def triton_tile_as_solution(q, k, v, causal, block):
        "CORRECT: the solution's update, the factor exp(m - m_new) named alpha."
        return _launch(_tile, q, k, v, causal, block)

    @_reg(TRITON, correct=True)
    def triton_tile_exp2(q, k, v, causal, block):
        "CORRECT: base 2, as Triton's fused-attention tutorial computes it."
        return _launch(_tile_exp2, q, k, v, causal, block)

    @_reg(TRITON, correct=True)
    def triton_tile_zeroed_weights(q, k, v, causal, block):
        "CORRECT: the weights of unreadable keys zeroed after the exp."
        return _launch(_tile_zeroed_weights, q, k, v, causal, block)

    @_reg(TRITON, correct=True)
    def triton_chapter_19a(q, k, v, causal, block):
        "CORRECT: chapter 19a's kernel, a whole kernel of its own (strides, the diagonal's early stop, the log-sum-exp)."
        from transformer_tutorial.flash_triton import flash_attention_triton
        return flash_attention_triton(q, k, v, causal=causal, block_q=block, block_k=block)

    @_reg(TRITON)
    def triton_tile_unscaled(q, k, v, causal, block):
        "MISTAKE: the scores are not multiplied by scale."
        return _launch(_tile_unscaled, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_tile_acc_not_rescaled(q, k, v, causal, block):
        "MISTAKE: acc is not multiplied by alpha."
        return _launch(_tile_acc_not_rescaled, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_tile_sum_not_rescaled(q, k, v, causal, block):
        "MISTAKE: l is not multiplied by alpha."
        return _launch(_tile_sum_not_rescaled, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_tile_reads_past_end(q, k, v, causal, block):
        "MISTAKE: no mask cols < Lk: the zeros tl.load puts past the end count in the softmax."
        return _launch(_tile_past_end, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_tile_misses_own_key(q, k, v, causal, block):
        "MISTAKE: causal with cols < rows: query 0 reads nothing, exp(-inf - (-inf)) is NaN."
        return _launch(_tile_no_diagonal, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_tile_ignores_causal(q, k, v, causal, block):
        "MISTAKE: CAUSAL is never used in the tile."
        return _launch(_tile_no_causal, q, k, v, causal, block)

    @_reg(TRITON)
    def triton_kernel_not_divided(q, k, v, causal, block):
        "MISTAKE: a kernel that stores acc without dividing it by l."
        return _launch(_tile, q, k, v, causal, block, divide=False)

    NAMED.update({
        'triton_tile_unscaled': 'not scaled by 1/sqrt(d_k)',
        'triton_tile_acc_not_rescaled': 'the running output is not rescaled',
        'triton_tile_sum_not_rescaled': 'the running sum is not rescaled',
        'triton_tile_reads_past_end': 'the keys past Lk = 27 in the last tile are read',
        'triton_tile_misses_own_key': 'does not read its own key',
        'triton_tile_ignores_causal': 'causal=True is ignored',
        'triton_kernel_not_divided': 'not divided by the running sum',
    })
