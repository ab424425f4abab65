"""The Transformer built chapter by chapter; the names a program uses most are importable from here, each module loaded on first use.

Written by hand (nbdev exports the chapters' modules, not this file): `from transformer_tutorial import Transformer`
imports `transformer_tutorial.model` then, and `import transformer_tutorial` alone loads neither torch nor a plotting
library.
"""
__version__ = "0.2.0"

_WHERE = {  # name -> the module (and chapter) that defines it
    'scaled_dot_product_attention': 'attention',
    **dict.fromkeys(['padding_mask', 'causal_mask', 'target_mask'], 'masks'),
    **dict.fromkeys(['MultiHeadAttention', 'split_heads', 'merge_heads'], 'multi_head'),
    'PositionwiseFeedForward': 'feed_forward',
    **dict.fromkeys(['LayerNorm', 'SublayerConnection'], 'layer_norm'),
    **dict.fromkeys(['sinusoidal_positional_encoding', 'PositionalEncoding'], 'positional'),
    'Embeddings': 'embeddings',
    **dict.fromkeys(['EncoderLayer', 'DecoderLayer', 'Encoder', 'Decoder'], 'layers'),
    **dict.fromkeys(['Transformer', 'TransformerConfig'], 'model'),
    **dict.fromkeys(['PAD', 'START', 'END', 'Task', 'Batch', 'LMBatch', 'make_batch', 'select_device', 'sequence_loss', 'make_optimizer',
                     'train_step', 'train', 'record_attention'], 'training'),
    **dict.fromkeys(['CopyTask', 'evaluate', 'OneProcess', 'train_task', 'train_copy_task'], 'copy_task'),
    **dict.fromkeys(['NumberWords', 'number_to_words'], 'number_words'),
    **dict.fromkeys(['greedy_decode', 'beam_search', 'KVCache'], 'decoding'),
    **dict.fromkeys(['save_pretrained', 'from_pretrained', 'save_checkpoint', 'load_checkpoint', 'ModelFileError'], 'model_files'),
    **dict.fromkeys(['DataParallel', 'train_data_parallel'], 'data_parallel'),
    **dict.fromkeys(['load_shakespeare', 'CharVocab', 'KneserNey', 'ShakespeareTask'], 'shakespeare'),
    **dict.fromkeys(['GPT', 'GPTConfig'], 'gpt'),
    'generate': 'sampling',
    'from_gpt2': 'gpt2',
    **dict.fromkeys(['from_llama', 'from_qwen2'], 'llama'),
    **dict.fromkeys(['to_llama', 'to_qwen2'], 'llama_families'),
    **dict.fromkeys(['from_marian', 'to_marian'], 'marian'),
    'flash_attention': 'flash',
}
__all__ = list(_WHERE)


def __getattr__(name):
    "Import the module that defines `name` the first time `name` is asked for."
    if name not in _WHERE: raise AttributeError(f"module 'transformer_tutorial' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f'{__name__}.{_WHERE[name]}'), name)
    globals()[name] = value  # the next lookup does not come here
    return value


def __dir__(): return sorted(set(globals()) | set(__all__))
