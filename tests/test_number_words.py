"Numbers into words: the spelling rules, the held-out split, the task's interface, its input errors, and a short run that learns."
import re
import pytest
import torch
from transformer_tutorial.number_words import NumberWords, number_to_words, _heldout, ONES, TENS, WORDS, DIGITS
from transformer_tutorial.copy_task import train_task, evaluate
from transformer_tutorial.training import PAD, START, END

UNITS = {w: i for i, w in enumerate(ONES)} | {w: 10 * (i + 2) for i, w in enumerate(TENS)}


def words_to_number(text):
    "An independent reader of the spelling: sum units and tens, multiply by hundred, then by thousand."
    total = part = 0
    for w in text.split():
        if w == 'hundred': part *= 100
        elif w == 'thousand': total, part = (total + part) * 1000, 0
        else: part += UNITS[w]
    return total + part


@pytest.mark.parametrize('n, words', [(0, 'zero'), (5, 'five'), (10, 'ten'), (13, 'thirteen'), (20, 'twenty'), (40, 'forty'),
                                      (99, 'ninety nine'), (100, 'one hundred'), (101, 'one hundred one'),
                                      (1004, 'one thousand four'), (1234, 'one thousand two hundred thirty four'),
                                      (20019, 'twenty thousand nineteen'), (110000, 'one hundred ten thousand'),
                                      (300017, 'three hundred thousand seventeen'),
                                      (999999, 'nine hundred ninety nine thousand nine hundred ninety nine')])
def test_spelling(n, words):
    assert number_to_words(n) == words


def test_every_number_reads_back_and_follows_the_rules():
    seen = set()
    for n in list(range(0, 2000)) + list(range(2000, 10 ** 6, 37)):
        text = number_to_words(n)
        assert words_to_number(text) == n and text not in seen, n
        seen.add(text)
        assert ('zero' in text) == (n == 0) and '-' not in text and ' and ' not in text and re.fullmatch(r'[a-z]+( [a-z]+)*', text)


@pytest.mark.parametrize('n', [-1, 10 ** 6, 1.0, True, '12'])
def test_spelling_refuses_what_it_cannot_write(n):
    with pytest.raises(ValueError, match=r'n must be an integer from 0 to 999999'): number_to_words(n)


def test_heldout_split():
    n = torch.arange(10 ** 6)
    held = _heldout(n)
    assert not held[:100].any()
    for k in range(3, 7):
        share = held[10 ** (k - 1):10 ** k].float().mean().item()
        assert 0.09 < share < 0.11, (k, share)
    task = NumberWords()
    train = task._numbers(20000, torch.Generator().manual_seed(0), heldout=False)
    test = task._numbers(2000, torch.Generator().manual_seed(1), heldout=True)
    assert not _heldout(torch.tensor(train)).any() and _heldout(torch.tensor(test)).all()
    assert len(set(train) & set(test)) == 0 and min(test) >= 100
    lengths = torch.tensor([len(str(x)) for x in train])
    assert all(0.1 < (lengths == k).float().mean() < 0.23 for k in range(1, 7))   # digit counts about uniform


def test_task_interface_and_tokens():
    task = NumberWords()
    assert (task.src_vocab_size, task.tgt_vocab_size, task.max_src_len, task.max_tgt_len) == (13, 33, 6, 10)
    assert NumberWords(3).max_tgt_len == 5 and NumberWords(1).max_tgt_len == 2
    src, tgt = task.sample(200, torch.Generator().manual_seed(0))
    assert src.shape == (200, 6) and tgt.shape == (200, 10)
    for s, t in zip(src.tolist(), tgt.tolist()):
        digits = ''.join(DIGITS[i - 3] for i in s if i != PAD)
        assert s[:len(digits)] == [3 + DIGITS.index(c) for c in digits] and set(s[len(digits):]) <= {PAD}
        assert t.count(END) == 1 and task.decode(t) == number_to_words(int(digits))
        assert len(digits) == 1 or digits[0] != '0'
    a, b = task.batches(8, seed=4)(), task.batches(8, seed=4)()
    assert torch.equal(a.src, b.src) and a.tgt_in[:, 0].eq(START).all()
    assert task.to_dict() == {'name': 'number_words', 'max_digits': 6}
    assert torch.equal(task.encode(' 1204 '), torch.tensor([[4, 5, 3, 7]]))
    assert task.decode([3 + WORDS.index('forty'), 3 + WORDS.index('two'), END, 3]) == 'forty two'


@pytest.mark.parametrize('text, message', [('12a4', "'12a4' holds characters other than the digits 0-9: 'a'"),
                                           ('-5', "characters other than the digits 0-9: '-'"),
                                           ('', "'' has 0 digits; this task writes numbers of 1 to 6 digits"),
                                           ('1234567', "has 7 digits; this task writes numbers of 1 to 6 digits"),
                                           ('007', "'007' starts with 0: write the number without leading zeros")])
def test_encode_errors(text, message):
    with pytest.raises(ValueError) as e: NumberWords().encode(text)
    assert message in str(e.value)


@pytest.mark.parametrize('d', [0, 7, 2.0, True])
def test_max_digits_errors(d):
    with pytest.raises(ValueError, match='max_digits must be an integer from 1 to 6'): NumberWords(d)


def test_a_short_run_learns_three_digit_numbers():
    task = NumberWords(3)
    before = evaluate(train_task(task, steps=1, eval_every=1, n_eval=50, progress=False, num_layers=2)[0], task, n=300)
    model, hist, m = train_task(task, steps=300, eval_every=300, n_eval=300, progress=False, num_layers=2)
    assert sum(hist['loss'][-10:]) < 0.2 * sum(hist['loss'][:10])
    assert before['exact_match'] < 0.05 and m['exact_match'] > 0.5, (before, m)
