"Chapter 16b: open models' tokenizer.json files read by the course's BPE, id for id and text for text against the `tokenizers` library (and transformers' fast tokenizer where it adds BOS) on a bank of 590 texts for each family; special tokens as tiktoken and transformers treat them; streaming; chat templates rendered as transformers renders them; bad input."
import json, re, tracemalloc
from pathlib import Path
import pytest
from transformer_tutorial.tokenizer import BPETokenizer, gpt2_tokenizer
from transformer_tutorial.hub_tokenizer import HubTokenizer, render_chat_template
from transformer_tutorial.hub_families import (FAMILIES, CHAT_TEMPLATES, agreement_bank,
                                               family_tokenizer_json, gpt2_tokenizer_json, write_family)
from transformer_tutorial.shakespeare import load_shakespeare

tokenizers = pytest.importorskip('tokenizers')
KINDS = ['gpt2 (published)', *FAMILIES]


@pytest.fixture(scope='module')
def plays():
    "The first 200,000 characters of the training plays, and the numbers 0 to 2999 (the plays hold few digits to merge)."
    return load_shakespeare('train')[:200_000] + ' '.join(map(str, range(3000)))


@pytest.fixture(scope='module')
def specs(plays):
    "Each family's tokenizer.json: GPT-2's published one, and each family's pipeline with 1000 tokens learned from the plays by chapter 16a's trainer."
    return {k: gpt2_tokenizer_json() if k == 'gpt2 (published)' else family_tokenizer_json(k, plays, 1000) for k in KINDS}


@pytest.fixture(scope='module')
def bank():
    b = agreement_bank(load_shakespeare('valid'))
    assert sum(map(len, b.values())) >= 500
    return [t for texts in b.values() for t in texts]


def reference(spec): return tokenizers.Tokenizer.from_str(json.dumps(spec))
def as_tokenizers_reads(text): return text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace')   # tokenizers refuses a lone surrogate


def disagreements(ours, ref, texts, **kw):
    "The texts on which ids, or decoded text (with and without special tokens), differ."
    out = []
    for t in texts:
        a, b = ref.encode(as_tokenizers_reads(t), **kw).ids, ours.encode(t, **kw)
        if a != b or ref.decode(a, skip_special_tokens=False) != ours.decode(b) or ref.decode(a) != ours.decode(b, skip_special_tokens=True): out.append(t)
    return out


@pytest.mark.parametrize('kind', KINDS)
def test_every_family_agrees_with_tokenizers_on_the_bank(kind, specs, bank):
    ours, ref = HubTokenizer(specs[kind]), reference(specs[kind])
    assert disagreements(ours, ref, bank) == []
    assert disagreements(ours, ref, bank[:60], add_special_tokens=False) == []
    assert len(ours) == ref.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize('kind', ['llama3', 'llama2', 'mistral', 'gemma'])
def test_transformers_fast_tokenizer_adds_the_same_bos(kind, specs, bank, tmp_path):
    transformers = pytest.importorskip('transformers')
    (tmp_path / 'tokenizer.json').write_text(json.dumps(specs[kind]), encoding='utf-8')
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / 'tokenizer.json'))
    ours = BPETokenizer.from_tokenizer_json(tmp_path / 'tokenizer.json')
    bos = ours.token_ids.get(FAMILIES[kind]['bos'], ours.special_tokens.get(FAMILIES[kind]['bos']))
    for t in bank:
        ids = ours.encode(t)
        assert ids[0] == bos and ids == fast.encode(as_tokenizers_reads(t)) and ours.decode(ids) == fast.decode(ids)
        assert ours.encode(t, add_special_tokens=False) == ids[1:]


@pytest.mark.parametrize('kind, change, where', [
    ('llama3', lambda s: s['pre_tokenizer']['pretokenizers'][0]['pattern'].update(Regex=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""), 'GPT-2\'s split'),
    ('qwen2', lambda s: s.update(normalizer=None), 'no NFC'),
    ('smollm2', lambda s: s['pre_tokenizer']['pretokenizers'][1].update(use_regex=False), "no GPT-2 split after the digits'"),
    ('llama2', lambda s: s['model'].update(byte_fallback=False), 'no byte fallback'),
    ('llama2', lambda s: s['normalizer'].update(normalizers=s['normalizer']['normalizers'][1:]), 'no dummy prefix'),
    ('mistral', lambda s: s['pre_tokenizer'].update(prepend_scheme='always'), "prepend 'always'"),
    ('gemma', lambda s: s['decoder'].update(decoders=s['decoder']['decoders'][:1] + s['decoder']['decoders'][2:]), 'no byte-fallback decoding'),
])
def test_a_step_of_the_pipeline_left_out_is_caught_by_the_bank(kind, change, where, specs, bank):
    "The bank can fail: each family read with one step of its pipeline changed disagrees with tokenizers on some texts."
    wrong = json.loads(json.dumps(specs[kind])); change(wrong)
    assert len(disagreements(HubTokenizer(wrong), reference(specs[kind]), bank)) > 0, where


