"The self-checks against banks of student implementations they were not written from (tests/student_bank.py, tests/student_bank3.py, tests/student_bank_training.py, tests/student_bank_flash.py, tests/student_bank_bpe.py, tests/student_bank_loop.py, tests/student_bank_decoding.py, tests/student_bank_sampling.py)."
import contextlib, io

import pytest

from transformer_tutorial import checks
import student_bank, student_bank3, student_bank_training, student_bank_flash, student_bank_bpe, student_bank_loop, student_bank_decoding
import student_bank_sampling

BANK = student_bank.BANK + student_bank3.BANK + student_bank_training.BANK + student_bank_flash.BANK + student_bank_bpe.BANK
BANK += student_bank_loop.BANK + student_bank_decoding.BANK + student_bank_sampling.BANK

# the mistake each message must name
NAMED = {
    'sdpa_scale_by_key_length': 'divided by sqrt(Lk)',
    'sdpa_scale_by_d_v': 'divided by sqrt(d_v)',
    'sdpa_dropout_always_on': 'dropout',
    'sdpa_unscaled_and_mask_reversed': 'no scaling',          # the first of its two mistakes
    'sdpa_reversed_only_after_softmax': 'zeroed where the mask is True',
    'sdpa_fixed_axes': 'use key.transpose(-2, -1)',
    'sdpa_mask_view_by_batch': 'do not view or expand it with the batch size',
    'sdpa_nan_on_fully_masked_row': 'NaN for a query whose keys are all masked',
    'sdpa_renormalized': 'NaN for a query whose keys are all masked',
    'sdpa_pytorch_kernel': 'NaN for a query whose keys are all masked',
    'padding_mask_until_first_pad': 'assumes the padding comes last',
    'padding_mask_queries_and_keys': 'hides padded queries as well',
    'padding_mask_int': 'return a boolean tensor',
    'causal_mask_sees_next': 'tril(1)',
    'causal_mask_blocked_convention': 'polarity reversed',
    'causal_mask_additive': 'additive',
    'causal_mask_triu_eq0': 'hides the diagonal',
    'causal_mask_fixed_block_size': 'build the mask from size',
    'split_heads_transpose_1_3': 'not transpose(1, 3)',
    'split_heads_seq_first_unpack': 'batch and length swapped',
    'split_heads_heads_into_batch': 'heads folded into the batch axis',
    'split_heads_chunk_stack_no_check': 'it made 4 heads, not 5',
    'merge_heads_view_noncontiguous': 'Use .reshape',
    'merge_heads_squeezed': 'do not squeeze',
    'merge_heads_transpose_in_place': 'in place',
    'merge_heads_transpose_1_3': 'transpose(1, 3) moves d_head',
    'MHAKeyFromQuery': "use the query's length",
    'MHAKeyFromValue': 'key and value swapped',
    'MHAMaskUnsqueeze': 'pass the (B, 1, 1, Lk) mask on as it is',
    'MHATorchWrapperMaskNotInverted': 'mask polarity reversed',
    'MHAPerHeadLinears': 'per-head projections',
    'pe_exponent_doubled': '10000^(4i/d_model)',
    'pe_integer_exponent': 'integer division',
    'pe_arguments_swapped': 'arguments in the other order',
    'pe_positions_from_one': 'positions counted from 1',
    'pe_stack_interleave_float64': 'dtype torch.float64: return float32',
    'pe_numpy': 'dtype torch.float64: return float32',
    'LNVarWithoutDim': 'one variance for the whole tensor',
    'LNNoKeepdim': 'keepdim=True',
    'LNForgotBias': 'the bias is not added',
    'LNShiftThenScale': 'shift before scale',
    'LNInPlace': 'in place',
    'LNFixedAxis': 'not a fixed axis',
    'LNWeightBiasSwapped': 'are weight and bias swapped',
    'LNGammaInitZeros': 'the scale (weight) starts at 0',
    'LNOnePassVariance': 'E[x^2] - E[x]^2',
    'FFNReluAfterSecond': 'ReLU after the second layer',
    'FFNDropoutAlwaysOn': 'dropout',
    'FFNWithResidual': 'a residual inside the network',
    'FFNReluOnInput': 'ReLU applied to the input',
    'EncResidualFromNormed': 'the residual adds the normalized input',
    'EncNoFFResidual': 'the feed-forward sublayer has no residual',
    'EncMaskInverted': 'the self-attention mask is reversed',
    'EncInPlaceResidual': 'in place',
    'EncAttnScaledByDModel': 'its attention is not; scores scaled by sqrt(d_model)',
    'EncExtraFinalNorm': 'found 1 and 3',
    'DecMemoryMaskReversed': 'memory_mask is reversed',
    'DecCrossBeforeSelf': 'cross-attention runs before self-attention',
    'DecQueryFromMemory': 'takes its queries from memory',
    'DecOwnCausalMask': 'builds its own causal mask',
    'DecIgnoresMemoryMask': 'memory_mask is ignored',
    'DecPostLNNoMemoryMask': 'post-LN instead of pre-LN',          # the first of its two mistakes
    # the third bank: outputs of the wrong kind, dtype, inputs the exercise allows, dropout in eval mode at a nonzero rate
    'sdpa_output_only': 'should return a pair (output, weights)',
    'sdpa_weights_first': 'returned (weights, output) in that order',
    'causal_mask_numpy': 'should return a tensor, got ndarray',
    'split_heads_list_of_heads': 'should return a tensor, got list',
    'MHAOutputOnly': 'should return a pair (output, weights)',
    'LNReturnsStatistics': 'output shape tuple',
    'FFNReturnsHidden': 'output shape tuple',
    'EncReturnsWeights': 'returned a tuple with no mask: return the tensor x',
    'DecReturnsList': 'returned a list with no masks',
    'pe_float64': 'dtype torch.float64: return float32',
    'pe_half': 'dtype torch.float16: return float32',
    'pe_even_d_model_only': 'd_model = 7 is odd, which the exercise asks for',
    'EncMaskRequired': "raised TypeError: bad operand type for unary ~: 'NoneType'",
    'DecMemoryMaskRequired': "raised AttributeError: 'NoneType' object has no attribute 'expand'",
    'EncFunctionalDropout': 'built with dropout=0.1 and put in eval mode, two calls with the same input give different outputs',
    'DecFunctionalDropout': 'built with dropout=0.1 and put in eval mode, two calls with the same input give different outputs',
}
NAMED.update(student_bank_training.NAMED)
NAMED.update(student_bank_flash.NAMED)
NAMED.update(student_bank_bpe.NAMED)
NAMED.update(student_bank_loop.NAMED)
NAMED.update(student_bank_sampling.NAMED)
NAMED.update(student_bank_decoding.NAMED)
# rejected without their mistake named: the message only says how the result is wrong (the verdict it must give)
UNNAMED = {
    'padding_mask_first_pad_argmax': 'wrong values for pad_id = 0',
    'padding_mask_off_by_one': 'wrong values for pad_id = 0',
    'MHAScaleDModelMergeNoTranspose': 'output differs from the reference',
    'DecTgtMaskInCross': 'raised ValueError: mask of shape (1, 1, 5, 5) cannot broadcast',
}


