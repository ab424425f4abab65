"Embeddings: sqrt(d_model) scaling, clear errors for bad ids, real weight tying."
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_tutorial.embeddings import Embeddings, check_token_ids


def test_scaling_and_shape():
    torch.manual_seed(0)
    e = Embeddings(11, 16)
    tokens = torch.tensor([[1, 5, 10], [0, 0, 3]])
    out = e(tokens)
    assert out.shape == (2, 3, 16)
    torch.testing.assert_close(out, e.lut.weight[tokens] * math.sqrt(16))
    assert isinstance(e.lut, nn.Embedding)


@pytest.mark.parametrize("bad, shown", [(-1, "-1"), (11, "11"), (1000, "1000")])
def test_out_of_range_id_names_id_and_size(bad, shown):
    with pytest.raises(ValueError, match=rf"token id {shown} is outside the vocabulary \[0, 11\)"):
        Embeddings(11, 4)(torch.tensor([[0, bad, 2]]))


def test_range_ends_are_fine():
    check_token_ids(torch.tensor([0, 10]), 11)


@pytest.mark.parametrize("ids", [torch.tensor([1.0, 2.0]), torch.tensor([True, False]), [1, 2]])
def test_non_integer_ids_type_error(ids):
    with pytest.raises(TypeError, match="integer tensor"):
        check_token_ids(ids, 11)


def test_tying_shares_one_tensor_and_both_gradients():
    torch.manual_seed(1)
    V, d = 9, 8
    embed, out = Embeddings(V, d), nn.Linear(d, V, bias=False)
    untied_count = sum(p.numel() for p in [*embed.parameters(), *out.parameters()])
    out.weight = embed.lut.weight
    assert out.weight is embed.lut.weight
    both = nn.ModuleList([embed, out])
    assert untied_count - sum(p.numel() for p in both.parameters()) == V * d

    embed_u = Embeddings(V, d); embed_u.load_state_dict(embed.state_dict())
    out_u = nn.Linear(d, V, bias=False); out_u.weight.data.copy_(embed.lut.weight.data)
    tokens, targets = torch.randint(0, V, (2, 5)), torch.randint(0, V, (2, 5))
    F.cross_entropy(out(embed(tokens)).view(-1, V), targets.view(-1)).backward()
    F.cross_entropy(out_u(embed_u(tokens)).view(-1, V), targets.view(-1)).backward()
    torch.testing.assert_close(embed.lut.weight.grad, embed_u.lut.weight.grad + out_u.weight.grad)

    before = embed.lut.weight.detach().clone()
    torch.optim.SGD(both.parameters(), lr=0.1).step()
    assert not torch.equal(embed.lut.weight, before)
    assert out.weight is embed.lut.weight
