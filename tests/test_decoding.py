"Generation: the key/value cache returns the plain decoder's tokens exactly, and beam search is greedy with one beam, exact with a full beam, and scores what the model scores."
import itertools
import pytest
import torch
from transformer_tutorial.copy_task import CopyTask, train_task, HELDOUT_SEED
from transformer_tutorial.decoding import KVCache, decode_step, greedy_decode, beam_search, length_penalty
from transformer_tutorial.masks import padding_mask, causal_mask
from transformer_tutorial.model import Transformer
from transformer_tutorial.training import PAD, START, END, make_optimizer, train


def random_model(seed, norm_first=True, layers=2, vocab=13, max_len=32):
    torch.manual_seed(seed)
    return Transformer(vocab, vocab, d_model=32, num_heads=4, num_layers=layers, d_ff=64, dropout=0.1, max_len=max_len,
                       norm_first=norm_first)


def padded_batch(seed, B=8, L=9, vocab=13):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (B, L), generator=g)
    lengths = torch.randint(1, L + 1, (B,), generator=g)
    return src.masked_fill(torch.arange(L)[None] >= lengths[:, None], PAD)


@pytest.fixture(scope='module')
def trained():
    "A copy model trained to 100%, a reverse model trained part of the way (it still makes mistakes), and a post-LN copy model."
    copy, _, m = train_task('copy', device='cpu', progress=False)
    assert m['exact_match'] == 1.0
    rev, _, _ = train_task('reverse', steps=150, eval_every=150, n_eval=100, device='cpu', progress=False)
    torch.manual_seed(0)
    post = Transformer(13, 13, d_model=64, num_heads=4, num_layers=2, d_ff=128, dropout=0.0, max_len=64, norm_first=False)
    opt, sched = make_optimizer(post, 3e-3, 50)
    hist = train(post, CopyTask().batches(128, seed=0), 300, opt, sched, PAD, progress=False)
    assert sum(hist['loss'][-10:]) < 0.2 * sum(hist['loss'][:10])  # it has learned something
    return copy, rev, post


@pytest.mark.parametrize('norm_first', [True, False])
@pytest.mark.parametrize('end_id', [END, None])
def test_cache_gives_the_plain_tokens_on_random_models(norm_first, end_id):
    for seed in range(6):
        model, src = random_model(seed, norm_first), padded_batch(seed)
        cached = greedy_decode(model, src, 20, end_id=end_id)
        plain = greedy_decode(model, src, 20, end_id=end_id, use_cache=False)
        assert torch.equal(cached, plain), f"seed {seed}"
        if end_id is None: assert cached.shape == (8, 20)  # no end token: every position is generated


def test_cache_gives_the_plain_tokens_on_trained_models(trained):
    "Pre-LN copy and reverse models, and a post-LN copy model."
    for model, task in zip(trained, (CopyTask(), CopyTask(reverse=True), CopyTask())):
        src, _ = task.heldout_sample(500, torch.Generator().manual_seed(HELDOUT_SEED))
        assert torch.equal(greedy_decode(model, src, 11), greedy_decode(model, src, 11, use_cache=False))


@pytest.mark.parametrize('norm_first', [True, False])
def test_decode_step_matches_the_last_row_of_the_plain_decoder(norm_first):
    model = random_model(3, norm_first).eval()
    src = padded_batch(3, B=4)
    src_mask = padding_mask(src, PAD)
    ys = torch.randint(3, 13, (4, 10)); ys[:, 0] = START
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        cache = KVCache(model, memory, 10)
        for t in range(10):
            torch.testing.assert_close(decode_step(model, ys[:, t], cache, src_mask),
                                       model.decode(ys[:, :t + 1], memory, causal_mask(t + 1), src_mask)[:, -1])
    assert cache.length == 10


