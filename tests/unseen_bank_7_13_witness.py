"""Sanity run of the unseen bank for exercises 7-13 against the exercises' reference solutions, without any check.

Every 'wrong' entry must differ from the reference on at least one of the inputs below (its output, its type, dtype
or shape, an exception where the reference has none or the reverse, or a change to the caller's inputs), unless its
witness is 'contract' (values agree; the statement forbids what it does). Every 'correct' entry must agree on all.
Run: PYTHONPATH=. python tests/unseen_bank_7_13_witness.py   (a few seconds on a CPU; not a pytest file).
"""
import copy, math, sys
import torch
sys.path.insert(0, '.')
from tests import unseen_bank_7_13 as bank

REF_SRC = {'label_smoothed_loss': bank._LS, 'warmup_schedule': bank._WS, 'online_softmax': bank._OS, 'tiled_attention': bank._TA,
           'tiled_attention_backward': bank._TB, 'merge': bank._MG, 'encode': bank._EN, 'train_step': bank._TS, 'train_loop': bank._TL,
           'cached_self_attention': bank._CS, 'greedy_decode_cached': bank._GD, 'length_penalty': 'def length_penalty(length, alpha):\n    return ((5 + length) / 6) ** alpha\n',
           'beam_search': bank._BS, 'gpt_forward': bank._GF, 'top_k_filter': bank._TK, 'top_p_filter': bank._TP, 'sample_next': bank._SN}

def load(src, name):
    ns = {}
    exec(compile(src, f'<{name}>', 'exec'), ns)
    return ns[name]

