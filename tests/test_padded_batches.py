"""Chapter 17a: texts of different lengths in one batch, padded on the left with an attention mask, as transformers' generate takes them.

Each row of a padded batch gives what the text gives alone, with and without the cache, for the course's blocks (GPT-2's learned
positions, Llama's RoPE, a sliding window); the course's models read from transformers generate what transformers generates
from the same padded batch; a mask that pads on the right, holds no token or has the wrong shape is refused by name.
"""
import pytest
import torch

from transformer_tutorial.gpt import GPT
from transformer_tutorial.llama import LLAMA_BLOCK, from_llama, from_mistral
from transformer_tutorial.llama_families import from_gemma2
from transformer_tutorial.gpt2 import from_gpt2
from transformer_tutorial.sampling import generate

BLOCKS = [{}, dict(positions='sinusoidal'), LLAMA_BLOCK, dict(LLAMA_BLOCK, sliding_window=5, num_kv_heads=2)]


def padded(texts, pad_id=0):
    "A left-padded batch (B, L) and its attention mask."
    L = max(len(t) for t in texts)
    ids = torch.stack([torch.cat([torch.full((L - len(t),), pad_id), t]) for t in texts])
    mask = torch.stack([torch.arange(L) >= L - len(t) for t in texts]).long()
    return ids, mask


@pytest.mark.parametrize('block', BLOCKS, ids=['gpt2', 'sinusoidal', 'llama', 'windowed'])
def test_each_row_of_a_padded_batch_is_the_text_alone(block):
    torch.manual_seed(0)
    model = GPT(61, 48, 32, 4, 2, 64, **block).eval()
    texts = [torch.randint(1, 61, (n,)) for n in (9, 3, 6)]
    ids, mask = padded(texts)
    with torch.no_grad():
        logits = model(ids, mask)
        for row, t in enumerate(texts): torch.testing.assert_close(logits[row, -len(t):], model(t[None])[0], atol=1e-5, rtol=0)
    for cache in (True, False):
        out = generate(model, ids, 15, temperature=0, attention_mask=mask, use_cache=cache)
        for row, t in enumerate(texts): assert torch.equal(out[row, ids.size(1) - len(t):], generate(model, t, 15, temperature=0))
    seeded = [generate(model, ids, 10, temperature=1.0, top_k=5, generator=3, attention_mask=mask, use_cache=c) for c in (True, False)]
    assert torch.equal(*seeded)                                            # sampling reads the same logits either way


def hf(family, **options):
    transformers = pytest.importorskip('transformers')
    Config, Model = {'llama': ('LlamaConfig', 'LlamaForCausalLM'), 'mistral': ('MistralConfig', 'MistralForCausalLM'),
                     'gemma2': ('Gemma2Config', 'Gemma2ForCausalLM'), 'gpt2': ('GPT2Config', 'GPT2LMHeadModel')}[family]
    torch.manual_seed(0)
    size = dict(n_positions=64, n_embd=32, n_head=4, n_layer=2) if family == 'gpt2' else \
           dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = getattr(transformers, Model)(getattr(transformers, Config)(vocab_size=61, pad_token_id=0, bos_token_id=None, eos_token_id=None,
                                                                       **size, **options)).eval()
    with torch.no_grad():
        for p in model.parameters(): p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize('family, load, options', [('llama', from_llama, {}), ('mistral', from_mistral, dict(sliding_window=6)),
                                                   ('gemma2', from_gemma2, dict(head_dim=8, sliding_window=6)), ('gpt2', from_gpt2, {})],
                         ids=['llama', 'mistral-window', 'gemma2', 'gpt2'])
def test_a_padded_batch_generates_what_transformers_generates(family, load, options):
    theirs = hf(family, **options)
    ours = load(theirs)
    ids, mask = padded([torch.randint(1, 61, (n,), generator=torch.Generator().manual_seed(n)) for n in (11, 4, 7)])
    with torch.no_grad():
        positions = (mask.cumsum(1) - 1).clamp(min=0)                      # as generate counts them; forward alone would count from the padding
        expected = theirs(ids, attention_mask=mask, position_ids=positions).logits
        got = ours(ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-4, rtol=0)   # the padding's own outputs are nobody's
    greedy = theirs.generate(ids, attention_mask=mask, max_new_tokens=25, do_sample=False, pad_token_id=0)
    for cache in (True, False): assert torch.equal(generate(ours, ids, 25, temperature=0, attention_mask=mask, use_cache=cache), greedy)


def test_masks_that_are_not_left_padding_are_refused_by_name():
    model = GPT(61, 32, 16, 2, 1, 32, **LLAMA_BLOCK).eval()
    ids = torch.randint(1, 61, (2, 5))
    cases = [(torch.tensor([[1, 1, 1, 0, 0], [1] * 5]), r"attention_mask row 0 is \[1, 1, 1, 0, 0\]: pad on the left \(0s, then 1s\)"),
             (torch.tensor([[0] * 5, [1] * 5]), r"attention_mask row 0 is \[0, 0, 0, 0, 0\]: pad on the left .* at least one token in each row"),
             (torch.ones(2, 4), r"attention_mask must be shaped as the ids, \(2, 5\), got \(2, 4\)"),
             (torch.full((2, 5), 2), "attention_mask must hold 1 for a token and 0 for padding")]
    for mask, message in cases:
        with pytest.raises(ValueError, match=message): generate(model, ids, 3, temperature=0, attention_mask=mask)
        with pytest.raises(ValueError, match=message): model(ids, mask)
    with pytest.raises(ValueError, match="slide=True with an attention_mask"):
        generate(model, ids, 3, attention_mask=torch.ones(2, 5), slide=True)
