"Training utilities: batches, loss, schedule, the loop and attention capture (checkpoints: tests/test_model_files.py)."
import math
import pytest
import torch
from torch import nn
from transformer_tutorial.model import Transformer
from transformer_tutorial.training import (select_device, shift_right, make_batch, sequence_loss, warmup_inverse_sqrt,
                                           make_optimizer, train, record_attention)

PAD, START, END = 0, 1, 2


def toy_batches(seed, batch_size=16, length=5, vocab=8):
    g = torch.Generator().manual_seed(seed)
    def next_batch():
        src = torch.randint(3, vocab, (batch_size, length), generator=g)
        return make_batch(src, torch.cat([src, torch.full((batch_size, 1), END)], 1), PAD, START)
    next_batch.generator = g
    return next_batch


def toy_run(steps, seed=0):
    torch.manual_seed(seed)
    model = Transformer(8, 8, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=16)
    opt, sched = make_optimizer(model, lr=3e-3, warmup=10)
    nb = toy_batches(seed)
    return model, opt, sched, nb, train(model, nb, steps, opt, sched, PAD, device='cpu', progress=False)


def test_select_device():
    assert select_device('cpu') == torch.device('cpu')
    assert select_device().type in ('cpu', 'cuda', 'mps')


def test_make_batch_shift_and_masks():
    src = torch.tensor([[5, 7, 3], [4, 0, 0]])
    tgt = torch.tensor([[5, 7, 3, END], [4, END, 0, 0]])
    b = make_batch(src, tgt, PAD, START)
    assert b.tgt_in.tolist() == [[START, 5, 7, 3], [START, 4, END, 0]]
    assert torch.equal(shift_right(tgt, START)[:, 1:], tgt[:, :-1])
    assert b.src_mask[1, 0, 0].tolist() == [True, False, False]
    assert b.tgt_mask.shape == (2, 1, 4, 4) and not b.tgt_mask[0, 0, 0, 1] and b.tgt_mask[0, 0, 3, 0]


def test_sequence_loss_ignores_pads_and_smooths():
    torch.manual_seed(0)
    logits, target = torch.randn(1, 3, 5), torch.tensor([[4, 3, PAD]])
    logp = logits.log_softmax(-1)[0, :2]
    torch.testing.assert_close(sequence_loss(logits, target, PAD), -logp[[0, 1], [4, 3]].mean())
    q = torch.full((2, 5), 0.1 / 5); q[[0, 1], [4, 3]] += 0.9
    torch.testing.assert_close(sequence_loss(logits, target, PAD, 0.1), -(q * logp).sum(-1).mean())
    with pytest.raises(ValueError, match='disagree'):
        sequence_loss(logits, target[:, :2], PAD)


def test_schedule_matches_paper_formula():
    d_model, warmup = 512, 400
    opt, sched = make_optimizer(nn.Linear(2, 2), lr=d_model ** -0.5 * warmup ** -0.5, warmup=warmup)
    got = []
    for _ in range(2000): got.append(opt.param_groups[0]['lr']); opt.step(); sched.step()
    want = [d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5) for s in range(1, 2001)]
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-6, atol=0)
    assert opt.param_groups[0]['betas'] == (0.9, 0.98) and opt.param_groups[0]['eps'] == 1e-9


def test_schedule_cooldown_and_errors():
    f = warmup_inverse_sqrt(10, total=100, cooldown=0.5)
    assert f(9) == pytest.approx(1.0) and f(49) == pytest.approx(math.sqrt(10 / 50))
    assert f(99) == pytest.approx(math.sqrt(10 / 100) / 50)  # last step: 1/n_cool of the inverse-sqrt value
    with pytest.raises(ValueError, match='warmup must be'): warmup_inverse_sqrt(0)
    with pytest.raises(ValueError, match='total'): warmup_inverse_sqrt(10, cooldown=0.3)


def test_training_lowers_loss_and_is_reproducible():
    *_, h1 = toy_run(80)
    *_, h2 = toy_run(80)
    assert sum(h1['loss'][-10:]) < 0.7 * sum(h1['loss'][:10])
    assert h1['loss'] == h2['loss'] and len(h1['lr']) == len(h1['accuracy']) == 80
    *_, h3 = toy_run(80, seed=1)
    assert h3['loss'] != h1['loss']


