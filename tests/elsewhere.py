"""A second device for machines without a GPU: tensors that hold real CPU data but say they live on another device.

CI has no GPU, so a forgotten `.to(device)` or `device=` would reach Colab's GPU runtime untested. Inside `elsewhere()`,
a model moved to the device it yields holds `Elsewhere` tensors: each wraps an ordinary CPU tensor (so every kernel
really runs, `.item()` really answers and results can be compared with a CPU run) but reports the device `meta`.
Every operation is checked as CUDA checks it: mixing an `Elsewhere` tensor with a CPU tensor of one or more dimensions
raises "Expected all tensors to be on the same device"; a CPU tensor of zero dimensions may be read (CUDA kernels
accept CPU scalars) but not written in place with data from elsewhere; `.to()`, `.cpu()` and `copy_` move data across,
and factories (`torch.zeros(..., device=d)`) make their result where they are told.

Why not PyTorch's `FakeTensorMode` or the `meta` device itself: both hold no data, so decoding and training stop at the
first data-dependent step (the embedding's id check, `if done.all()`, `loss.item()`) before the code the tests target.
Why `meta` as the label: on a CPU-only build `tensor.to('cuda')` fails before any dispatch (no CUDA device guard), and
`meta` is a device every build knows; for the code under test it is just "not the CPU". Checked on torch 2.4.1 and 2.13.
"""
from contextlib import contextmanager
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

OTHER = torch.device('meta')
_aten = torch.ops.aten
_MOVES = {_aten._to_copy.default, _aten.copy_.default}   # the operations that copy data from one device to another


class Elsewhere(torch.Tensor):
    "Real CPU data (`.inner`) that reports the device `OTHER`."
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(),
                                                   dtype=inner.dtype, device=OTHER, requires_grad=inner.requires_grad)

    def __init__(self, inner): self.inner = inner

    def __repr__(self): return f"Elsewhere({self.inner!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"{func} on an Elsewhere tensor outside `elsewhere()`")


def _mixing(func, where):
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {OTHER} and cpu! "
                        f"({where} of {func})")


class _Checked(TorchDispatchMode):
    "Runs every operation on the wrapped CPU data, after the device checks CUDA makes."
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        there = any(isinstance(t, Elsewhere) for t in tensors)
        in_place = func._schema.name.endswith('_') or 'out' in kwargs
        target = kwargs.get('out', args[0] if args else None)
        if there and func not in _MOVES:
            if any(not isinstance(t, Elsewhere) and t.dim() > 0 for t in tensors): raise _mixing(func, 'an input')
            if in_place and isinstance(target, torch.Tensor) and not isinstance(target, Elsewhere): raise _mixing(func, 'the output')
        if kwargs.get('device') is not None:   # a factory or a copy says where its result lives
            there = torch.device(kwargs['device']).type == OTHER.type
            kwargs = {**kwargs, 'device': torch.device('cpu')}
        unwrap = lambda t: t.inner if isinstance(t, Elsewhere) else t
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        if in_place: return target   # the same tensor, its data changed
        return tree_map(lambda t: Elsewhere(t) if there and isinstance(t, torch.Tensor) else t, out)


@contextmanager
def elsewhere():
    "Within the block, `OTHER` (yielded) is a device that holds real data and refuses to be mixed with the CPU."
    with _Checked(): yield OTHER
