"Mutation tests for the self-checks: references pass, every registered mutant is rejected with its diagnosis."
import math
import re

import pytest
import torch
from torch import nn

from transformer_tutorial import checks
from transformer_tutorial.pitfalls import MUTANTS, diagnose
from transformer_tutorial.attention import scaled_dot_product_attention
from transformer_tutorial.masks import padding_mask, causal_mask
from transformer_tutorial.multi_head import split_heads, merge_heads, MultiHeadAttention
from transformer_tutorial.positional import sinusoidal_positional_encoding
from transformer_tutorial.layer_norm import LayerNorm
from transformer_tutorial.feed_forward import PositionwiseFeedForward
from transformer_tutorial.layers import EncoderLayer, DecoderLayer
from transformer_tutorial.training import sequence_loss, warmup_inverse_sqrt, train_step, train
from transformer_tutorial.flash import online_softmax, flash_attention, _flash_backward
from transformer_tutorial.tokenizer import BPETokenizer, merge_pair
from transformer_tutorial.gpt import GPT
from transformer_tutorial.sampling import top_k_filter, top_p_filter, sample_next
from transformer_tutorial.decoding import greedy_decode, beam_search, length_penalty, _attend


def _package_encode(text, merges):
    "The package's tokenizer on `merges` ((id, id) -> new id), its pre-tokenizer keeping the text whole."
    ranked = sorted(merges.items(), key=lambda kv: kv[1])
    vocab = {i: bytes([i]) for i in range(256)}
    for (a, b), new_id in ranked: vocab[new_id] = vocab[a] + vocab[b]
    return BPETokenizer(vocab, [(a, b, new_id) for (a, b), new_id in ranked], pattern=r'(?s).+').encode(text)

def _triton_kernel(q, k, v, causal, block):
    "Chapter 19a's Triton kernel with square tiles, imported when called: Triton is optional, and conftest.py sets TRITON_INTERPRET first."
    from transformer_tutorial.flash_triton import flash_attention_triton
    return flash_attention_triton(q, k, v, causal=causal, block_q=block, block_k=block)

def _package_cached_step(mha, y, past_k, past_v):
    "The package's attention of decoding (`_attend`) over the cache with this position's key and value appended."
    k = torch.cat([past_k, split_heads(mha.w_k(y), mha.num_heads)], 2)
    v = torch.cat([past_v, split_heads(mha.w_v(y), mha.num_heads)], 2)
    return _attend(mha, y, k, v), k, v

REFERENCES = {
    'check_scaled_dot_product_attention': scaled_dot_product_attention,
    'check_padding_mask': padding_mask,
    'check_causal_mask': causal_mask,
    'check_split_heads': split_heads,
    'check_merge_heads': merge_heads,
    'check_multi_head_attention': MultiHeadAttention,
    'check_positional_encoding': sinusoidal_positional_encoding,
    'check_layer_norm': LayerNorm,
    'check_feed_forward': PositionwiseFeedForward,
    'check_encoder_layer': EncoderLayer,
    'check_decoder_layer': DecoderLayer,
    'check_label_smoothed_loss': sequence_loss,
    'check_warmup_schedule': lambda step, warmup: warmup_inverse_sqrt(warmup)(step),
    'check_train_step': lambda model, batch, optimizer, pad_id, clip: (model.train(), train_step(model, batch, optimizer, pad_id, clip=clip))[1][0],
    'check_train_loop': lambda model, next_batch, steps, optimizer, scheduler, pad_id, clip:
        train(model, next_batch, steps, optimizer, scheduler, pad_id, clip=clip, progress=False)['loss'],
    'check_online_softmax': online_softmax,
    'check_tiled_attention': lambda q, k, v, causal, block: flash_attention(q, k, v, causal=causal, block_q=block, block_k=block),
    'check_tiled_attention_backward': lambda q, k, v, out, lse, d_out, causal, block: _flash_backward(q, k, v, out, lse, d_out, None, causal, block, block),
    'check_triton_tiled_attention': _triton_kernel,
    'check_merge': merge_pair,
    'check_encode': _package_encode,
    'check_gpt_forward': GPT.forward,                  # the class's: the check makes the model's own forward refuse to run
    'check_top_k_filter': top_k_filter,
    'check_top_p_filter': top_p_filter,
    'check_sample_next': sample_next,
    'check_cached_self_attention': _package_cached_step,
    'check_greedy_decode_cached': lambda model, src, max_len, start_id, end_id, pad_id: greedy_decode(model, src, max_len, start_id, end_id, pad_id),
    'check_length_penalty': length_penalty,
    'check_beam_search': lambda model, src, max_len, beam_size, alpha, start_id, end_id, pad_id: beam_search(model, src, max_len, beam_size, alpha, start_id, end_id, pad_id),
}


