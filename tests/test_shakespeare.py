"The Shakespeare corpus: the data's hash and split, characters as tokens, and the count baselines."
import gzip, hashlib, json, math, shutil
from importlib import resources
from pathlib import Path
import pytest
import torch
from transformer_tutorial.shakespeare import (SHAKESPEARE_SHA256, CharVocab, load_shakespeare, shakespeare_plays, ngram_model,
                                              ngram_bits_per_char)

DATA = Path(str(resources.files('transformer_tutorial') / 'data'))


def test_the_corpus_is_what_its_manifest_says():
    "Each split's text hashes to the recorded SHA-256 and holds its plays; no play is in both; validation characters are known to training."
    manifest = json.loads((DATA / 'shakespeare.json').read_text())
    texts = {s: load_shakespeare(s) for s in ('train', 'valid')}
    for split, text in texts.items():
        assert hashlib.sha256(text.encode('ascii')).hexdigest() == SHAKESPEARE_SHA256[split] == manifest['splits'][split]['sha256']
        assert len(text) == manifest['splits'][split]['characters']
        assert sum(p['characters'] for p in shakespeare_plays(split)) + 2 * (len(shakespeare_plays(split)) - 1) + 1 == len(text)
    train, valid = ({p['file'] for p in shakespeare_plays(s)} for s in ('train', 'valid'))
    assert len(train) == 33 and valid == {'julius_caesar', 'richard_ii', 'tempest', 'twelfth_night'} and not train & valid
    assert texts['valid'].startswith('JULIUS CAESAR') and 'HAMLET' in texts['train'] and 'HAMLET, PRINCE' not in texts['valid']
    assert set(texts['valid']) <= set(texts['train']) and 'CC-BY 2.5' in manifest['licence']
    assert (DATA / 'shakespeare_train.txt.gz').stat().st_size < 2_000_000  # what the wheel carries stays small


@pytest.mark.parametrize('damage, message', [
    (lambda p: p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes()).replace(b'Caesar', b'Caesur', 1))), 'its text has SHA-256'),
    (lambda p: p.write_bytes(p.read_bytes()[:1000]), 'not a complete gzip file'),
    (lambda p: p.unlink(), 'is missing'),
])
def test_a_damaged_corpus_is_refused(tmp_path, damage, message):
    folder = tmp_path / 'data'
    shutil.copytree(DATA, folder)
    damage(folder / 'shakespeare_valid.txt.gz')
    with pytest.raises((ValueError, FileNotFoundError), match=message) as e: load_shakespeare('valid', folder)
    assert 'shakespeare_valid.txt.gz' in str(e.value) and ('reinstall' in str(e.value))
    assert load_shakespeare('train', folder) == load_shakespeare('train')  # the other split is untouched
    with pytest.raises(ValueError, match="split must be 'train' or 'valid', got 'test'"): load_shakespeare('test')


def test_characters_as_tokens():
    vocab = CharVocab('hello, world\n')
    assert vocab.chars == '\n ,dehlorw' and len(vocab) == 10
    ids = vocab.encode('world\nhello')
    assert ids.dtype == torch.long and ids.tolist() == [vocab.chars.index(c) for c in 'world\nhello']
    assert vocab.decode(ids) == 'world\nhello' and vocab.decode([]) == '' and vocab.encode('').shape == (0,)
    with pytest.raises(ValueError, match=r"2 character\(s\) outside the vocabulary of 10: 'W', 'é' \(the first at position 0\)"):
        vocab.encode('Wé')
    with pytest.raises(ValueError, match='token id 10 is outside the vocabulary: ids run from 0 to 9'): vocab.decode([3, 10])
    with pytest.raises(ValueError, match='token id -1'): vocab.decode(torch.tensor([-1]))
    with pytest.raises(ValueError, match='empty text'): CharVocab('')
    assert CharVocab.from_dict(vocab.to_dict()).chars == vocab.chars


