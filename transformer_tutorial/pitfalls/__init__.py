"""The classic mistakes of Transformer tutorials, each a mutant registered with the self-check that catches it:
`from transformer_tutorial.pitfalls import MUTANTS, diagnose`.

Written by hand: nbdev exports `pitfalls.attention` (chapter 14: the registry `MUTANTS`, `diagnose`, and the mistakes
of attention, the masks and the heads), `pitfalls.layers` (14a: the positional encoding, layer norm, the feed-forward
layer, the encoder and decoder layers, and the mistakes only the edges show) and `pitfalls.second_half` (14b: the
mistakes of exercises 7 to 13); this file imports the three, so that `MUTANTS` holds every mutant, and gathers their
names under one.
"""
from . import attention, layers, second_half
from .attention import *
from .layers import *
from .second_half import *

__all__ = attention.__all__ + layers.__all__ + second_half.__all__