def test_every_check_has_a_reference_and_mutants():
    assert set(REFERENCES) == set(checks.__all__)
    assert set(REFERENCES) == {c for c, _, _ in MUTANTS.values()}


@pytest.mark.parametrize('check', sorted(REFERENCES))
def test_reference_passes(check, capsys):
    if check == 'check_triton_tiled_attention': pytest.importorskip('triton')
    getattr(checks, check)(REFERENCES[check])
    out = capsys.readouterr().out
    assert out.startswith('✓ ') and 'passes' in out and out.count('\n') == 1


@pytest.mark.parametrize('name', sorted(MUTANTS))
def test_mutant_rejected_with_diagnosis(name):
    check, mutant, expected = MUTANTS[name]
    if check == 'check_triton_tiled_attention': pytest.importorskip('triton')
    with pytest.raises(AssertionError) as e:
        getattr(checks, check)(mutant)
    assert expected in str(e.value)
    assert diagnose(name) == str(e.value)


def test_triton_check_skips_without_triton(monkeypatch):
    "Where Triton is not installed, the Triton check returns a one-line notice that it skipped (a notebook shows it as the cell's output) and raises nothing."
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'triton' else find_spec(name, *a))
    got = checks.check_triton_tiled_attention(None)
    assert repr(got) == str(got) == 'triton_tiled_attention: skipped, Triton is not installed here (pip install triton; Colab has it on GPU runtimes)'


def test_triton_check_skips_where_the_launcher_says_its_kernel_cannot_run():
    "Exercise 8's launcher refuses when its kernel cannot run (no GPU, and an interpreter known to be wrong: Triton 3.0 with NumPy 2): the check returns that reason as its notice, not a failure."
    pytest.importorskip('triton')
    def launcher(q, k, v, causal, block): raise RuntimeError("the kernel cannot run here: Triton 3.0's interpreter with NumPy 2")
    got = checks.check_triton_tiled_attention(launcher)
    assert str(got) == "triton_tiled_attention: skipped, the kernel cannot run here: Triton 3.0's interpreter with NumPy 2"
    def broken(q, k, v, causal, block): raise RuntimeError("something else")
    with pytest.raises(AssertionError, match="raised RuntimeError: something else"): checks.check_triton_tiled_attention(broken)


def test_triton_check_names_a_jit_function_given_for_the_launcher():
    "A student who hands the check the @triton.jit tile update itself is told to pass the launcher, in one sentence."
    pytest.importorskip('triton')
    import student_bank_flash
    with pytest.raises(AssertionError, match=r"got a @triton.jit function, which runs only inside a kernel: pass the launcher"):
        checks.check_triton_tiled_attention(student_bank_flash._tile)


def test_triton_check_names_tf32_products():
    "On a GPU tl.dot multiplies float32 blocks in TF32 by default: simulated by rounding q and k to TF32's 10-bit mantissa, it is named."
    from transformer_tutorial.checks.flash import _reference_attention
    tf32 = lambda x: (x.view(torch.int32) & ~0x1FFF).view(torch.float32)   # drop the 13 low bits of float32's 23-bit mantissa
    with pytest.raises(AssertionError, match=r"right to about 1e-2, not to float32's precision: on a GPU tl.dot multiplies float32 blocks in TF32"):
        checks.check_triton_tiled_attention(lambda q, k, v, causal, block: _reference_attention(tf32(q), tf32(k), v, causal))


def test_diagnose_raises_on_a_correct_implementation(monkeypatch):
    monkeypatch.setitem(MUTANTS, 'not_a_mutant', ('check_causal_mask', causal_mask, ''))
    with pytest.raises(AssertionError, match='accepted the mutant not_a_mutant'):
        diagnose('not_a_mutant')


# ---- students name and order their parameters as they like

class FusedQKVAttention(nn.Module):
    "Correct multi-head attention with one fused QKV projection and other attribute names."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.heads, self.qkv_proj, self.out_proj = num_heads, nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        d = query.size(-1)
        W, b = self.qkv_proj.weight, self.qkv_proj.bias
        q, k, v = (split_heads(t @ W[i * d:(i + 1) * d].T + b[i * d:(i + 1) * d], self.heads) for i, t in enumerate((query, key, value)))
        o, w = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(merge_heads(o)), w


