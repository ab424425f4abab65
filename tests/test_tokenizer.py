"Chapter 16a's byte-pair encoding: the trainer against the slow one and its tie rule, GPT-2's tokenizer id for id against tiktoken (offline, from the package's copies of OpenAI's files), round trips on random Unicode, streaming, files, subwords in the Shakespeare task and the command line, the bad input it refuses, overlapping special tokens and tiktoken's special-token rules, and CS336 assignment 1's tokenizer tests written from memory."
import gzip, json, math
from collections import Counter
from importlib import resources
from pathlib import Path
import pytest
import torch
from hypothesis import given, settings, strategies as st
from transformer_tutorial.tokenizer import (GPT2_PATTERN, BPETokenizer, train_bpe, pair_counts, merge_pair, pretokens, gpt2_tokenizer,
                                            read_gpt2_files, bytes_to_unicode)
from transformer_tutorial.shakespeare import load_shakespeare, ShakespeareTask

tiktoken = pytest.importorskip('tiktoken')   # a test dependency (settings.ini dev_requirements)
DATA = resources.files('transformer_tutorial') / 'data'


def slow_train(text, vocab_size, pattern=GPT2_PATTERN):
    "BPE as chapter 16a does it by hand: every pair of every piece recounted after every merge, ties to the greatest pair of bytes."
    vocab, merges = {i: bytes([i]) for i in range(256)}, []
    words = [list(p.encode('utf-8')) for p in pretokens(text, pattern)]
    while len(vocab) < vocab_size:
        counts = Counter()
        for w in words: counts.update(pair_counts(w))
        if not counts: break
        pair = max(counts, key=lambda p: (counts[p], vocab[p[0]], vocab[p[1]]))
        vocab[len(vocab)] = vocab[pair[0]] + vocab[pair[1]]
        merges.append((*pair, len(vocab) - 1))
        words = [merge_pair(w, pair, len(vocab) - 1) for w in words]
    return vocab, merges


@pytest.mark.parametrize('text', ["the cat sat on the mat, and the rat sat on the hat.", "aaaa aaa aa a abab baba " * 7,
                                  "naïve café, 日本語 日本 🙂🙂🙂 ok", "x"])
def test_the_trainer_makes_the_slow_trainer_s_merges(text):
    assert train_bpe(text, 300) == slow_train(text, 300)


def test_the_trainer_on_the_plays_and_its_tie_rule():
    plays = load_shakespeare('train')[:20_000]                     # 144 merges of the plays: the slow trainer takes seconds
    assert train_bpe(plays, 400) == slow_train(plays, 400)
    vocab, merges = train_bpe('ab ab cd cd', 257)                 # (a, b) and (c, d) both twice: the greater pair of bytes, (c, d)
    assert vocab[256] == b'cd' and merges == [(ord('c'), ord('d'), 256)]


@pytest.fixture(scope='module')
def reference():
    "tiktoken's GPT-2 encoding built offline from the same files the package carries (tiktoken.get_encoding would download them)."
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        for name in ('gpt2_vocab.bpe.gz', 'gpt2_encoder.json.gz'):
            Path(folder, name[5:-3]).write_bytes(gzip.decompress((DATA / name).read_bytes()))
        ranks = data_gym_to_mergeable_bpe_ranks(str(Path(folder, 'vocab.bpe')), str(Path(folder, 'encoder.json')))
    return tiktoken.Encoding('gpt2', pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={'<|endoftext|>': 50256})


VARIED = ["def f(x):\n    return x ** 2   # squares\n\n\n\tprint(f(3))\n", "Ελληνικά, русский, العربية, हिन्दी, 日本語の文章、한국어",
          "🙂🚀👩‍👩‍👧 emoji and ZWJ", "     many spaces\n\n\n\nand newlines  \t \n", "<|endoftext|>inside<|endoftext|> text <|endoftext|>",
          "O'Neil's they're we've I'm you'll he'd", "3.14159 1,000,000 0xDEADBEEF", "", " ", "\n"]