def test_record_attention():
    model, *_ , nb, _ = toy_run(5)
    b = nb(); model.eval()
    with torch.no_grad():
        plain = model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
        with record_attention(model) as attn:
            hooked = model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    assert set(attn) == {'encoder.layers.0.self_attn', 'decoder.layers.0.self_attn', 'decoder.layers.0.cross_attn'}
    assert attn['decoder.layers.0.cross_attn'].shape == (16, 2, 6, 5)
    assert attn['decoder.layers.0.self_attn'][0, 0].triu(1).abs().max() == 0  # causal
    torch.testing.assert_close(attn['encoder.layers.0.self_attn'].sum(-1), torch.ones(16, 2, 5))
    torch.testing.assert_close(hooked, plain, atol=1e-5, rtol=1e-5)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())




# CS336 (Stanford, spring 2025), assignment 1, `test_get_lr_cosine_schedule`: max 1, min 0.1, 7 warmup iterations,
# a cycle of 21; the expected learning rates for iterations 0 to 24, written out here from the published test.
CS336_COSINE = [0, 0.14285714285714285, 0.2857142857142857, 0.42857142857142855, 0.5714285714285714, 0.7142857142857143,
                0.8571428571428571, 1.0, 0.9887175604818206, 0.9554359905560885, 0.9018241671106134, 0.8305704108364301,
                0.7452476826029011, 0.6501344202803414, 0.55, 0.44986557971965857, 0.3547523173970989, 0.26942958916356996,
                0.19817583288938662, 0.14456400944391146, 0.11128243951817937, 0.1, 0.1, 0.1, 0.1]


def test_cosine_schedule_passes_cs336s_test():
    "CS336 numbers the iteration whose lr is 0 as 0; the course's step 0 is the first update (chapter 10), one later."
    from transformer_tutorial.training import warmup_cosine
    def get_lr_cosine_schedule(it, max_learning_rate, min_learning_rate, warmup_iters, cosine_cycle_iters):
        return max_learning_rate * warmup_cosine(warmup_iters, cosine_cycle_iters, min_learning_rate / max_learning_rate)(it - 1)
    got = [get_lr_cosine_schedule(it, 1, 0.1, 7, 21) for it in range(25)]
    torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), torch.tensor(CS336_COSINE, dtype=torch.float64), rtol=0, atol=1e-12)


def test_cosine_schedule_through_make_optimizer_and_its_errors():
    from transformer_tutorial.training import warmup_cosine
    opt, sched = make_optimizer(nn.Linear(2, 2), lr=1e-2, warmup=4, total=12, floor=0.2, schedule='cosine')
    lrs = []
    for _ in range(16): lrs.append(opt.param_groups[0]['lr']); opt.step(); sched.step()
    assert lrs[:4] == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2]) and lrs[3] == max(lrs)
    assert all(a > b for a, b in zip(lrs[3:11], lrs[4:12])) and lrs[11:] == pytest.approx([2e-3] * 5)
    assert lrs[7] == pytest.approx(2e-3 + 8e-3 * 0.5 * (1 + math.cos(math.pi * 4 / 8)))
    for kwargs, message in [(dict(warmup=0, total=10), 'warmup must be'), (dict(warmup=2.5, total=10), 'warmup must be'),
                            (dict(warmup=10, total=5), r'total must be .* at least the warmup \(10\)'),
                            (dict(warmup=2, total=10, floor=1.0), r'floor must be in \[0, 1\)')]:
        with pytest.raises(ValueError, match=message): warmup_cosine(**kwargs)
    with pytest.raises(ValueError, match="schedule must be one of 'inverse_sqrt', 'cosine', got 'cos'"):
        make_optimizer(nn.Linear(2, 2), lr=1e-2, warmup=4, total=12, schedule='cos')
    with pytest.raises(ValueError, match='cooldown is for the inverse-sqrt schedule'):
        make_optimizer(nn.Linear(2, 2), lr=1e-2, warmup=4, total=12, cooldown=0.4, schedule='cosine')


def test_train_task_with_the_cosine_schedule_resumes_with_it(tmp_path):
    "The schedule is part of the run a checkpoint records: a resumed cosine run goes on with the same learning rates."
    from transformer_tutorial.copy_task import train_task
    kw = dict(eval_every=6, n_eval=10, progress=False, device='cpu', schedule='cosine', warmup=3, schedule_steps=10, lr_floor=0.1)
    _, whole, _ = train_task('copy', steps=24, **kw)
    train_task('copy', steps=12, checkpoint=tmp_path / 'run', **kw)
    _, resumed, _ = train_task('copy', steps=24, resume=tmp_path / 'run', **{**kw, 'schedule': 'inverse_sqrt'})
    assert resumed['lr'] == whole['lr']
    assert max(whole['lr']) == whole['lr'][2] == pytest.approx(1e-2) and whole['lr'][9:] == pytest.approx([1e-3] * 15)