class OutFirstAttention(nn.Module):
    "Correct attention, no biases, output projection registered first, renamed attributes."
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.proj_out = nn.Linear(d_model, d_model, bias=False)
        self.to_q, self.to_k, self.to_v = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(f(t), self.h) for f, t in ((self.to_q, query), (self.to_k, key), (self.to_v, value)))
        o, w = scaled_dot_product_attention(q, k, v, mask)
        return self.proj_out(merge_heads(o)), w


class GammaBetaNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.gamma, self.beta, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps

    def forward(self, x):
        mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


class SequentialFFN(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))

    def forward(self, x): return self.net(x)


class StudentEncoderLayer(nn.Module):
    "Pre-LN encoder layer: norms registered first, fused attention, nn.LayerNorm, different names."
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.ln_ff, self.ln_attn = nn.LayerNorm(d_model), GammaBetaNorm(d_model)
        self.attention, self.mlp = FusedQKVAttention(d_model, num_heads), SequentialFFN(d_model, d_ff)

    def forward(self, x, mask=None):
        y = self.ln_attn(x)
        x = x + self.attention(y, y, y, mask)[0]
        return x + self.mlp(self.ln_ff(x))


class StudentDecoderLayer(nn.Module):
    "Pre-LN decoder layer: cross-attention registered before self-attention, renamed everything."
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.enc_dec, self.masked = OutFirstAttention(d_model, num_heads), FusedQKVAttention(d_model, num_heads)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(3))
        self.mlp = SequentialFFN(d_model, d_ff)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        y = self.norms[0](x); x = x + self.masked(y, y, y, tgt_mask)[0]
        y = self.norms[1](x); x = x + self.enc_dec(y, memory, memory, memory_mask)[0]
        return x + self.mlp(self.norms[2](x))


@pytest.mark.parametrize('check,cls', [
    ('check_multi_head_attention', FusedQKVAttention),
    ('check_multi_head_attention', OutFirstAttention),
    ('check_layer_norm', GammaBetaNorm),
    ('check_layer_norm', nn.LayerNorm),
    ('check_feed_forward', SequentialFFN),
    ('check_encoder_layer', StudentEncoderLayer),
    ('check_decoder_layer', StudentDecoderLayer),
])
def test_renamed_student_classes_pass(check, cls, capsys):
    getattr(checks, check)(cls)
    assert capsys.readouterr().out.startswith('✓ ')


# ---- the checks' own references are the package's, and failures are specific

def test_functional_references_match_the_modules():
    ref = checks.attention._fill_(MultiHeadAttention(12, 3), seed=0)
    q, kv, m = torch.randn(2, 4, 12), torch.randn(2, 6, 12), checks.attention._row_mask(2, 1, 1, 6, seed=1)
    torch.testing.assert_close(checks.attention._mha(ref, q, kv, kv, m)[0], ref(q, kv, kv, m)[0], atol=1e-6, rtol=1e-5)
    for Layer, args in ((EncoderLayer, ()), (DecoderLayer, (torch.randn(2, 7, 12),))):
        layer = checks.attention._fill_(Layer(12, 3, 20), seed=2).eval()
        x = torch.randn(2, 5, 12)
        kw = dict(memory=args[0]) if args else {}
        with torch.no_grad():
            torch.testing.assert_close(checks.layers._layer_ref(layer, x, **kw), layer(x, *args), atol=1e-6, rtol=1e-5)


def test_exception_in_student_code_names_the_shapes():
    def broken(query, key, value, mask=None): return query @ key, None
    with pytest.raises(AssertionError, match=r"raised RuntimeError.*\(2, 3, 4, 8\)"):
        checks.check_scaled_dot_product_attention(broken)


def test_wrong_output_shape_names_the_expected_shape():
    with pytest.raises(AssertionError, match=r"expected \(1, 1, size, size\)"):
        checks.check_causal_mask(lambda size: torch.ones(size, dtype=torch.bool))
    with pytest.raises(AssertionError, match=r"returned \(weights, output\)"):
        checks.check_scaled_dot_product_attention(lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[::-1])


def test_pytorch_multihead_attention_is_rejected_for_its_averaged_weights():
    with pytest.raises(AssertionError, match=r"weights have shape \(2, 5, 5\), expected \(2, 1, 5, 5\)"):
        checks.check_multi_head_attention(lambda d, h: nn.MultiheadAttention(d, h, batch_first=True))