def test_gpt2_ids_equal_tiktoken_s_on_the_plays_and_varied_text(reference):
    gpt2 = gpt2_tokenizer()
    assert len(gpt2) == 50257 and gpt2.special_tokens == {'<|endoftext|>': 50256}
    for text in [load_shakespeare('valid'), *VARIED]:
        ids = gpt2.encode(text)
        assert ids == reference.encode(text, allowed_special='all') and gpt2.decode(ids) == text


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=()), max_size=60))    # surrogates too, which tiktoken reads as U+FFFD
def test_random_unicode_round_trips_and_matches_tiktoken(reference, text):
    gpt2 = gpt2_tokenizer()
    ids = gpt2.encode(text)
    assert ids == reference.encode(text, allowed_special='all') and gpt2.decode(ids) == text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)


def test_lone_surrogates_read_as_the_replacement_character_as_in_tiktoken(reference):
    gpt2 = gpt2_tokenizer()
    for text in ('a\ud800b', '\udfff', 'x \ud83d\ude00 y', '\ude00\ud83d', '<|endoftext|>\ud800<|endoftext|>'):
        assert gpt2.encode(text) == reference.encode(text, allowed_special='all') == list(gpt2.encode_iterable(iter(text)))
        assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
    assert gpt2.encode('a\ud800b') == [64, 4210, 65] and gpt2.decode([4210]) == '\ufffd'
    vocab, merges = train_bpe('a\ud800b a\ud800b', 258)                  # U+FFFD's three bytes merged
    assert vocab[257] == '\ufffd'.encode('utf-8')


def test_encode_ordinary_reads_special_tokens_as_text(reference):
    gpt2, text = gpt2_tokenizer(), 'user wrote <|endoftext|> here'
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text) == [7220, 2630, 1279, 91, 437, 1659, 5239, 91, 29, 994]
    assert gpt2.encode(text) == [7220, 2630, 220, 50256, 994] and gpt2.decode(gpt2.encode_ordinary(text)) == text


def test_decode_takes_tensors_arrays_and_numpy_ints_and_refuses_floats_bools_and_text():
    import numpy as np
    gpt2 = gpt2_tokenizer()
    ids = gpt2.encode('hello world')
    assert gpt2.decode(torch.tensor(ids)) == gpt2.decode(np.array(ids)) == gpt2.decode([np.int64(i) for i in ids]) == gpt2.decode(iter(ids)) == 'hello world'
    with pytest.raises(TypeError, match=r"token ids must be integers, got 31373.0 \(float\)"): gpt2.decode([31373.0])
    with pytest.raises(TypeError, match=r"token ids must be integers, got True \(bool\)"): gpt2.decode([True])
    with pytest.raises(TypeError, match=r"ids must be a sequence of token ids \(integers\), got a str"): gpt2.decode('abc')
    with pytest.raises(TypeError, match=r"ids must be a sequence of token ids \(integers\), got a bytes"): gpt2.decode(b'abc')
    with pytest.raises(ValueError, match='token id 50257 is not in the vocabulary'): gpt2.decode(torch.tensor([50257]))


def test_a_long_run_of_whitespace_streams_in_linear_work():
    "A whitespace run is one pre-token, so nothing in it can be cut: the held text is scanned again only once it has doubled."
    class Counting(BPETokenizer):
        scans = 0
        def _safe_cut(self, text, longest):
            Counting.scans += 1
            if Counting.scans > 200: raise AssertionError('the held text is scanned again and again: quadratic work')
            return super()._safe_cut(text, longest)
    gpt2 = gpt2_tokenizer()
    tok = Counting(gpt2.vocab, gpt2.merges, gpt2.special_tokens)
    lines = ['\n'] * 200_000 + ['the end\n'] * 5_000 + [' ' * 79 + '\n'] * 2_000
    text = ''.join(lines)
    assert list(tok.encode_iterable(lines, buffer=1000)) == gpt2.encode(text)
    assert Counting.scans < 4 * math.log2(len(text))                      # 200k newlines: about log2(200) scans, not 200k