def _run(check, impl):
    "The check's printed verdict, or its AssertionError's message."
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out): getattr(checks, check)(impl)
    except AssertionError as e: return None, str(e)
    return out.getvalue(), None


@pytest.mark.parametrize('check, impl', [(c, i) for c, i, ok in BANK if ok], ids=lambda x: getattr(x, '__name__', x))
def test_correct_implementation_written_differently_passes(check, impl):
    printed, msg = _run(check, impl)
    assert msg is None, msg
    assert printed.startswith('✓ ')


@pytest.mark.parametrize('check, impl', [(c, i) for c, i, ok in BANK if not ok], ids=lambda x: getattr(x, '__name__', x))
def test_wrong_implementation_is_rejected_with_its_mistake_named(check, impl):
    printed, msg = _run(check, impl)   # any other exception than AssertionError is the check's own bug and fails here
    assert msg is not None, f"{check} accepted {impl.__name__}: {impl.__doc__}"
    expected = NAMED.get(impl.__name__) or UNNAMED.get(impl.__name__)
    assert expected, f"{impl.__name__} has no expected message: add it to NAMED (or UNNAMED)"
    assert expected in msg, msg


def test_every_wrong_implementation_has_its_expected_message():
    "NAMED and UNNAMED list exactly the bank's wrong implementations, each once."
    assert not set(NAMED) & set(UNNAMED)
    assert set(NAMED) | set(UNNAMED) == {i.__name__ for _, i, ok in BANK if not ok}