def test_ngram_counts_and_bits():
    "Counts by hand on a tiny text: every probability, and the bits of each order."
    vocab = CharVocab('ab')
    ids = vocab.encode('aab')                               # bigrams: aa, ab
    bi = ngram_model(ids, 2, order=2, alpha=1.0).exp()
    torch.testing.assert_close(bi, torch.tensor([[2 / 4, 2 / 4], [1 / 2, 1 / 2]], dtype=torch.float64))  # row a: aa, ab seen once each
    uni = ngram_model(ids, 2, order=1, alpha=1.0).exp()
    torch.testing.assert_close(uni, torch.tensor([[3 / 5, 2 / 5]], dtype=torch.float64))
    assert ngram_bits_per_char(ngram_model(ids, 2, 1), vocab.encode('ab')) == pytest.approx(-(math.log2(3 / 5) + math.log2(2 / 5)) / 2)
    assert ngram_bits_per_char(ngram_model(ids, 2, 2), vocab.encode('aa')) == pytest.approx(1.0)  # one scored pair, p = 1/2
    tri = ngram_model(vocab.encode('abab'), 2, order=3, alpha=0.5)
    assert tri.shape == (4, 2) and torch.allclose(tri.exp().sum(-1), torch.ones(4, dtype=torch.float64))
    for bad, msg in ((dict(order=4), 'order must be 1, 2 or 3'), (dict(alpha=0), 'alpha must be positive')):
        with pytest.raises(ValueError, match=msg): ngram_model(ids, 2, **bad)
    with pytest.raises(ValueError, match='too few'): ngram_model(ids[:1], 2, order=2)


def test_context_helps_on_the_validation_plays():
    "On the real corpus, more context means fewer bits on plays the counts never saw, and no unseen pair makes it infinite."
    train, valid = load_shakespeare('train'), load_shakespeare('valid')
    vocab = CharVocab(train)
    t, v = vocab.encode(train), vocab.encode(valid)
    bits = [ngram_bits_per_char(ngram_model(t, len(vocab), n), v) for n in (1, 2, 3)]
    assert math.log2(len(vocab)) > bits[0] > bits[1] > bits[2] > 2.5 and all(map(math.isfinite, bits))


# Interpolated Kneser-Ney, checked against the formula computed from scratch with Python dictionaries.
from collections import Counter
from transformer_tutorial.shakespeare import KneserNey, eval_windows, scored_positions, ShakespeareTask


def kneser_ney_by_hand(ids, V, order):
    "p(w | h) for every context h (a tuple of order-1 ids) and w, from the chapter's formula, written with dictionaries."
    ids = list(ids)
    grams = {k: Counter(tuple(ids[i:i + k]) for i in range(len(ids) - k + 1)) for k in range(1, order + 1)}
    def counts(k):   # occurrences at the highest order, continuation counts below it
        if k == order: return grams[k]
        return Counter(g[1:] for g in grams[k + 1])
    tables = {k: counts(k) for k in range(1, order + 1)}
    def discount(k):
        c = list(tables[k].values()); n1, n2 = c.count(1), c.count(2)
        return n1 / (n1 + 2 * n2) if n1 else 0.5
    def p(w, h, k):
        if k == 0: return 1 / V
        if len(h) < k - 1: return p(w, h, k - 1)         # not enough history for this order: the order below
        h = h[len(h) - (k - 1):] if k > 1 else ()
        seen = {g: c for g, c in tables[k].items() if g[:-1] == h}
        total = sum(seen.values())
        if total == 0: return p(w, h, k - 1)
        d = discount(k)
        return (max(seen.get(h + (w,), 0) - d, 0) + d * len(seen) * p(w, h[1:] if h else h, k - 1)) / total
    return lambda w, h: p(w, tuple(h), order)


@pytest.mark.parametrize('order', [1, 2, 3, 4])
def test_kneser_ney_is_the_formula_and_sums_to_one(order):
    g = torch.Generator().manual_seed(order)
    V = 5
    ids = torch.multinomial(torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05]), 400, replacement=True, generator=g)
    model, by_hand = KneserNey(ids, V, order), kneser_ney_by_hand(ids.tolist(), V, order)
    for history in ([], [0], [3, 1], [4, 4, 4], [2, 0, 1, 3]):
        got = model.next_probs(torch.tensor(history, dtype=torch.long))
        assert abs(got.sum().item() - 1) < 1e-12
        want = torch.tensor([by_hand(w, history[len(history) - (order - 1):] if order > 1 else []) for w in range(V)], dtype=torch.float64)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    text = torch.randint(0, V, (60,), generator=g)
    positions = torch.arange(1, 60)
    want = torch.tensor([math.log(by_hand(text[t].item(), text[max(0, t - order + 1):t].tolist())) for t in positions.tolist()], dtype=torch.float64)
    torch.testing.assert_close(model.log_probs(text, positions), want, rtol=1e-12, atol=1e-12)