def test_decoding_a_cut_character_gives_the_replacement_character_as_gpt2_does(reference):
    gpt2 = gpt2_tokenizer()
    for text in ('日本', '🙂', 'é'):
        ids = gpt2.encode(text)
        for k in range(len(ids)):
            assert gpt2.decode(ids[:k]) == reference.decode(ids[:k])
    smile = [gpt2.byte_ids[b] for b in '🙂'.encode('utf-8')]            # its four bytes as four tokens
    assert gpt2.decode(smile[:2]) == reference.decode(smile[:2]) == '\ufffd'


PIECES = st.sampled_from(list("ab c\n\t.,!?'sll") + ['<|endoftext|>', '<|endo', 'ftext|>', "'ll", "'re", '日', '🙂', '  ', '\n\n', 'CA'])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=80), st.lists(st.integers(1, 25), min_size=1, max_size=8), st.integers(1, 40), st.booleans())
def test_streaming_gives_the_ids_of_the_whole_text(parts, sizes, buffer, special):
    gpt2 = gpt2_tokenizer()
    tok = gpt2 if special else BPETokenizer(gpt2.vocab, gpt2.merges)      # with and without a special token
    text = ''.join(parts)
    chunks, k, i = [], 0, 0
    while k < len(text): chunks.append(text[k:k + sizes[i % len(sizes)]]); k += sizes[i % len(sizes)]; i += 1
    assert list(tok.encode_iterable(iter(chunks), buffer=buffer)) == tok.encode(text)


def test_the_trained_merges_give_the_same_ids_in_tiktoken():
    plays = load_shakespeare('train')
    tok = BPETokenizer.train(plays[:400_000], 600)
    custom = tiktoken.Encoding('plays', pat_str=GPT2_PATTERN, mergeable_ranks={t: i for i, t in tok.vocab.items()}, special_tokens={})
    valid = load_shakespeare('valid')
    assert tok.encode(valid) == custom.encode_ordinary(valid)


def test_files_and_dicts_round_trip_and_refuse_what_is_not_a_tokenizer(tmp_path):
    tok = BPETokenizer.train(load_shakespeare('train')[:50_000], 320, special_tokens=['<|endoftext|>', '<|pad|>'])
    path = tok.save(tmp_path / 'tok.json')
    again = BPETokenizer.load(path)
    text = "ROMEO:<|pad|> soft<|endoftext|>"
    assert again.encode(text) == tok.encode(text) and again.vocab == tok.vocab and again.special_tokens == {'<|endoftext|>': 318, '<|pad|>': 319}
    with pytest.raises(ValueError, match="not a course tokenizer"): BPETokenizer.from_dict({'format': 'tiktoken'})
    d = BPETokenizer.train('hello world hello', 270).to_dict()
    cases = [({k: v for k, v in d.items() if k not in ('merges', 'pattern')}, "the tokenizer lacks 'merges', 'pattern'"),
             ({**d, 'vocab': {**d['vocab'], '3': 'zz'}}, "vocab entry '3': 'zz' is not a token id with its bytes in hex"),
             ({**d, 'merges': [d['merges'][0][:2], *d['merges'][1:]]}, r"merge 0: \[108, 111\] is not three token ids \[a, b, merged\]"),
             ({**d, 'merges': [d['merges'][0], [*d['merges'][0][:2], 256]]}, r"merges 0 and 1 both merge the pair \(108, 111\)"),
             ({**d, 'pattern': '('}, r"the pattern '\(' does not compile as a regular expression")]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message): BPETokenizer.from_dict(json.loads(json.dumps(bad)))


