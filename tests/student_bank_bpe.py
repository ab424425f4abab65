"""A bank of student implementations for the checks of exercise 9 (byte-pair encoding: the merge step and the
encoder): plausible mistakes, each named with the mistake it makes, and correct versions written differently, which
the checks must accept. BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

MERGE, ENCODE = 'check_merge', 'check_encode'

# ---------------------------------------------------------------- the merge step
@_reg(MERGE, correct=True)
def merge_while(ids, pair, new_id):
    "CORRECT: minbpe's loop."
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and ids[i] == pair[0] and ids[i + 1] == pair[1]: out.append(new_id); i += 2
        else: out.append(ids[i]); i += 1
    return out

@_reg(MERGE, correct=True)
def merge_skip_flag(ids, pair, new_id):
    "CORRECT: a for loop that skips the second id of a match."
    out, skip = [], False
    for a, b in zip(ids, list(ids[1:]) + [None]):
        if skip: skip = False; continue
        if (a, b) == tuple(pair): out.append(new_id); skip = True
        else: out.append(a)
    return out

@_reg(MERGE, correct=True)
def merge_recursive(ids, pair, new_id):
    "CORRECT: recursion on the rest of the list, returned as a tuple."
    if len(ids) < 2: return tuple(ids)
    if (ids[0], ids[1]) == tuple(pair): return (new_id,) + merge_recursive(ids[2:], pair, new_id)
    return (ids[0],) + merge_recursive(ids[1:], pair, new_id)

@_reg(MERGE)
def merge_from_the_right(ids, pair, new_id):
    "MISTAKE: scans from the end."
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and (ids[i - 1], ids[i]) == tuple(pair): out.append(new_id); i -= 2
        else: out.append(ids[i]); i -= 1
    return out[::-1]

@_reg(MERGE)
def merge_step_one(ids, pair, new_id):
    "MISTAKE: zip over neighbours: a match only replaces its first id, the second stays and may match again."
    return [new_id if (a, b) == tuple(pair) else a for a, b in zip(ids, ids[1:])] + list(ids[-1:])

@_reg(MERGE)
def merge_drops_last(ids, pair, new_id):
    "MISTAKE: the loop stops before the last id."
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair): out.append(new_id); i += 2
        else: out.append(ids[i]); i += 1
    return out

@_reg(MERGE)
def merge_first_only(ids, pair, new_id):
    "MISTAKE: returns after the first match."
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair): return list(ids[:i]) + [new_id] + list(ids[i + 2:])
    return list(ids)

@_reg(MERGE)
def merge_as_text(ids, pair, new_id):
    "MISTAKE: joins the ids into a string and replaces there."
    s = ' '.join(map(str, ids)).replace(f'{pair[0]} {pair[1]}', str(new_id))
    return [int(t) for t in s.split()]

@_reg(MERGE)
def merge_in_place(ids, pair, new_id):
    "MISTAKE: edits the caller's list."
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair): ids[i:i + 2] = [new_id]
        i += 1
    return ids

NAMED = {
    'merge_from_the_right': 'merges from the right',
    'merge_step_one': 'a match advances one position',
    'merge_drops_last': 'the last id is dropped',
    'merge_first_only': 'only the first occurrence is merged',
    'merge_as_text': 'matched inside a longer id',
    'merge_in_place': "changed the caller's list",
}

# ---------------------------------------------------------------- the encoder
def _merge(ids, pair, new_id): return merge_while(ids, pair, new_id)

@_reg(ENCODE, correct=True)
def encode_min_rank(text, merges):
    "CORRECT: minbpe's loop: the present pair with the smallest rank, until none is in merges."
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        pair = min(set(zip(ids, ids[1:])), key=lambda p: merges.get(p, float('inf')))
        if pair not in merges: break
        ids = _merge(ids, pair, merges[pair])
    return ids

@_reg(ENCODE, correct=True)
def encode_in_learned_order(text, merges):
    "CORRECT: every merge once, in the order learned: a merge can only make pairs of later merges."
    ids = list(text.encode('utf-8'))
    for pair, new_id in sorted(merges.items(), key=lambda kv: kv[1]): ids = _merge(ids, pair, new_id)
    return ids

@_reg(ENCODE, correct=True)
def encode_bytes_object(text, merges):
    "CORRECT: iterates over the bytes object, whose items are ints."
    ids = [b for b in bytes(text, 'utf-8')]
    ranked = sorted(merges, key=merges.get)
    changed = True
    while changed:
        changed = False
        for pair in ranked:
            if pair in zip(ids, ids[1:]): ids = _merge(ids, pair, merges[pair]); changed = True; break
    return ids

@_reg(ENCODE)
def encode_chars(text, merges):
    "MISTAKE: ord(c) per character instead of UTF-8 bytes."
    ids = [ord(c) for c in text]
    for pair, new_id in sorted(merges.items(), key=lambda kv: kv[1]): ids = _merge(ids, pair, new_id)
    return ids

@_reg(ENCODE)
def encode_latest_first(text, merges):
    "MISTAKE: max rank instead of min."
    ids = list(text.encode('utf-8'))
    while len(ids) >= 2:
        present = [p for p in zip(ids, ids[1:]) if p in merges]
        if not present: break
        pair = max(present, key=merges.get)
        ids = _merge(ids, pair, merges[pair])
    return ids

@_reg(ENCODE)
def encode_reverse_order(text, merges):
    "MISTAKE: the merges applied once each, newest first."
    ids = list(text.encode('utf-8'))
    for pair, new_id in sorted(merges.items(), key=lambda kv: -kv[1]): ids = _merge(ids, pair, new_id)
    return ids

@_reg(ENCODE)
def encode_bytes_only(text, merges):
    "MISTAKE: the merges dict is never used."
    return list(text.encode('utf-8'))

@_reg(ENCODE)
def encode_returns_bytes(text, merges):
    "MISTAKE: returns the bytes object."
    return text.encode('utf-8')

@_reg(ENCODE)
def encode_in_dict_order(text, merges):
    "MISTAKE: every merge once, in the dict's order: right only while the dict happens to be in the order the merges were learned."
    ids = list(text.encode('utf-8'))
    for pair, new_id in merges.items(): ids = _merge(ids, pair, new_id)
    return ids

NAMED.update({
    'encode_in_dict_order': "the merges applied in the dict's order",
    'encode_chars': 'characters as ord(c), not bytes',
    'encode_latest_first': 'the latest-learned merge first',
    'encode_reverse_order': 'the merges applied newest first',
    'encode_bytes_only': 'no merge was applied',
    'encode_returns_bytes': 'return the ids, a list of ints',
})
