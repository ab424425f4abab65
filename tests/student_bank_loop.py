"""A bank of student implementations for the checks of exercise 10 (the training step and the training loop): plausible
mistakes, each named with the mistake it makes, and correct versions written differently, which the checks must accept.
BANK and NAMED as in student_bank.py; tests/test_student_bank.py runs them."""
import torch
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_, clip_grad_value_

from transformer_tutorial.training import sequence_loss, train

BANK = []
def _reg(check, correct=False):
    def deco(obj):
        BANK.append((check, obj, correct)); return obj
    return deco

STEP, LOOP = 'check_train_step', 'check_train_loop'

# ---------------------------------------------------------------- the training step
@_reg(STEP, correct=True)
def step_course_pieces(model, batch, optimizer, pad_id, clip):
    "CORRECT: the batch's logits and the course's sequence_loss."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP, correct=True)
def step_model_call_cross_entropy(model, batch, optimizer, pad_id, clip):
    "CORRECT: the model called on the batch's fields, F.cross_entropy on reshaped logits, model.zero_grad(set_to_none=True)."
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1), ignore_index=pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), max_norm=clip)
    optimizer.step()
    return float(loss)

@_reg(STEP)
def step_zero_after(model, batch, optimizer, pad_id, clip):
    "WRONG: the gradients zeroed after the step, not before the backward pass (the exercise's order): right only while .grad starts empty, and a model whose .grad holds an earlier backward's gradients adds them in."
    model.train()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    value = loss.item()
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    optimizer.zero_grad()
    return value

@_reg(STEP, correct=True)
def step_masked_mean_by_hand(model, batch, optimizer, pad_id, clip):
    "CORRECT: one loss per position, the mean over the real ones by hand; clipping the optimizer's parameters."
    model.train(True)
    optimizer.zero_grad()
    logits = batch.logits(model)                                          # (B, L, V)
    per = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction='none')   # (B, L)
    real = (batch.targets != pad_id).float()
    loss = (per * real).sum() / real.sum()
    loss.backward()
    clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], clip)
    optimizer.step()
    return loss.detach().item()

@_reg(STEP)
def step_no_zero_grad(model, batch, optimizer, pad_id, clip):
    "MISTAKE: the gradients are never zeroed: each call adds to the last one's."
    model.train()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_clip_after_step(model, batch, optimizer, pad_id, clip):
    "MISTAKE: clips after optimizer.step(), which has used the raw gradient."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    optimizer.step()
    clip_grad_norm_(model.parameters(), clip)
    return loss.item()

@_reg(STEP)
def step_no_clip(model, batch, optimizer, pad_id, clip):
    "MISTAKE: the clip argument is never used."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_clip_by_value(model, batch, optimizer, pad_id, clip):
    "MISTAKE: clip_grad_value_: each entry clamped to [-clip, clip] instead of the norm scaled."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_value_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_clip_one(model, batch, optimizer, pad_id, clip):
    "MISTAKE: the max norm hard-coded to 1.0."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_always_rescaled(model, batch, optimizer, pad_id, clip):
    "MISTAKE: clipping by hand that rescales every gradient to norm clip, even a shorter one."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    norm = torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters() if p.grad is not None))
    for p in model.parameters():
        if p.grad is not None: p.grad.mul_(clip / norm)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_no_optimizer_step(model, batch, optimizer, pad_id, clip):
    "MISTAKE: optimizer.step() is missing: the weights never move."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    return loss.item()

@_reg(STEP)
def step_no_backward(model, batch, optimizer, pad_id, clip):
    "MISTAKE: loss.backward() is missing: there is no gradient to step with."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_returns_tensor(model, batch, optimizer, pad_id, clip):
    "MISTAKE: returns the loss tensor, which holds the graph of the forward pass."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss

@_reg(STEP)
def step_returns_detached(model, batch, optimizer, pad_id, clip):
    "MISTAKE: returns loss.detach(), a tensor, not a float."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.detach()

@_reg(STEP)
def step_no_return(model, batch, optimizer, pad_id, clip):
    "MISTAKE: forgets to return the loss."
    model.train()
    optimizer.zero_grad()
    sequence_loss(batch.logits(model), batch.targets, pad_id).backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()

@_reg(STEP)
def step_pads_scored(model, batch, optimizer, pad_id, clip):
    "MISTAKE: F.cross_entropy without ignore_index: the pad positions are in the mean."
    model.train()
    optimizer.zero_grad()
    logits = batch.logits(model)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_pad_zero(model, batch, optimizer, pad_id, clip):
    "MISTAKE: pad id 0 hard-coded."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, 0)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_summed(model, batch, optimizer, pad_id, clip):
    "MISTAKE: reduction='sum': the loss grows with the number of targets."
    model.train()
    optimizer.zero_grad()
    logits = batch.logits(model)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=pad_id, reduction='sum')
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_eval_mode(model, batch, optimizer, pad_id, clip):
    "MISTAKE: never calls model.train(): a model handed over in eval mode trains without dropout."
    optimizer.zero_grad()
    loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

@_reg(STEP)
def step_no_masks(model, batch, optimizer, pad_id, clip):
    "MISTAKE: the model called without the masks: the decoder sees the future and the pads."
    model.train()
    optimizer.zero_grad()
    loss = sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, pad_id)
    loss.backward()
    clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()