def test_gpt2_files_with_mistakes_are_refused_by_line():
    encoder, merges = (gzip.decompress((DATA / n).read_bytes()).decode() for n in ('gpt2_encoder.json.gz', 'gpt2_vocab.bpe.gz'))
    lines = merges.split('\n')
    with pytest.raises(ValueError, match=r"vocab.bpe line 3: 'Ġ t h' is not two tokens separated by one space"):
        read_gpt2_files(encoder, '\n'.join(lines[:2] + ['Ġ t h'] + lines[3:]))
    enc = json.loads(encoder); del enc['Ġt']
    with pytest.raises(ValueError, match=r"vocab.bpe line 2: the merge 'Ġ t' needs 'Ġt', which encoder.json lacks"): read_gpt2_files(json.dumps(enc), merges)
    crlf = read_gpt2_files(encoder, merges.replace('\n', '\r\n'))           # a file with Windows line ends reads the same
    assert crlf.merges == gpt2_tokenizer().merges
    enc = {c: b for b, c in bytes_to_unicode().items()}
    cases = [('[1, 2]', '#version: 0.2\n', "encoder.json must be a JSON object {token: id}, got a list"),
             (json.dumps({**enc, 'zz': 5}), '#version: 0.2\n', "encoder.json: the tokens 'ą' and 'zz' share the id 5"),
             (json.dumps({**enc, 'ab': '256'}), '#version: 0.2\na b\n', "encoder.json: the id of 'ab' is '256', not an integer"),
             (json.dumps({**enc, 'ab': 256}), '#version: 0.2\na b\na b\n', "vocab.bpe lines 2 and 3 both hold the merge 'a b'")]
    for encoder_json, vocab_bpe, message in cases:
        with pytest.raises(ValueError, match=message): read_gpt2_files(encoder_json, vocab_bpe)


@pytest.mark.parametrize('call, error, message', [
    (lambda: BPETokenizer.train('abc', 255), ValueError, r'vocab_size must be at least 256 \(one token per byte\) \+ 0 special token\(s\) = 256, got 255'),
    (lambda: BPETokenizer.train('abc', 256, special_tokens=['<|e|>']), ValueError, r'at least 256 .* \+ 1 special token\(s\) = 257, got 256'),
    (lambda: BPETokenizer.train('abc', 300, special_tokens=['']), ValueError, "a special token must be a non-empty string, got ''"),
    (lambda: BPETokenizer.train('abc', 300, special_tokens=['<a>', '<a>']), ValueError, r"special tokens repeat: \['<a>', '<a>'\]"),
    (lambda: BPETokenizer.train(b'abc', 300), TypeError, 'text must be a str, got bytes'),
    (lambda: gpt2_tokenizer().encode(None), TypeError, 'text must be a str, got NoneType'),
    (lambda: gpt2_tokenizer().decode([50257]), ValueError, r'token id 50257 is not in the vocabulary of 50257 tokens \(ids 0 to 50256\)'),
    (lambda: BPETokenizer({i: bytes([i]) for i in range(256)}, [(97, 98, 300)]), ValueError, r'merge 0 \(97, 98\) -> 300 names id 300, which the vocabulary lacks'),
    (lambda: BPETokenizer({i: bytes([i]) for i in range(255)}, []), ValueError, 'the vocabulary lacks the single byte 255'),
    (lambda: train_bpe('hello world', 300, '<eot>'), TypeError, r"special tokens must be a list of strings, got the str '<eot>' \(write \['<eot>'\]\)"),
    (lambda: gpt2_tokenizer().encode('x', allowed_special='none'), TypeError, r"allowed_special must be 'all' or a set of special tokens, got 'none'"),
    (lambda: gpt2_tokenizer().encode('a<|endoftext|>', allowed_special=set(), disallowed_special='all'), ValueError,
     r"the text holds the special token '<\|endoftext\|>', which disallowed_special forbids: pass allowed_special=\{'<\|endoftext\|>'\}"),
    (lambda: BPETokenizer.train('x', 300.0), TypeError, r"vocab_size must be an integer, got 300.0 \(float\)"),
    (lambda: train_bpe('x', True), TypeError, r"vocab_size must be an integer, got True \(bool\)"),
    (lambda: BPETokenizer(gpt2_tokenizer().vocab, gpt2_tokenizer().merges, ['<|endoftext|>']), TypeError, r"special_tokens must be a dict \{text: id\}"),
])
def test_bad_input_is_one_clear_error(call, error, message):
    with pytest.raises(error, match=message): call()


