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