def test_checks_leave_the_global_rng_alone():
    torch.manual_seed(123); a = torch.rand(3)
    torch.manual_seed(123); checks.check_layer_norm(LayerNorm); checks.check_multi_head_attention(MultiHeadAttention); b = torch.rand(3)
    assert torch.equal(a, b)


@pytest.mark.parametrize('transposed_for, seen', [
    (lambda n, d: n != d, 'returned the table transposed'),                                  # the first size, (50, 16) at run seed 0
    (lambda n, d: n == d, 'for max_len = 8, d_model = 8'),                                   # square: the shape is right
    (lambda n, d: n == 1, 'transposed, shape (2, 1)'),                                       # one position
], ids=['non-square', 'square', 'one-position'])
def test_pe_transposed_only_for_some_sizes(transposed_for, seen):
    "A table transposed only when not square, only when square or only for one position is rejected at that size."
    pe = lambda n, d: sinusoidal_positional_encoding(n, d).T if transposed_for(n, d) else sinusoidal_positional_encoding(n, d)
    with pytest.raises(AssertionError, match='transposed|swapped') as e:
        checks.check_positional_encoding(pe)
    assert seen in str(e.value)


def test_code_run_before_the_import_cell_gets_told_to_run_from_the_top():
    "A student's function that uses `torch` before the notebook's import cell ran: the check names the fix."
    import pytest
    from transformer_tutorial.checks import check_causal_mask
    namespace = {}
    exec("def causal_mask(size):\n    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]\n", namespace)  # no torch here
    with pytest.raises(AssertionError, match=r"NameError: name 'torch' is not defined.*run the notebook's cells from the top"):
        check_causal_mask(namespace["causal_mask"])


# ---- blind spots: degenerate inputs, dtypes, side effects, parameters shared between sublayers
# The mutants live in chapter 14a (pitfalls.layers, "Right on the usual inputs, wrong at the edges");
# test_mutant_rejected_with_diagnosis runs the checks on them.
from transformer_tutorial.pitfalls import (attention_in_float32, attention_squeezed, padding_mask_from_lengths,
                                           split_heads_length_from_view, LayerNormNoEps, EncoderLayerOneNorm)


class _DecoderNormsRegisteredBackwards(nn.Module):
    "A correct decoder layer whose norms are registered in the reverse of the order they run: must pass."
    def __init__(self, d_model, num_heads, d_ff):
        super().__init__()
        self.norm_ff, self.norm_cross, self.norm_self = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model, num_heads)
        self.ff = PositionwiseFeedForward(d_model, d_ff)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        y = self.norm_self(x); x = x + self.self_attn(y, y, y, tgt_mask)[0]
        y = self.norm_cross(x); x = x + self.cross_attn(y, memory, memory, memory_mask)[0]
        return x + self.ff(self.norm_ff(x))


def test_blind_spot_mutants_pass_the_old_probes():
    "Each blind-spot mutant is right on the ordinary inputs, so only the new probes can catch it (the tests above can fail)."
    q, k, v = (torch.randn(2, 3, 4, 8, dtype=torch.float64) for _ in range(3))
    for f in (attention_in_float32, attention_squeezed):
        torch.testing.assert_close(f(q, k, v)[0].double(), scaled_dot_product_attention(q, k, v)[0], atol=1e-5, rtol=1e-5)
    right_padded = torch.tensor([[5, 3, 9, 2, 0], [7, 4, 0, 0, 0]])
    assert torch.equal(padding_mask_from_lengths(right_padded, 0), padding_mask(right_padded, 0))
    x = torch.randn(2, 5, 8) * 3 + 1
    assert torch.equal(split_heads_length_from_view(x, 4), split_heads(x, 4))
    torch.testing.assert_close(LayerNormNoEps(8)(x), nn.LayerNorm(8, eps=1e-12)(x), atol=1e-5, rtol=1e-5)
    torch.manual_seed(0)
    layer, ours = EncoderLayer(8, 2, 16).eval(), EncoderLayerOneNorm(8, 2, 16).eval()
    ours.load_state_dict(layer.state_dict())
    torch.testing.assert_close(ours(x), layer(x))   # equal while the two norms hold equal parameters