def test_a_special_token_of_one_byte_is_a_token_of_its_own():
    tok = BPETokenizer.train('a!b a!b', 260, ['!'])
    assert tok.special_tokens == {'!': len(tok) - 1} and tok.byte_ids[33] == 33
    bang = len(tok) - 1
    assert tok.encode('a!b') == [97, bang, 98] and tok.encode_ordinary('a!b') == [97, 33, 98] and tok.decode([97, bang, 98]) == 'a!b'


def test_subwords_in_the_shakespeare_task_are_scored_in_bits_per_character():
    tok = BPETokenizer.train(load_shakespeare('train')[:300_000], 400)
    task, chars = ShakespeareTask(context=32, tokenizer=tok), ShakespeareTask(context=32)
    assert len(task.train_ids) < 0.8 * len(chars.train_ids) and task.src_vocab_size == 400
    assert task.decode(task.valid_ids) == load_shakespeare('valid')
    m = task.evaluate(task.make_model(0, 32, 2, 1, 64), n=None)
    assert m['chars'] == len(load_shakespeare('valid')) - len(tok.decode(task.valid_ids[:1].tolist()))   # every character after the first token
    assert m['bits_per_char'] == pytest.approx(m['loss'] * m['tokens'] / m['chars'] / math.log(2))
    again = ShakespeareTask.from_dict(json.loads(json.dumps(task.to_dict())))
    assert torch.equal(again.valid_ids, task.valid_ids) and 'bits per character' in task.describe(m)
    with pytest.raises(ValueError, match='give chars .* or tokenizer, not both'): ShakespeareTask(32, chars='ab', tokenizer=tok)


def test_the_command_line_trains_and_generates_on_subwords(tmp_path, capsys):
    from transformer_tutorial.cli import main
    assert main(['train', '--task', 'shakespeare', '--tokenizer', 'bpe', '--vocab-size', '300', '--steps', '4', '--batch-size', '4',
                 '--out', str(tmp_path / 'run'), '--device', 'cpu', '--json']) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics['valid_bits_per_char'] > 0 and json.loads((tmp_path / 'run' / 'config.json').read_text())['task']['tokenizer']['format'] == 'transformer_tutorial.bpe'
    assert main(['generate', '--checkpoint', str(tmp_path / 'run'), '--prompt', 'ROMEO:', '--max-new-tokens', '5', '--seed', '1']) == 0
    assert capsys.readouterr().out.startswith('ROMEO:')
    assert main(['train', '--task', 'shakespeare', '--tokenizer', 'bpe', '--vocab-size', '100', '--out', str(tmp_path / 'x')]) == 2
    assert '--vocab-size must be at least 256' in capsys.readouterr().err and not (tmp_path / 'x').exists()
    assert main(['train', '--task', 'copy', '--tokenizer', 'bpe', '--out', str(tmp_path / 'y')]) == 2


def test_gpt2_s_ids_from_the_course_s_tokenizer_give_transformers_logits():
    "The course's GPT built from a random GPT2LMHeadModel, fed the course's GPT-2 ids of a sentence: the logits transformers gives for the same ids."
    transformers = pytest.importorskip('transformers')
    from transformer_tutorial.gpt2 import from_gpt2
    torch.manual_seed(0)
    theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_positions=64, n_embd=16, n_head=2, n_layer=1)).eval()
    ours = from_gpt2(theirs)
    ids = torch.tensor([gpt2_tokenizer().encode("The Transformer is a model that reads, writes and translates.")])
    with torch.no_grad(): assert (ours(ids) - theirs(ids).logits).abs().max().item() < 1e-5