def test_cache_size_is_the_formula():
    model = random_model(0, layers=3).eval()
    B, Ls, L, N, d = 5, 7, 12, 3, 32
    with torch.no_grad(): cache = KVCache(model, model.encode(torch.randint(3, 13, (B, Ls))), L)
    assert cache.nbytes() == 4 * (2 * N * B * L * d + 2 * N * B * Ls * d)
    assert cache.keys.shape == (N, B, 4, L, d // 4) and cache.cross[0][0].shape == (B, 4, Ls, d // 4)


def test_decoding_leaves_the_global_rng_alone():
    model, src = random_model(0), padded_batch(0)
    state = torch.get_rng_state()
    greedy_decode(model, src, 5); beam_search(model, src, 5)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize('norm_first', [True, False])
def test_one_beam_is_greedy(trained, norm_first):
    for seed in range(4):
        model, src = random_model(seed, norm_first), padded_batch(seed)
        for end_id in (END, None):
            assert torch.equal(beam_search(model, src, 15, beam_size=1, end_id=end_id), greedy_decode(model, src, 15, end_id=end_id))
    src, _ = CopyTask(reverse=True).heldout_sample(300, torch.Generator().manual_seed(HELDOUT_SEED))
    assert torch.equal(beam_search(trained[1], src, 11, beam_size=1), greedy_decode(trained[1], src, 11))


def teacher_forced_score(model, src, out, alpha):
    "log p(out | src) / length_penalty, up to and including each row's first END."
    ys = torch.cat([torch.full((src.size(0), 1), START), out], 1)
    with torch.no_grad():
        lp = model(src, ys[:, :-1], padding_mask(src, PAD), causal_mask(out.size(1))).log_softmax(-1)
    lp = lp.gather(2, ys[:, 1:, None])[..., 0]
    kept = ((out == END).cumsum(1) - (out == END).long()) == 0
    return (lp * kept).sum(1) / length_penalty(kept.sum(1).float(), alpha)


@pytest.mark.parametrize('alpha', [0.0, 0.6, 1.0])
def test_beam_scores_are_the_models_and_rows_are_independent(trained, alpha):
    for model in (random_model(5).eval(), trained[1]):
        src = padded_batch(5, B=6, L=10)
        out, score = beam_search(model, src, 11, beam_size=4, alpha=alpha, return_scores=True)
        torch.testing.assert_close(score, teacher_forced_score(model, src, out, alpha))
        for i in range(6):
            alone = beam_search(model, src[i:i + 1, :int((src[i] != PAD).sum())], 11, beam_size=4, alpha=alpha)[0]
            assert torch.equal(alone, out[i, :alone.numel()]) and (out[i, alone.numel():] == PAD).all()


def test_beam_search_is_exact_with_a_full_beam():
    "K = V over two steps holds every one-token prefix: the result must be the best of all outputs of up to 2 tokens."
    V = 6
    for seed, alpha in itertools.product(range(5), (0.0, 0.6, 2.0)):
        torch.manual_seed(seed)
        model = Transformer(8, V, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=8).eval()
        x = torch.randint(3, 8, (1, 4))
        outs = [[END]] + [[a, b] for a in range(V) if a != END for b in range(V)]
        def score(y):
            ys = torch.tensor([[START] + y])
            with torch.no_grad(): lp = model(x, ys[:, :-1], None, causal_mask(len(y))).log_softmax(-1).gather(2, ys[:, 1:, None]).sum()
            return lp.item() / length_penalty(len(y), alpha)
        best = max(outs, key=score)
        got, got_score = beam_search(model, x, 2, beam_size=V, alpha=alpha, return_scores=True)
        assert got[0, :len(best)].tolist() == best, (seed, alpha)
        assert got_score.item() == pytest.approx(score(best), abs=1e-5)


def test_beam_search_ends_each_row_on_its_own(trained):
    src = torch.tensor([[5, 6, 0, 0, 0, 0, 0, 0, 0], [3, 4, 5, 6, 7, 0, 0, 0, 0], [9, 8, 7, 6, 5, 4, 3, 12, 11]])
    out = beam_search(trained[0], src, 11, beam_size=4)
    assert out.tolist() == [[5, 6, END] + [PAD] * 7, [3, 4, 5, 6, 7, END] + [PAD] * 4, [9, 8, 7, 6, 5, 4, 3, 12, 11, END]]


def test_decoders_on_the_input_device_and_dtype():
    "Tokens come back as long ids on the device of `src`, wherever the model is (tests/elsewhere.py's device stands in for a GPU)."
    from elsewhere import elsewhere
    model, src = random_model(0), torch.tensor([[3, 4]])
    with elsewhere() as device:
        moved = random_model(0).to(device)
        for m, s in ((model, src), (moved, src), (moved, src.to(device)), (model, src.to(device))):
            for out in (greedy_decode(m, s, 4, use_cache=False), greedy_decode(m, s, 4), beam_search(m, s, 4)):
                assert out.dtype == torch.long and out.device == s.device and out.shape[0] == 1


@pytest.mark.parametrize('call, message', [
    (lambda m: greedy_decode(m, torch.tensor([[3, 4]]), 0), 'max_len must be a positive integer, got 0'),
    (lambda m: beam_search(m, torch.tensor([[3, 4]]), -1), 'max_len must be a positive integer, got -1'),
    (lambda m: beam_search(m, torch.tensor([[3, 4]]), 5, beam_size=0), 'beam_size must be a positive integer, got 0'),
    (lambda m: beam_search(m, torch.tensor([[3, 4]]), 5, beam_size=2.5), 'beam_size must be a positive integer'),
    (lambda m: beam_search(m, torch.tensor([[3, 4]]), 5, beam_size=14), 'beam_size=14 is larger than the target vocabulary (13 tokens)'),
    (lambda m: greedy_decode(m, torch.full((1, 17), 3), 5), 'src has 17 positions, more than the model\'s positional table holds (max_len=16)'),
    (lambda m: beam_search(m, torch.tensor([[3, 4]]), 17), 'max_len=17 new tokens need 17 decoder positions'),
    (lambda m: greedy_decode(m, torch.tensor([3, 4]), 5), 'src must be token ids shaped (B, Ls), got (2,)'),
])
def test_bad_input(call, message):
    model = random_model(0, layers=1, max_len=16)
    with pytest.raises((ValueError, TypeError)) as e: call(model)
    assert message in str(e.value)


@pytest.mark.parametrize('seed', [1, 4, 6, 8])  # seeds where some beam that was not chosen runs longer than the answers
def test_beam_search_is_as_wide_as_its_longest_chosen_answer(seed):
    "The output is cut where the longest chosen answer ends, like greedy_decode's, not where the last beam stopped."
    out = beam_search(random_model(seed, vocab=5).eval(), padded_batch(seed, vocab=5), 12, beam_size=3)
    ends = [int((row == END).nonzero()[0]) + 1 if (row == END).any() else 12 for row in out]
    assert out.size(1) == max(ends)


def test_the_cache_refuses_to_decode_inside_record_attention():
    "record_attention sees whole forward passes only: a cached decode inside it would return maps without the decoder, so it raises."
    from transformer_tutorial.training import record_attention
    model = Transformer(13, 13, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=16).eval()
    src = torch.tensor([[3, 4, 5]])
    with record_attention(model) as attn:
        for decode in (lambda: greedy_decode(model, src, 4), lambda: beam_search(model, src, 4, beam_size=2)):
            with pytest.raises(ValueError, match=r"inside record_attention.*use_cache=False"): decode()
        greedy_decode(model, src, 4, use_cache=False)
        with record_attention(model.decoder):  # a nested block on a part: leaving it keeps the outer one recording
            pass
        with pytest.raises(ValueError, match='inside record_attention'): greedy_decode(model, src, 4)
    assert len(attn) == 3 and all(m.size(-1) == 3 for n, m in attn.items() if 'cross' in n)
    assert torch.equal(greedy_decode(model, src, 4), greedy_decode(model, src, 4, use_cache=False))  # outside: the cache again