def same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)): return False
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device: return False
        if a.device.type == 'meta': return True
        if not a.is_floating_point(): return torch.equal(a, b)
        tol = 1e-12 if a.dtype == torch.float64 else 2e-5
        return bool(torch.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return type(a) == type(b) and (a == b or math.isclose(a, b, rel_tol=1e-9) or (math.isnan(a) and math.isnan(b)))
    return type(a) == type(b) and a == b

def snapshot(args): return [copy.deepcopy(x) if isinstance(x, (torch.Tensor, list, dict)) else None for x in args]

def unchanged(args, snap):
    return all(s is None or same(a, s) if not isinstance(a, dict) else a == s for a, s in zip(args, snap))

# ---- inputs: each case is a function returning (args, observe), where observe(result, args) is what is compared ----
g = lambda seed: torch.Generator().manual_seed(seed)
plain = lambda r, args: r

def ls_cases():
    t = torch.tensor([[3, 1, 4, 0, 0], [2, 2, 1, 5, 0]])
    out = []
    for dt in (torch.float32, torch.float64):
        out.append(lambda dt=dt: ((torch.randn(2, 5, 6, generator=g(0), dtype=dt), t.clone(), 0, 0.1), plain))
    out.append(lambda: ((torch.randn(2, 5, 6, generator=g(1)) * 200, t.clone(), 0, 0.1), plain))
    out.append(lambda: ((torch.randn(2, 5, 6, generator=g(2)), torch.tensor([[3, 0, 3, 1, 3], [2, 3, 0, 5, 3]]), 3, 0.2), plain))
    return out

def ws_cases(): return [lambda s=s, w=w: ((s, w), plain) for w in (1, 4, 10) for s in (0, 1, 2, 3, 4, 5, 9, 10, 11, 50)]

def os_cases():
    return [lambda: ((torch.randn(3, 7, generator=g(0)), 3), plain),
            lambda: ((torch.randn(2, 5, generator=g(1), dtype=torch.float64), 2), plain),
            lambda: ((torch.tensor([[-math.inf, -math.inf, 1., 2.], [0., 1., 2., 3.]]), 2), plain),
            lambda: ((torch.tensor([[-math.inf, -math.inf, -300., -301.]]), 2), plain),
            lambda: ((torch.randn(2, 3, 5, generator=g(2)), 2), plain),
            lambda: ((torch.randn(2, 5, generator=g(3)), 8), plain)]

def ta_cases():
    out = []
    for L, block, causal, dt in ((6, 2, False, torch.float32), (6, 2, True, torch.float32), (5, 2, True, torch.float32), (6, 4, True, torch.float64), (5, 3, False, torch.float64)):
        out.append(lambda L=L, block=block, causal=causal, dt=dt: ((torch.randn(1, 2, L, 4, generator=g(L), dtype=dt), torch.randn(1, 2, L, 4, generator=g(L + 1), dtype=dt),
                                                                  torch.randn(1, 2, L, 6, generator=g(L + 2), dtype=dt), causal, block), plain))
    out.append(lambda: ((torch.full((1, 1, 4, 4), 10.), torch.full((1, 1, 4, 4), -15.), torch.randn(1, 1, 4, 4, generator=g(9)), False, 2), plain))
    return out

def tb_inputs(L, dv, causal, block, dt, seed):
    q, k = torch.randn(1, 2, L, 4, generator=g(seed), dtype=dt), torch.randn(1, 2, L, 4, generator=g(seed + 1), dtype=dt)
    v, d_out = torch.randn(1, 2, L, dv, generator=g(seed + 2), dtype=dt), torch.randn(1, 2, L, dv, generator=g(seed + 3), dtype=dt)
    s = q @ k.transpose(-2, -1) / 2
    if causal: s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    lse = s.logsumexp(-1)
    return (q, k, v, s.softmax(-1) @ v, lse, d_out, causal, block)

def tb_cases():
    return [lambda a=a: (tb_inputs(*a), plain) for a in ((4, 4, False, 2, torch.float64, 0), (4, 4, True, 2, torch.float64, 5), (5, 3, True, 2, torch.float32, 9), (6, 6, False, 4, torch.float32, 1))]

def mg_cases():
    return [lambda a=a: ((list(a[0]), a[1], a[2]), lambda r, args: (r, r is args[0]))
            for a in (([5, 5, 5], (5, 5), 7), ([1, 2, 3], (1, 2), 9), ([1, 2, 1, 2], (1, 2), 9), ([15, 5], (5, 5), 7), ([3, 4], (1, 2), 9),
                      ([], (1, 2), 9), ([1], (1, 2), 9), ([0, 1, 2, 1, 2, 2], (1, 2), 256))]

def en_cases():
    trained = {}
    from collections import Counter
    ids = list('héllo wörld, héllo thé'.encode('utf-8'))
    merge = load(bank._MG, 'merge')
    for new in range(256, 266):
        c = Counter(zip(ids, ids[1:])); p = max(c, key=lambda p: (c[p], p)); trained[p] = new; ids = merge(ids, p, new)
    tests = [('é', {(195, 169): 256}), ('the', {(104, 101): 257, (116, 104): 256}), ('the', {(116, 104): 256, (104, 101): 257}),
             ('the', {(116, 104): 256, (256, 101): 257}), ('th', {(116, 104): 256}), ('a', {(1, 2): 256}), ('', {(1, 2): 256}),
             ('aaa', {(97, 97): 256}), ('a b', {(97, 32): 256}), ('heee', {(104, 101): 256, (101, 101): 257}), ('héllo wörld, thé', trained)]
    return [lambda t=t: ((t[0], dict(t[1])), plain) for t in tests]

def tiny_transformer(V=8, dropout=0.1, layers=1, seed=0):
    from transformer_tutorial.model import Transformer
    torch.manual_seed(seed)
    return Transformer(V, V, d_model=16, num_heads=2, num_layers=layers, d_ff=32, dropout=dropout, max_len=20)

def tiny_batch(pad_id, seed, B=3):
    from transformer_tutorial.training import make_batch
    gen = g(seed)
    src = torch.randint(4, 8, (B, 5), generator=gen)
    lengths = torch.tensor([5, 3, 2, 4, 1, 5][:B])
    src = src.masked_fill(torch.arange(5)[None] >= lengths[:, None], pad_id)
    tgt = torch.cat([src, torch.full((B, 1), pad_id)], 1)
    tgt[torch.arange(B), lengths] = 2
    return make_batch(src, tgt, pad_id, 1)

def ts_case(eval_first=False, stale=False, clip=1.0, pad_id=0):
    def make():
        model = tiny_transformer()
        if eval_first: model.eval()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        if stale:
            sum(p.sum() for p in model.parameters()).backward()
        torch.manual_seed(1)
        return (model, tiny_batch(pad_id, 3), opt, pad_id, clip), lambda r, args: (r, [p.detach().clone() for p in args[0].parameters()], args[0].training)
    return make

def ts_cases(): return [ts_case(), ts_case(eval_first=True), ts_case(stale=True), ts_case(clip=0.01), ts_case(pad_id=3)]

def tl_case(steps=3, clip=1.0, pad_id=0):
    def make():
        model = tiny_transformer()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 3, math.sqrt(3 / (s + 1))))
        seeds = iter(range(100, 200))
        def next_batch(): return tiny_batch(pad_id, next(seeds))
        torch.manual_seed(1)
        return (model, next_batch, steps, opt, sched, pad_id, clip), lambda r, args: (r, [p.detach().clone() for p in args[0].parameters()], args[4].last_epoch, args[3].param_groups[0]['lr'])
    return make