def test_ignore_merges_takes_a_word_that_is_a_token_whole(specs):
    spec = json.loads(json.dumps(specs['llama3']))
    vocab = spec['model']['vocab']
    vocab['Ġvouchsafe'] = max(vocab.values()) + 1                           # a token no merge makes, as converted tiktoken vocabularies hold
    for a in spec['added_tokens']: a['id'] += 1
    spec['post_processor']['processors'][1]['special_tokens']['<|begin_of_text|>']['ids'] = [vocab['Ġvouchsafe'] + 1]
    text = 'I vouchsafe it, vouchsafe'
    assert HubTokenizer(spec).encode(text) == reference(spec).encode(text).ids and vocab['Ġvouchsafe'] in HubTokenizer(spec).encode(text)
    spec['model']['ignore_merges'] = False
    assert HubTokenizer(spec).encode(text) == reference(spec).encode(text).ids and vocab['Ġvouchsafe'] not in HubTokenizer(spec).encode(text)


def test_merges_in_both_spellings_read_the_same(specs, bank):
    spec = specs['qwen2']
    strings = {**spec, 'model': {**spec['model'], 'merges': [' '.join(m) for m in spec['model']['merges']]}}
    assert isinstance(spec['model']['merges'][0], list) and isinstance(specs['gpt2 (published)']['model']['merges'][0], str)
    a, b = HubTokenizer(spec), HubTokenizer(strings)
    assert a.merges == b.merges and [a.encode(t) for t in bank[:100]] == [b.encode(t) for t in bank[:100]]


def test_a_long_piece_merges_with_a_heap_as_tokenizers_does():
    "A SentencePiece-style vocabulary with a token holding '▁' inside ('a▁b') cannot be cut into words: the whole text is one piece."
    letters = ['▁', 'a', 'b', 'c']
    merges = [['a', '▁'], ['a▁', 'b'], ['b', 'c'], ['▁', 'a'], ['c', 'c'], ['a▁b', 'cc'], ['▁a', 'bc']]
    vocab = {t: i for i, t in enumerate(letters + [a + b for a, b in merges] + ['<unk>'])}
    spec = {'added_tokens': [], 'normalizer': {'type': 'Replace', 'pattern': {'String': ' '}, 'content': '▁'}, 'pre_tokenizer': None, 'post_processor': None,
            'decoder': {'type': 'Replace', 'pattern': {'String': '▁'}, 'content': ' '},
            'model': {'type': 'BPE', 'unk_token': '<unk>', 'fuse_unk': True, 'byte_fallback': False, 'vocab': vocab, 'merges': merges}}
    ours, ref = HubTokenizer(spec), reference(spec)
    assert ours._words is None
    import random
    r = random.Random(0)
    for n in (1, 5, 47, 48, 49, 200, 3000):
        text = ''.join(r.choice('abc  d') for _ in range(n))
        assert ours.encode(text) == ref.encode(text).ids and ours.decode(ours.encode(text)) == ref.decode(ref.encode(text).ids)


def test_added_tokens_strip_and_single_word_as_tokenizers_matches_them(specs):
    spec = json.loads(json.dumps(specs['gpt2']))
    n = len(spec['model']['vocab']) + len(spec['added_tokens'])
    spec['added_tokens'] += [{'id': n, 'content': '<mask>', 'single_word': False, 'lstrip': True, 'rstrip': False, 'normalized': False, 'special': True},
                             {'id': n + 1, 'content': 'Hark', 'single_word': True, 'lstrip': False, 'rstrip': False, 'normalized': False, 'special': False},
                             {'id': n + 2, 'content': '<sep>', 'single_word': False, 'lstrip': False, 'rstrip': True, 'normalized': False, 'special': True}]
    ours, ref = HubTokenizer(spec), reference(spec)
    texts = ['Hello   <mask> world', 'Hark! Harkness, Hark', '<sep>   x <sep>', 'a<mask><sep>\n\nHark', ' <mask>']
    assert [ours.encode(t) for t in texts] == [ref.encode(t).ids for t in texts]


