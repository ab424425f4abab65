"""The course's self-checks, one per piece a learner writes: `from transformer_tutorial.checks import check_layer_norm`.

Written by hand: nbdev exports `checks.core` (how a check works, chapter 13), `checks.attention` (13a),
`checks.layers` (13b), `checks.training` (13c), `checks.flash` (13d), `checks.tokens` (13e), `checks.decoding` (13f) and
`checks.sampling` (13g); this file gathers their checks under one name.
"""
from .attention import (check_scaled_dot_product_attention, check_padding_mask, check_causal_mask, check_split_heads,
                        check_merge_heads, check_multi_head_attention)
from .layers import check_positional_encoding, check_layer_norm, check_feed_forward, check_encoder_layer, check_decoder_layer
from .training import check_label_smoothed_loss, check_warmup_schedule, check_train_step, check_train_loop
from .flash import check_online_softmax, check_tiled_attention, check_tiled_attention_backward, check_triton_tiled_attention
from .tokens import check_merge, check_encode
from .decoding import check_cached_self_attention, check_greedy_decode_cached, check_length_penalty, check_beam_search
from .sampling import check_gpt_forward, check_top_k_filter, check_top_p_filter, check_sample_next
from .core import _seal

_seal()  # what the checks rely on, as imported: a check fails when a notebook has replaced any of it since (core._untouched)

__all__ = ['check_scaled_dot_product_attention', 'check_padding_mask', 'check_causal_mask', 'check_split_heads',
           'check_merge_heads', 'check_multi_head_attention', 'check_positional_encoding', 'check_layer_norm',
           'check_feed_forward', 'check_encoder_layer', 'check_decoder_layer', 'check_label_smoothed_loss',
           'check_warmup_schedule', 'check_train_step', 'check_train_loop', 'check_online_softmax', 'check_tiled_attention',
           'check_tiled_attention_backward', 'check_triton_tiled_attention', 'check_merge', 'check_encode', 'check_cached_self_attention', 'check_greedy_decode_cached',
           'check_length_penalty', 'check_beam_search', 'check_gpt_forward', 'check_top_k_filter', 'check_top_p_filter', 'check_sample_next']