def test_kneser_ney_beats_add_one_on_the_plays():
    vocab = CharVocab(load_shakespeare('train'))
    train, valid = vocab.encode(load_shakespeare('train')), vocab.encode(load_shakespeare('valid'))
    positions = torch.arange(2, len(valid))
    add_one = ngram_bits_per_char(ngram_model(train, len(vocab), 3), valid) * math.log(2)
    kn = {n: -KneserNey(train, len(vocab), n).log_probs(valid, positions).mean().item() for n in (3, 7)}
    assert kn[3] < add_one and kn[7] < 1.55 < add_one - 0.4


@pytest.mark.parametrize('args, message', [((torch.arange(10), 5, 0), 'order must be a positive integer'),
                                           ((torch.arange(10), 83, 10), 'do not fit in 64 bits; the highest order is 9'),
                                           ((torch.arange(3), 5, 4), 'too few to count 4-grams')])
def test_kneser_ney_refuses_what_it_cannot_count(args, message):
    with pytest.raises(ValueError, match=message): KneserNey(*args)


@pytest.mark.parametrize('context', [1, 2, 7, 16, 33])
def test_the_fair_windows_score_every_character_once_with_half_a_window_before_it(context):
    for length in range(context + 1, context + 60):
        starts, firsts = eval_windows(length, context)
        assert torch.equal(scored_positions(starts, firsts, context), torch.arange(1, length))
        assert ((firsts >= context // 2) | (starts == 0)).all() and (starts + context <= length - 1).all()
    starts, firsts = eval_windows(1000, context, n=7)
    assert len(starts) == 7 and (firsts == context // 2).all() and starts[0] == 0 and starts[-1] == 1000 - 1 - context
    with pytest.raises(ValueError, match='too short for windows of context'): eval_windows(context, context)


def test_the_task_scores_exactly_the_characters_the_count_model_scores():
    "A model that reads only the current character: evaluate(n=None) equals its mean loss over every character after the first."
    task = ShakespeareTask(context=48)
    class Bigram(torch.nn.Module):
        def __init__(self): super().__init__(); self.table = torch.nn.Embedding(len(task.vocab), len(task.vocab))
        def forward(self, idx): return self.table(idx)
    torch.manual_seed(0)
    model = Bigram()
    ids = task.valid_ids
    logp = model.table.weight.log_softmax(-1)
    want = -logp[ids[:-1], ids[1:]].double().mean().item()
    got = task.evaluate(model, n=None)
    assert got['chars'] == len(ids) - 1 and abs(got['loss'] - want) < 1e-5


def test_the_task_builds_the_block_it_is_given_and_records_it():
    "A ShakespeareTask builds its GPT with its `block` choices (the command line's: chapter 17c's Llama block, tied), records them in to_dict, and from_dict rebuilds the same task; without one, GPT-2's block."
    from transformer_tutorial.cli import SHAKESPEARE_BLOCK, TASKS
    from transformer_tutorial.shakespeare import ShakespeareTask
    task = TASKS['shakespeare'][0]()
    assert task.block == SHAKESPEARE_BLOCK and task.context == 64
    cfg = task.make_model(0, 32, 2, 1, 48).config
    assert (cfg.norm, cfg.activation, cfg.positions, cfg.tie_embeddings, cfg.qkv_bias, cfg.d_ff) == ('rms', 'swiglu', 'rope', True, False, 48)
    again = ShakespeareTask.from_dict(json.loads(json.dumps(task.to_dict())))
    assert again.block == task.block and again.vocab.chars == task.vocab.chars
    plain = ShakespeareTask(context=16, chars=task.vocab.chars)
    assert 'block' not in plain.to_dict() and plain.make_model(0, 32, 2, 1, 48).config.norm == 'layer'
    with pytest.raises(TypeError, match='nrm'): ShakespeareTask(context=16, chars='ab', block={'nrm': 'rms'}).make_model()