def test_special_tokens_allowed_and_disallowed_as_tiktoken(specs):
    tiktoken = pytest.importorskip('tiktoken')
    gpt2 = gpt2_tokenizer()
    ranks = {v: k for k, v in gpt2.vocab.items() if k != 50256}
    enc = tiktoken.Encoding('gpt2', pat_str=gpt2.pattern, mergeable_ranks=ranks, special_tokens={'<|endoftext|>': 50256})
    hub = HubTokenizer(specs['gpt2 (published)'])
    text = 'a<|endoftext|>b <|endoftext|>'
    for allowed in ('all', {'<|endoftext|>'}, set()):
        want = enc.encode(text, allowed_special=allowed, disallowed_special=())
        assert gpt2.encode(text, allowed_special=allowed) == want == hub.encode(text, allowed_special=allowed, add_special_tokens=False)
    for tok in (gpt2, hub):
        with pytest.raises(ValueError, match=r"the text holds the special token '<\|endoftext\|>', which disallowed_special forbids"):
            tok.encode(text, allowed_special=set(), disallowed_special='all')
        with pytest.raises(TypeError, match="allowed_special must be 'all' or a set of special tokens, got 'none'"): tok.encode(text, allowed_special='none')
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text)


def test_streaming_equals_encoding_at_once_for_each_family(specs):
    text = load_shakespeare('valid')[:30_000] + '<|im_start|>日本語\n<|im_end|><s>[INST] 12345 <start_of_turn>\nOK'
    for kind in KINDS:
        tok = HubTokenizer(specs[kind])
        chunks = [text[k:k + 997] for k in range(0, len(text), 997)]
        assert list(tok.encode_iterable(iter(chunks), buffer=500)) == tok.encode(text), kind
    assert HubTokenizer(specs['llama3'])._line_cuts and not HubTokenizer(specs['llama2'])._line_cuts


def test_streaming_a_byte_level_file_holds_little(specs):
    "Memory held while streaming, beyond the cache of pieces (filled first by encoding the text at once): about the buffer, not the text."
    tok, text = HubTokenizer(specs['llama3']), load_shakespeare('valid')
    n, lines = len(tok.encode(text)), text.splitlines(keepends=True)
    tracemalloc.start()
    assert sum(1 for _ in tok.encode_iterable(iter(lines), buffer=4096)) == n
    peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
    assert peak < 200_000 < len(text), f"peak {peak:,} bytes for {len(text):,} characters"


def test_the_reader_finds_the_config_beside_and_takes_paths(plays, tmp_path):
    folder = write_family(tmp_path / 'smol', 'smollm2', plays, 600)
    for path in (folder, folder / 'tokenizer.json', str(folder / 'tokenizer.json')):
        tok = BPETokenizer.from_tokenizer_json(path)
        assert isinstance(tok, HubTokenizer) and tok.chat_template == CHAT_TEMPLATES['smollm2']
        assert tok.special_tokens_map() == {'bos_token': '<|im_start|>', 'eos_token': '<|im_end|>'}
    (folder / 'tokenizer_config.json').unlink()
    (folder / 'chat_template.jinja').write_text('{{ messages[0].content }}', encoding='utf-8')
    assert BPETokenizer.from_tokenizer_json(folder).apply_chat_template([{'role': 'user', 'content': 'Hi'}]) == 'Hi'