def _padding_mask_ne(tokens, pad_id): return tokens.ne(pad_id).view(tokens.size(0), 1, 1, tokens.size(1))
def _split_heads_chunks(x, num_heads):
    if x.size(-1) % num_heads: raise ValueError(f"num_heads={num_heads} does not divide d_model={x.size(-1)}")
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)
def _merge_heads_cat(x): return torch.cat(x.unbind(1), dim=-1)
def _pe_batched(max_len, d_model): return sinusoidal_positional_encoding(max_len, d_model)[None]   # (1, max_len, d_model)


@pytest.mark.parametrize('check, impl', [('check_padding_mask', _padding_mask_ne), ('check_split_heads', _split_heads_chunks),
                                         ('check_merge_heads', _merge_heads_cat), ('check_positional_encoding', _pe_batched)])
def test_correct_implementations_written_differently_pass_the_new_probes(check, impl, capsys):
    getattr(checks, check)(impl)
    assert capsys.readouterr().out.startswith('✓ ')


def test_norms_registered_in_another_order_pass(capsys):
    checks.check_decoder_layer(_DecoderNormsRegisteredBackwards)
    assert capsys.readouterr().out.startswith('✓ DecoderLayer passes')


class _FeedForwardFloat32(PositionwiseFeedForward):
    def forward(self, x): return super().forward(x).float()             # always returns float32


def test_feed_forward_that_returns_float32_is_caught():
    with pytest.raises(AssertionError, match='a float64 module and input gave torch.float32'): checks.check_feed_forward(_FeedForwardFloat32)


# ---------------------------------------------------------------- a check that a notebook cannot quietly change
def _patched(monkeypatch, where):
    "Replace what `where` (a module or class, and a name) holds by another function; this one still does what the original did (the test runner needs `isinstance`), a forger's would not."
    owner, name = where
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, **k: original(*a, **k))


@pytest.mark.parametrize('where, named', [
    ((torch, 'equal'), r'torch\.equal'),
    ((torch, 'allclose'), r'torch\.allclose'),
    ((torch.Tensor, 'masked_fill'), r'torch\.Tensor\.masked_fill'),  # a method of the C base, shadowed
    ((torch.nn.Module, '__call__'), r'torch\.nn\.\w+\.__call__'),  # every module class inherits it
    ((__import__('builtins'), 'isinstance'), r'builtins\.isinstance'),
    ((__import__('transformer_tutorial.checks.core', fromlist=['_']), '_close'), r'transformer_tutorial\.checks\.core\._close'),
    ((__import__('transformer_tutorial.checks.attention', fromlist=['_']), '_call'), r'transformer_tutorial\.checks\.attention\._call'),
    ((__import__('transformer_tutorial.masks', fromlist=['_']), 'causal_mask'), r'transformer_tutorial\.masks\.causal_mask'),
    ((__import__('transformer_tutorial.multi_head', fromlist=['_']).MultiHeadAttention, 'forward'), r'transformer_tutorial\.multi_head\.MultiHeadAttention\.forward'),
])
def test_a_check_fails_when_what_it_relies_on_was_replaced(monkeypatch, where, named):
    "What a notebook that wants a wrong mask to pass would patch: the check names it and fails, and passes again once it is put back."
    wrong = lambda size: torch.ones(1, 1, size, size, dtype=torch.bool)
    _patched(monkeypatch, where)
    with pytest.raises(AssertionError, match=f"check_causal_mask: {named} was replaced or removed in this session"):
        checks.check_causal_mask(wrong)
    monkeypatch.undo()
    with pytest.raises(AssertionError, match="shows the future|wrong values|hides|polarity|tril"): checks.check_causal_mask(wrong)
    checks.check_causal_mask(causal_mask)


def test_a_check_whose_code_was_replaced_says_so(monkeypatch):
    "The forger's deeper patch: the check's own code swapped for one that does nothing."
    inner = checks.check_causal_mask.__wrapped__
    monkeypatch.setattr(inner, '__code__', (lambda fn: None).__code__)
    with pytest.raises(AssertionError, match="was replaced or removed in this session"): checks.check_causal_mask(lambda size: None)