def test_overlapping_special_tokens_take_the_leftmost_then_the_longest():
    tok = BPETokenizer.train('a!b a!b', 270, ['<a>', 'x<a>', '<a>y', '<|a|', '|a|>'])
    pieces = lambda t: [tok.decode([i]) for i in tok.encode(t)]
    assert pieces('x<a>y<a>y<|a|>') == ['x<a>', 'y', '<a>y', '<|a|', '>']
    for text in ('x<a>y<a>y<|a|>' * 30, '<a<a>x<a><|a|a|>'):
        chunks = [text[k:k + 3] for k in range(0, len(text), 3)]
        assert list(tok.encode_iterable(iter(chunks), buffer=4)) == tok.encode(text)


def test_read_gpt2_files_takes_paths_or_texts():
    folder = Path('/work/shared/data/gpt2_tokenizer')
    if not folder.is_dir():
        import tempfile
        folder = Path(tempfile.mkdtemp())
        for name in ('encoder.json', 'vocab.bpe'): (folder / name).write_bytes(gzip.decompress((DATA / f'gpt2_{name}.gz').read_bytes()))
    for enc, bpe in ((folder / 'encoder.json', folder / 'vocab.bpe'), (str(folder / 'encoder.json'), str(folder / 'vocab.bpe')),
                     ((folder / 'encoder.json').read_text(encoding='utf-8'), (folder / 'vocab.bpe').read_text(encoding='utf-8'))):
        tok = read_gpt2_files(enc, bpe)
        assert tok.merges == gpt2_tokenizer().merges and tok.encode('Hello world<|endoftext|>') == [15496, 995, 50256]


# CS336 (Stanford, Language Modeling from Scratch) assignment 1's tokenizer tests, written here from memory of the published tests/test_tokenizer.py
# (their fixtures cannot be downloaded here: the plays and texts written below stand in for address.txt, german.txt and
# tinystories_sample.txt), run through the package: GPT-2's vocabulary and merges read from files, compared with tiktoken.

def cs336_tokenizer(special_tokens=None):
    "As CS336's get_tokenizer_from_vocab_merges_path: GPT-2's files, and each special token the vocabulary lacks added with a new id."
    import tempfile
    folder = Path(tempfile.mkdtemp())
    for name in ('encoder.json', 'vocab.bpe'): (folder / name).write_bytes(gzip.decompress((DATA / f'gpt2_{name}.gz').read_bytes()))
    base = read_gpt2_files(folder / 'encoder.json', folder / 'vocab.bpe', special_tokens=special_tokens or [])
    vocab, specials = dict(base.vocab), dict(base.special_tokens)
    for s in special_tokens or []:
        if s not in specials: specials[s] = len(vocab); vocab[len(vocab)] = s.encode('utf-8')
    return BPETokenizer(vocab, base.merges, specials)


GERMAN = ("Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller staatlichen Gewalt.\n"
          "Über den Bergen, weit zu wandern, sagen die Leute, wohnt das Glück; größer als gedacht, schöner als geträumt.\n")
CS336_TEXTS = ['', 's', '🙃', 'Hello, how are you?', 'Héllò hôw are ü? 🙃', GERMAN * 20]


@pytest.mark.parametrize('text', CS336_TEXTS, ids=['empty', 'single character', 'single unicode character', 'ascii', 'unicode', 'german'])
def test_cs336_roundtrip_and_matches_tiktoken(text, reference):
    tok = cs336_tokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == text and ids == reference.encode(text)