CONVERSATIONS = [
    [{'role': 'user', 'content': 'Who art thou?'}],
    [{'role': 'system', 'content': 'Answer in verse.'}, {'role': 'user', 'content': '  What light through yonder window breaks?\n'}],
    [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Good morrow.'}, {'role': 'user', 'content': 'Count: 1234567, café 日本 🙂'}],
]
TOOLS = [{'type': 'function', 'function': {'name': 'get_weather', 'description': 'The weather in a city: «sunny»', 'parameters': {
    'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}]
TOOL_CHAT = [{'role': 'user', 'content': 'Weather in Verona?'},
             {'role': 'assistant', 'tool_calls': [{'type': 'function', 'function': {'name': 'get_weather', 'arguments': {'city': 'Verona'}}}]},
             {'role': 'tool', 'content': '{"sky": "clear"}'}]


@pytest.mark.parametrize('family, template', [('smollm2', 'smollm2'), ('llama3', 'llama3'), ('llama3', 'llama3.1'), ('qwen2', 'qwen2'),
                                               ('llama2', 'llama2'), ('mistral', 'mistral'), ('gemma', 'gemma')])
def test_chat_templates_render_as_transformers_renders_them(family, template, plays, tmp_path):
    transformers = pytest.importorskip('transformers')
    folder = write_family(tmp_path, family, plays[:100_000], 600, template=template)
    ours = BPETokenizer.from_tokenizer_json(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    checked = 0
    for chat in CONVERSATIONS + [TOOL_CHAT]:
        for gen in (True, False):
            kw = {'tools': TOOLS} if chat is TOOL_CHAT else {}
            try: want = theirs.apply_chat_template(chat, add_generation_prompt=gen, tokenize=False, **kw)
            except Exception as e:                                            # a template that refuses a conversation refuses it here too
                with pytest.raises(ValueError, match='the chat template failed to render: ' + re.escape(str(e))):
                    ours.apply_chat_template(chat, add_generation_prompt=gen, **kw)
                continue
            assert ours.apply_chat_template(chat, add_generation_prompt=gen, **kw) == want
            ids = theirs.apply_chat_template(chat, add_generation_prompt=gen, tokenize=True, return_dict=True, **kw)['input_ids']
            assert ours.apply_chat_template(chat, add_generation_prompt=gen, tokenize=True, **kw) == ids
            checked += 1
    assert checked >= 4


@pytest.mark.parametrize('change, message', [
    (lambda s: s['model'].update(type='WordPiece'), "the model is WordPiece, not BPE; only BPE"),
    (lambda s: s.update(model={'type': 'Unigram', 'vocab': [['a', 0.0]]}), "the model is Unigram, not BPE"),
    (lambda s: s['model']['merges'].insert(0, ['Ġ', 'zzz']), r"merge 0 \('Ġ', 'zzz'\) names 'zzz', which the vocabulary lacks"),
    (lambda s: s['model']['merges'].insert(0, 'Ġ t h'), r"merge 0 is 'Ġ t h', not two tokens \('a b' or \['a', 'b'\]\)"),
    (lambda s: s['added_tokens'][0].update(id=99999), r"the added token '<\|endoftext\|>' has id 99999, outside the vocabulary's ids 0 to 999 \(999 of the model, 1 added\)"),
    (lambda s: s['added_tokens'][0].update(id=300), r"the added token '<\|endoftext\|>' has id 300, which the vocabulary gives to"),
    (lambda s: s.update(pre_tokenizer={'type': 'BertPreTokenizer'}), "the pre-tokenizer 'BertPreTokenizer' is not supported"),
    (lambda s: s.update(normalizer={'type': 'BertNormalizer'}), "the normalizer 'BertNormalizer' is not supported"),
    (lambda s: s['model'].update(continuing_subword_prefix='##'), "the BPE model's continuing_subword_prefix is '##'; only '' is supported"),
])
def test_a_file_of_another_kind_or_with_a_mistake_is_one_clear_error(change, message, specs, tmp_path):
    spec = json.loads(json.dumps(specs['gpt2'])); change(spec)
    (tmp_path / 'tokenizer.json').write_text(json.dumps(spec), encoding='utf-8')
    with pytest.raises(ValueError, match=message) as e: BPETokenizer.from_tokenizer_json(tmp_path / 'tokenizer.json')
    assert '\n' not in str(e.value) and str(tmp_path / 'tokenizer.json') in str(e.value)


def test_bad_files_and_templates_are_one_clear_error(tmp_path, specs):
    with pytest.raises(FileNotFoundError, match="no such file"): BPETokenizer.from_tokenizer_json(tmp_path / 'nothing.json')
    (tmp_path / 'tokenizer.json').write_text('{"model": ', encoding='utf-8')
    with pytest.raises(ValueError, match=r"tokenizer.json: not JSON .*; expected a model's tokenizer.json"): BPETokenizer.from_tokenizer_json(tmp_path)
    tok = HubTokenizer(specs['gemma'], {'bos_token': '<bos>', 'chat_template': CHAT_TEMPLATES['gemma']})
    with pytest.raises(ValueError, match="the chat template failed to render: System role not supported"):
        tok.apply_chat_template([{'role': 'system', 'content': 'x'}])
    with pytest.raises(ValueError, match=r"the chat template does not parse: .* \(line 1\)"): tok.apply_chat_template([], chat_template='{% if %}')
    with pytest.raises(ValueError, match="this tokenizer has no chat template"): HubTokenizer(specs['gemma']).apply_chat_template([])
    with pytest.raises(TypeError, match="messages must be a list of dicts"): tok.apply_chat_template('Hi')
    with pytest.raises(ValueError, match="token ids are at least 0, got -1"): tok.decode([-1])
    # an id past the vocabulary (a padded output layer's row) is dropped, as tokenizers drops it
    assert tok.decode([5000, 300, 5001]) == reference(specs['gemma']).decode([5000, 300, 5001]) == tok.decode([300])