def test_a_check_still_passes_after_torch_wraps_its_own_functions():
    "torch wraps some of its own functions: importing torch._dynamo wraps torch.manual_seed, and running a compiled module wraps nn.Module's __init__ and __setstate__. Those are not patches, so the checks still pass; a patch of the same functions is still caught."
    import subprocess, sys
    code = ("from transformer_tutorial.checks import check_causal_mask\nimport torch, torch._dynamo\n"
            "from transformer_tutorial.masks import causal_mask\ncheck_causal_mask(causal_mask)\n"
            "torch.compile(torch.nn.Linear(4, 4), backend='eager')(torch.randn(2, 4))\n"
            "assert torch.nn.Module.__init__.__name__ == 'patched_init'\n"  # torch.compile did wrap it
            "check_causal_mask(causal_mask)\n"
            "init = torch.nn.Module.__init__\n"
            "def patched_init(self, *args, **kwargs): init(self, *args, **kwargs)\n"  # the same name is not torch's wrapper
            "torch.nn.Module.__init__ = patched_init\n"
            "try: check_causal_mask(causal_mask)\nexcept AssertionError as e: print(e)\n"
            "torch.nn.Module.__init__ = init\ncheck_causal_mask(causal_mask)\n"
            "torch.manual_seed = torch._disable_dynamo(lambda seed: None)\n"  # torch's wrapper around something else is still a patch
            "try: check_causal_mask(causal_mask)\nexcept AssertionError as e: print(e)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.splitlines()
    assert out[:2] == ["✓ causal_mask passes 12 checks"] * 2, out
    assert re.search(r"torch\.nn\.\w+\.__init__ was replaced or removed in this session", out[2]), out  # Module's, as every class without its own sees it
    assert out[3] == "✓ causal_mask passes 12 checks", out
    assert "torch.manual_seed was replaced or removed in this session" in out[4], out


def test_the_beam_search_cases_tell_every_variant_apart():
    "check_beam_search names the variant that gives the student's tokens in every case: its cases must give each variant (and the reference) its own tokens."
    from transformer_tutorial.checks.decoding import _beam, _BEAM_CASES, _BEAM_MISTAKES, _tiny_model
    model = _tiny_model()
    seen = set()
    for kw in [{}] + [kw for kw, _ in _BEAM_MISTAKES]:
        tokens = []
        for seed, end, K, alpha in _BEAM_CASES:
            src = torch.randint(3, 13, (1, 7), generator=torch.Generator().manual_seed(200 + seed))
            tokens.append(tuple(_beam(model, src, 12, K, alpha, 1, end, 0, **kw)[0].tolist()))
        assert tuple(tokens) not in seen, kw
        seen.add(tuple(tokens))


def _input_key(x):
    "The bytes of every input, as a table of memorized answers would key them (a module by its weights)."
    if isinstance(x, torch.Tensor): return (str(x.dtype), tuple(x.shape), x.detach().numpy().tobytes())
    if isinstance(x, nn.Module): return tuple(_input_key(v) for v in x.state_dict().values())
    if isinstance(x, torch.Generator): return 'a generator'     # the draws are the student's: keyed by the logits
    if isinstance(x, (list, tuple)): return tuple(_input_key(v) for v in x)
    if isinstance(x, dict): return tuple((k, _input_key(v)) for k, v in x.items())
    return repr(x)

# every check of a function whose answer is a value a table can hold (not the loss, which the check
# backpropagates through, nor a training step's, which is the model it changed; Triton's interpreter is slow,
# and its check draws its inputs as the tiled attention's does)
MEMORIZABLE = [c for c, r in REFERENCES.items() if not isinstance(r, type) and c not in (
    'check_label_smoothed_loss', 'check_train_step', 'check_train_loop', 'check_triton_tiled_attention')]

@pytest.mark.parametrize('check', MEMORIZABLE)
def test_answers_memorized_in_one_graded_run_fail_the_next(check, capsys):
    "Every input a check draws moves with the run's seed, which the batch grader draws anew for each run: a table of the reference's answers to one run's inputs passes that run and fails another."
    import copy
    from transformer_tutorial.checks.core import _INPUTS
    table, reference = {}, REFERENCES[check]
    def record(*args, **kw):
        table[_input_key((args, kw))] = out = reference(*args, **kw)
        return copy.deepcopy(out)
    def memorized(*args, **kw):
        if _input_key((args, kw)) not in table: raise KeyError("an input it has not seen")
        return copy.deepcopy(table[_input_key((args, kw))])
    try:
        _INPUTS['seed'] = 1234
        getattr(checks, check)(record)
        getattr(checks, check)(memorized)
        assert capsys.readouterr().out.count('✓ ') == 2
        _INPUTS['seed'] = 98765
        with pytest.raises(AssertionError, match="an input it has not seen"): getattr(checks, check)(memorized)
    finally: _INPUTS['seed'] = 0