NAMED = {
    'step_no_zero_grad': 'call optimizer.zero_grad() before loss.backward()',
    'step_zero_after': 'not after the step',
    'step_clip_after_step': 'clipped after optimizer.step()',
    'step_no_clip': 'the gradient is not clipped',
    'step_clip_by_value': 'clip_grad_value_',
    'step_clip_one': 'clipped to norm 1, not to clip = 0.1',
    'step_always_rescaled': 'scaled to norm clip even when it is shorter',
    'step_no_optimizer_step': 'call optimizer.step()',
    'step_no_backward': 'no gradient was computed',
    'step_returns_tensor': 'return the loss as a Python float, loss.item()',
    'step_returns_detached': 'return the loss as a Python float, loss.item()',
    'step_no_return': 'returned NoneType',
    'step_pads_scored': 'the pad positions are scored too',
    'step_pad_zero': 'pad id 0 is hard-coded',
    'step_summed': 'the loss is summed over the targets',
    'step_eval_mode': 'still in eval mode',
    'step_no_masks': 'the masks are not passed to the model',
}

# ---------------------------------------------------------------- the training loop
def _step(model, batch, optimizer, pad_id, clip):
    "A correct step for the loops below (the student's train_step, once it passes)."
    return step_course_pieces(model, batch, optimizer, pad_id, clip)

@_reg(LOOP, correct=True)
def loop_append(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "CORRECT: a for loop appending each loss."
    losses = []
    for _ in range(steps):
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
        scheduler.step()
    return losses

@_reg(LOOP, correct=True)
def loop_while(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "CORRECT: a while loop with a counter, train mode set once up front."
    model.train()
    losses, step = [], 0
    while step < steps:
        batch = next_batch()
        loss = _step(model, batch, optimizer, pad_id, clip)
        scheduler.step()
        losses.append(loss)
        step += 1
    return losses

@_reg(LOOP, correct=True)
def loop_comprehension(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "CORRECT: one comprehension, the scheduler stepped after each loss is computed."
    return [(_step(model, next_batch(), optimizer, pad_id, clip), scheduler.step())[0] for _ in range(steps)]

@_reg(LOOP, correct=True)
def loop_course_train(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "CORRECT: chapter 10's train, its history's losses."
    return train(model, next_batch, steps, optimizer, scheduler, pad_id, clip=clip, progress=False)['loss']

@_reg(LOOP)
def loop_schedule_first(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: the scheduler stepped before the optimizer: each update runs at the next step's rate."
    losses = []
    for _ in range(steps):
        scheduler.step()
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
    return losses

@_reg(LOOP)
def loop_no_schedule(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: the scheduler is never stepped."
    return [_step(model, next_batch(), optimizer, pad_id, clip) for _ in range(steps)]

@_reg(LOOP)
def loop_schedule_twice(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: the scheduler stepped twice per step (once here, once more 'to be sure')."
    losses = []
    for _ in range(steps):
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
        scheduler.step()
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_one_batch(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: one batch drawn before the loop and trained on at every step."
    batch, losses = next_batch(), []
    for _ in range(steps):
        losses.append(_step(model, batch, optimizer, pad_id, clip))
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_two_batches(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: a batch drawn for nothing (to look at it) and another for the step."
    losses = []
    for _ in range(steps):
        next_batch()
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_passes_the_function(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: hands next_batch itself to the step, not next_batch()."
    losses = []
    for _ in range(steps):
        losses.append(_step(model, next_batch, optimizer, pad_id, clip))
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_returns_last(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: returns the last loss, not the list."
    for _ in range(steps):
        loss = _step(model, next_batch(), optimizer, pad_id, clip)
        scheduler.step()
    return loss

@_reg(LOOP)
def loop_one_short(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: range(1, steps): one step short."
    losses = []
    for _ in range(1, steps):
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_steps_the_optimizer_again(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: optimizer.step() in the loop as well as in the step."
    losses = []
    for _ in range(steps):
        losses.append(_step(model, next_batch(), optimizer, pad_id, clip))
        optimizer.step()
        scheduler.step()
    return losses

@_reg(LOOP)
def loop_tensor_losses(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: a step of its own that keeps the loss tensors."
    losses = []
    for _ in range(steps):
        batch = next_batch()
        model.train()
        optimizer.zero_grad()
        loss = sequence_loss(batch.logits(model), batch.targets, pad_id)
        loss.backward()
        clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss)
    return losses

@_reg(LOOP)
def loop_clip_hard_coded(model, next_batch, steps, optimizer, scheduler, pad_id, clip):
    "MISTAKE: passes clip 1.0 to the step instead of the clip argument."
    losses = []
    for _ in range(steps):
        losses.append(_step(model, next_batch(), optimizer, pad_id, 1.0))
        scheduler.step()
    return losses

NAMED.update({
    'loop_schedule_first': "scheduler.step() is called before the optimizer's step",
    'loop_no_schedule': 'scheduler.step() was never called',
    'loop_schedule_twice': 'the schedule runs at twice its speed',
    'loop_one_batch': 'next_batch() was called once for 5 steps',
    'loop_two_batches': 'next_batch() was called 10 times for 5 steps',
    'loop_passes_the_function': 'call it, next_batch(), for each step',
    'loop_returns_last': 'return the list of the losses of every step',
    'loop_one_short': 'returned 4 losses',
    'loop_steps_the_optimizer_again': 'train_step already steps the optimizer',
    'loop_tensor_losses': 'returned a list of tensors',
    'loop_clip_hard_coded': 'does the loop pass it pad_id and clip',
})