def tl_cases(): return [tl_case(), tl_case(steps=2, clip=0.01), tl_case(pad_id=3)]

def cs_cases():
    from transformer_tutorial.multi_head import MultiHeadAttention
    def make(t, H):
        torch.manual_seed(0)
        mha = MultiHeadAttention(8, H)
        return (mha, torch.randn(2, 1, 8, generator=g(1)), torch.randn(2, H, t, 8 // H, generator=g(2)), torch.randn(2, H, t, 8 // H, generator=g(3))), plain
    return [lambda t=t, H=H: make(t, H) for t in (0, 2) for H in (1, 2)]

def gd_cases():
    from transformer_tutorial.decoding import greedy_decode
    out = []
    for layers, B, seed in ((2, 3, 0), (2, 1, 1), (1, 3, 2), (2, 4, 3)):
        model = tiny_transformer(dropout=0.0, layers=layers, seed=seed).eval()
        src = torch.randint(3, 8, (B, 5), generator=g(seed))
        if B > 1: src[1, 3:] = 0
        free = greedy_decode(model, src, 8, start_id=1, end_id=None, pad_id=0)
        for end in {int(free[0, 1]), int(free[-1, 3]), 2}:
            out.append(lambda model=model, src=src, end=end: ((model, src.clone(), 8, 1, end, 0), plain))
    return out

def lp_cases():
    return [lambda a=a: (a, plain) for a in ((1, 0.6), (3, 0.6), (3, 1.0), (2, 0.0), (torch.tensor([1., 2., 5.]), 0.6), (torch.tensor([1, 2, 5]), 1.0), (torch.tensor([1., 3.]), 0.0))]

def bs_cases():
    out = []
    for seed in range(4):
        model = tiny_transformer(V=6, dropout=0.0, layers=2, seed=seed).eval()
        src = torch.randint(3, 6, (1, 5), generator=g(seed))
        for K, alpha in ((1, 0.6), (2, 0.0), (2, 0.6), (3, 0.6), (3, 3.0), (4, 2.0)):
            out.append(lambda model=model, src=src, K=K, alpha=alpha: ((model, src.clone(), 8, K, alpha, 1, 2, 0), plain))
    return out

def gf_cases():
    from transformer_tutorial.gpt import GPT
    torch.manual_seed(0)
    model = GPT(11, max_len=8, d_model=16, num_heads=2, num_layers=2, d_ff=32).eval()
    cases = [lambda shape=shape: ((model, torch.randint(0, 11, shape, generator=g(sum(shape)))), plain) for shape in ((2, 5), (1, 1), (1, 8), (3, 3))]
    def meta():
        m = copy.deepcopy(model).to('meta')
        return (m, torch.randint(0, 11, (2, 5)).to('meta')), plain
    return cases + [meta]

def tk_cases():
    return [lambda a=a: (a, plain) for a in ((torch.randn(2, 6, generator=g(0)), 2), (torch.randn(2, 6, generator=g(1), dtype=torch.float64), 3),
                                              (torch.randn(2, 3, 5, generator=g(2)), 2), (torch.randn(2, 6, generator=g(3)), 6), (torch.randn(2, 6, generator=g(4)), 1),
                                              (torch.tensor([[1., 3., 3., 0.]]), 2))]

def tp_cases():
    lg = lambda *p: torch.tensor([p]).log()
    return [lambda a=a: (a, plain) for a in ((torch.randn(2, 6, generator=g(0)), 0.5), (torch.randn(2, 6, generator=g(1), dtype=torch.float64), 0.9),
                                              (torch.randn(2, 3, 5, generator=g(2)), 0.7), (torch.tensor([[math.log(2), 0., 0.]]), 0.5),
                                              (lg(0.5, 0.3, 0.2), 0.6), (torch.tensor([[1., 3., 2., 0.]]), 0.5), (torch.tensor([[0., 3., 1.]]), 0.5),
                                              (torch.randn(3, 6, generator=g(3)) * 3, 0.3))]

def sn_cases():
    base = torch.randn(3, 6, generator=g(0))
    rep = torch.tensor([[3., 2.9, 1., 1., 1., 1.]]).repeat(8, 1)
    settings = [(base, 1.0, None, None), (base, 0.7, 3, None), (base, 2.0, None, 0.6), (base, 1.0, 2, 0.5), (base, 0, None, None), (base, 0.5, None, None),
                (base[:1], 1.0, None, None), (base[:1], 1.0, 1, None), (rep, 1.0, 2, 0.5), (rep, 1.0, None, 0.0), (torch.tensor([[1., 1., 0.]]), 0, None, None),
                (base.repeat(4, 1), 1.0, 1, None), (rep, 2.0, None, 0.6)]
    def make(s):
        torch.manual_seed(123)
        return (s[0].clone(), s[1], s[2], s[3], g(7)), plain
    return [lambda s=s: make(s) for s in settings]

CASES = {'label_smoothed_loss': ls_cases, 'warmup_schedule': ws_cases, 'online_softmax': os_cases, 'tiled_attention': ta_cases,
         'tiled_attention_backward': tb_cases, 'merge': mg_cases, 'encode': en_cases, 'train_step': ts_cases, 'train_loop': tl_cases,
         'cached_self_attention': cs_cases, 'greedy_decode_cached': gd_cases, 'length_penalty': lp_cases, 'beam_search': bs_cases,
         'gpt_forward': gf_cases, 'top_k_filter': tk_cases, 'top_p_filter': tp_cases, 'sample_next': sn_cases}

def run(fn, case):
    args, observe = case()
    args = tuple(copy.deepcopy(x) if isinstance(x, (torch.Tensor, list, dict)) else x for x in args)  # fresh inputs for every call
    snap = snapshot(args)
    try: res = ('ok', observe(fn(*args), args))
    except Exception as e: res = ('raised', type(e).__name__)
    return res, unchanged(args, snap)

def main(only=()):
    torch.set_num_threads(1)
    bad, cache = [], {}
    for e in bank.BANK:
        f = e['function']
        if only and f not in only: continue
        if f not in cache: cache[f] = (load(REF_SRC[f], f), CASES[f]())
        ref, cases = cache[f]
        fn = load(e['source'], f)
        diffs = []
        for i, case in enumerate(cases):
            (rk, rv), _ = run(ref, case)
            (sk, sv), kept = run(fn, case)
            if rk != sk or not kept or (rk == 'ok' and not same(rv, sv)) or (rk == 'raised' and rv != sv): diffs.append(i)
        ok = bool(diffs) if e['kind'] == 'wrong' else not diffs
        if e['kind'] == 'wrong' and e['witness'].startswith('contract'): ok = True  # forbidden by the statement, whatever the values
        print(f"{'ok ' if ok else 'BAD'} {f:26s} {e['kind']:7s} {e['name']:34s} differs on cases {diffs}")
        if not ok: bad.append((f, e['name']))
    print('problems:', bad)
    return not bad

if __name__ == '__main__':
    sys.exit(0 if main(sys.argv[1:]) else 1)