def test_cs336_address_and_tinystories_samples_roundtrip_and_match_tiktoken(reference):
    tok = cs336_tokenizer(['<|endoftext|>'])
    valid = load_shakespeare('valid')
    address = valid[:3_000]                                                    # stands in for address.txt
    stories = '<|endoftext|>\n'.join(valid[k:k + 800] for k in range(0, 40_000, 800))   # for tinystories_sample.txt
    for text in (address, stories):
        ids = tok.encode(text)
        assert tok.decode(ids) == text and ids == reference.encode(text, allowed_special={'<|endoftext|>'})


def test_cs336_unicode_string_with_special_tokens(reference):
    tok = cs336_tokenizer(['<|endoftext|>'])
    text = 'Héllò hôw <|endoftext|><|endoftext|> are ü? 🙃<|endoftext|>'
    ids = tok.encode(text)
    assert [tok.decode([i]) for i in ids].count('<|endoftext|>') == 3 and tok.decode(ids) == text
    assert ids == reference.encode(text, allowed_special={'<|endoftext|>'})


def test_cs336_overlapping_special_tokens():
    tok = cs336_tokenizer(['<|endoftext|>', '<|endoftext|><|endoftext|>'])
    text = 'Hello, how <|endoftext|><|endoftext|> are you?<|endoftext|>'
    ids = tok.encode(text)
    pieces = [tok.decode([i]) for i in ids]
    assert pieces.count('<|endoftext|>') == 1 and pieces.count('<|endoftext|><|endoftext|>') == 1 and tok.decode(ids) == text


@pytest.mark.parametrize('text', ['Hello, world!<|endoftext|>\n\n\n', 'Once upon a time.\n\n<|endoftext|>\n\nThe end.\n\n<|endoftext|>\n\n'],
                         ids=['special token then trailing newlines', 'double newlines around a special token, then non-whitespace'])
def test_cs336_special_tokens_next_to_newlines_match_tiktoken(text, reference):
    tok = cs336_tokenizer(['<|endoftext|>'])
    assert tok.encode(text) == reference.encode(text, allowed_special={'<|endoftext|>'}) and tok.decode(tok.encode(text)) == text


def test_cs336_encode_iterable_roundtrips_and_matches_tiktoken(reference, tmp_path):
    tok = cs336_tokenizer(['<|endoftext|>'])
    text = '<|endoftext|>\n'.join(load_shakespeare('valid')[k:k + 1500] for k in range(0, 60_000, 1500))
    (tmp_path / 'sample.txt').write_text(text, encoding='utf-8')
    with open(tmp_path / 'sample.txt', encoding='utf-8') as f: ids = list(tok.encode_iterable(f))
    assert tok.decode(ids) == text and ids == reference.encode(text, allowed_special={'<|endoftext|>'})


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc to read the process size')
def test_cs336_encode_iterable_memory_usage(tmp_path):
    "CS336 streams a 5 MB file under an address-space limit of 1 MB more than the process holds, and expects encoding it at once to fail under the same limit; here a 2 MB file of the plays, in a child process (after a first pass fills the cache of pieces)."
    import subprocess, sys
    path = tmp_path / 'big.txt'
    plays = load_shakespeare('train')
    path.write_text(plays[:2_000_000], encoding='utf-8')
    code = f"""
import resource, sys
from transformer_tutorial.tokenizer import gpt2_tokenizer
tok = gpt2_tokenizer()
with open({str(path)!r}, encoding='utf-8') as f: n = sum(1 for _ in tok.encode_iterable(f))
size = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 1_000_000, resource.RLIM_INFINITY))
with open({str(path)!r}, encoding='utf-8') as f: assert sum(1 for _ in tok.encode_iterable(f)) == n
print('streamed', n)
try:
    with open({str(path)!r}, encoding='utf-8') as f: tok.encode(f.read())
except MemoryError: print('at once: MemoryError')
"""
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0 and 'streamed' in r.stdout and 'at once: MemoryError' in r.stdout, r.stdout + r.stderr
