"""A bank of student implementations for the checks of exercise 7 (the label-smoothed loss and the warmup schedule):
plausible mistakes, each named with the mistake it makes, and correct versions written differently, which the checks
must accept. BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
import math
import numpy as np
import torch
import torch.nn.functional as F

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

LOSS, SCHED = 'check_label_smoothed_loss', 'check_warmup_schedule'

# ---------------------------------------------------------------- the label-smoothed loss
@_reg(LOSS, correct=True)
def loss_pytorch(logits, target, pad_id, smoothing):
    "CORRECT: PyTorch's own, on the flattened positions."
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=smoothing)

@_reg(LOSS, correct=True)
def loss_boolean_index(logits, target, pad_id, smoothing):
    "CORRECT: keep the non-pad positions first, then the two terms."
    keep = target != pad_id
    logp = logits[keep].log_softmax(-1)                                   # (N, V)
    nll = -logp.gather(1, target[keep][:, None]).squeeze(1)
    return ((1 - smoothing) * nll - smoothing * logp.mean(-1)).mean()

@_reg(LOSS, correct=True)
def loss_target_distribution(logits, target, pad_id, smoothing):
    "CORRECT: builds the smoothed target distribution and takes -sum(t * log p)."
    V = logits.size(-1)
    t = torch.full_like(logits, smoothing / V).scatter_add(-1, target.unsqueeze(-1), torch.full_like(logits[..., :1], 1 - smoothing))
    per = -(t * logits.log_softmax(-1)).sum(-1)
    mask = (target != pad_id).to(logits.dtype)
    return (per * mask).sum() / mask.sum()

@_reg(LOSS, correct=True)
def loss_nll_plus_uniform(logits, target, pad_id, smoothing):
    "CORRECT: F.nll_loss for the target term, the uniform term by hand."
    logp = logits.log_softmax(-1)
    nll = F.nll_loss(logp.transpose(1, 2), target, ignore_index=pad_id)
    uniform = -logp.mean(-1)[target != pad_id].mean()
    return (1 - smoothing) * nll + smoothing * uniform

@_reg(LOSS)
def loss_no_smoothing(logits, target, pad_id, smoothing):
    "MISTAKE: the smoothing argument is never used."
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id)

@_reg(LOSS)
def loss_pad_counted(logits, target, pad_id, smoothing):
    "MISTAKE: no ignore_index: pad positions are scored too."
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=smoothing)

@_reg(LOSS)
def loss_divided_by_all_positions(logits, target, pad_id, smoothing):
    "MISTAKE: pad positions zeroed in the sum but counted in the mean."
    per = F.cross_entropy(logits.transpose(1, 2), target, reduction='none', label_smoothing=smoothing)
    return (per * (target != pad_id)).mean()

@_reg(LOSS)
def loss_annotated_kl(logits, target, pad_id, smoothing):
    "MISTAKE: The Annotated Transformer's criterion: KL divergence, smoothing/(V - 2) off the target and pad, per non-pad token."
    V = logits.size(-1)
    logp = logits.log_softmax(-1)
    t = torch.full_like(logp, smoothing / (V - 2))
    t = t.scatter(-1, target.unsqueeze(-1), 1 - smoothing)
    t[..., pad_id] = 0
    keep = target != pad_id
    return F.kl_div(logp[keep], t[keep], reduction='sum') / keep.sum()

@_reg(LOSS)
def loss_log_of_softmax(logits, target, pad_id, smoothing):
    "MISTAKE: log(softmax(x)) instead of log_softmax: -inf where the softmax underflows to 0."
    logp = torch.log(torch.softmax(logits, -1))
    keep = target != pad_id
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return ((1 - smoothing) * nll - smoothing * logp.mean(-1))[keep].mean()

@_reg(LOSS)
def loss_manual_exp(logits, target, pad_id, smoothing):
    "MISTAKE: exp(x) / sum(exp(x)) without subtracting the maximum: overflows to inf / inf."
    p = logits.exp() / logits.exp().sum(-1, keepdim=True)
    logp = p.log()
    keep = target != pad_id
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return ((1 - smoothing) * nll - smoothing * logp.mean(-1))[keep].mean()

@_reg(LOSS)
def loss_uniform_summed(logits, target, pad_id, smoothing):
    "MISTAKE: smoothing times the sum of -log p over the classes, not their mean."
    logp = logits.log_softmax(-1)
    keep = target != pad_id
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return ((1 - smoothing) * nll - smoothing * logp.sum(-1))[keep].mean()

@_reg(LOSS)
def loss_pad_zero(logits, target, pad_id, smoothing):
    "MISTAKE: pad id 0 hard-coded."
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, label_smoothing=smoothing)

@_reg(LOSS)
def loss_as_number(logits, target, pad_id, smoothing):
    "MISTAKE: returns .item() wrapped in a new tensor: no gradient flows."
    return torch.tensor(F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=smoothing).item(),
                        dtype=logits.dtype)

@_reg(LOSS)
def loss_per_position(logits, target, pad_id, smoothing):
    "MISTAKE: reduction='none': one loss per position."
    return F.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad_id, label_smoothing=smoothing, reduction='none')

@_reg(LOSS)
def loss_float32(logits, target, pad_id, smoothing):
    "MISTAKE: casts to float32: a float64 caller gets float32 back."
    return F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=smoothing)

@_reg(LOSS)
def loss_other_device(logits, target, pad_id, smoothing):
    "MISTAKE: the loss moved to another device (a hard-coded .to('cuda'); 'meta' stands for it on a machine without a GPU)."
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=smoothing).to('meta')

@_reg(LOSS)
def loss_mean_of_sequence_means(logits, target, pad_id, smoothing):
    "MISTAKE: each sequence's mean loss, then the mean of those: a position of a short sequence weighs more."
    per = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=pad_id, label_smoothing=smoothing, reduction='none')  # (B, L)
    real = target != pad_id
    return (per.sum(1) / real.sum(1))[real.any(1)].mean()

NAMED = {
    'loss_mean_of_sequence_means': "the mean of each sequence's mean",
    'loss_other_device': "returned a tensor on meta (called with (3, 5, 7), (3, 5), 0, 0.1): keep the inputs' device (cpu)",
    'loss_no_smoothing': 'the smoothing is not applied',
    'loss_pad_counted': 'pad positions are counted in the mean',
    'loss_divided_by_all_positions': 'divided by all B*L positions',
    'loss_annotated_kl': "The Annotated Transformer's KL divergence",
    'loss_log_of_softmax': 'use logits.log_softmax(-1)',
    'loss_manual_exp': 'use logits.log_softmax(-1)',
    'loss_uniform_summed': 'the uniform part is summed over the V classes',
    'loss_pad_zero': 'pad id 0 is hard-coded',
    'loss_as_number': 'keep the loss in the autograd graph',
    'loss_per_position': 'average over the non-pad positions to one number',
    'loss_float32': 'returned dtype torch.float32 for torch.float64 logits',
}

# ---------------------------------------------------------------- the warmup schedule
@_reg(SCHED, correct=True)
def schedule_min(step, warmup):
    "CORRECT: the one-liner."
    s = step + 1
    return min(s / warmup, math.sqrt(warmup / s))

@_reg(SCHED, correct=True)
def schedule_branches(step, warmup):
    "CORRECT: an if for the warmup and one for the decay."
    s = step + 1
    if s <= warmup: return s / warmup
    return (warmup / s) ** 0.5

@_reg(SCHED, correct=True)
def schedule_noam_normalized(step, warmup):
    "CORRECT: the paper's min(s^-0.5, s * warmup^-1.5), times sqrt(warmup) so that the peak is 1."
    s = step + 1
    return math.sqrt(warmup) * min(s ** -0.5, s * warmup ** -1.5)

@_reg(SCHED, correct=True)
def schedule_tensor(step, warmup):
    "CORRECT: computed with torch, a one-element float64 tensor."
    s = torch.tensor(step + 1.0, dtype=torch.float64)
    return torch.minimum(s / warmup, (warmup / s).sqrt())

@_reg(SCHED, correct=True)
def schedule_numpy(step, warmup):
    "CORRECT: computed with NumPy, a np.float32 (a real number, though not a Python float)."
    s = np.float32(step + 1)
    return np.minimum(s / np.float32(warmup), np.sqrt(np.float32(warmup) / s))

@_reg(SCHED)
def schedule_zero_based(step, warmup):
    "MISTAKE: s = step: division by zero at step 0 (LambdaLR asks for step 0 first)."
    return min(step / warmup, math.sqrt(warmup / step))

@_reg(SCHED)
def schedule_zero_first(step, warmup):
    "MISTAKE: s = step, with a guard that makes the first step's learning rate 0."
    if step == 0: return 0.0
    return min(step / warmup, math.sqrt(warmup / step))

@_reg(SCHED)
def schedule_noam_unnormalized(step, warmup):
    "MISTAKE: the paper's formula without d_model and without normalizing: it peaks at warmup^-0.5, not 1."
    s = step + 1
    return min(s ** -0.5, s * warmup ** -1.5)

@_reg(SCHED)
def schedule_inverse_step(step, warmup):
    "MISTAKE: decays as warmup / s instead of sqrt(warmup / s)."
    s = step + 1
    return min(s / warmup, warmup / s)

@_reg(SCHED)
def schedule_inverse_sqrt_step(step, warmup):
    "MISTAKE: decays as 1/sqrt(s): a drop from 1 to 1/sqrt(warmup) at the end of the warmup."
    s = step + 1
    return s / warmup if s < warmup else 1 / math.sqrt(s)

@_reg(SCHED)
def schedule_max(step, warmup):
    "MISTAKE: max of the two parts."
    s = step + 1
    return max(s / warmup, math.sqrt(warmup / s))

@_reg(SCHED)
def schedule_peak_late(step, warmup):
    "MISTAKE: warms up over warmup + 1 steps."
    s = step + 1
    return min(s / (warmup + 1), math.sqrt((warmup + 1) / s))

@_reg(SCHED)
def schedule_list(step, warmup):
    "MISTAKE: returns the two parts, not their minimum."
    s = step + 1
    return [s / warmup, math.sqrt(warmup / s)]

@_reg(SCHED)
def schedule_integer_division(step, warmup):
    "MISTAKE: the warmup part with //, 0 until the last warmup step."
    s = step + 1
    return min(s // warmup, math.sqrt(warmup / s))

NAMED.update({
    'schedule_integer_division': 's // warmup is integer division',
    'schedule_zero_based': 'divides by zero at step 0',
    'schedule_zero_first': 'the factor at step 0 is 0',
    'schedule_noam_unnormalized': 'the factor peaks at',
    'schedule_inverse_step': 'decays as warmup / s',
    'schedule_inverse_sqrt_step': 'use sqrt(warmup / s)',
    'schedule_max': 'max of the two parts instead of min',
    'schedule_peak_late': 'peaks at the wrong step',
    'schedule_list': 'return the factor as a number',
})
