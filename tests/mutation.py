"""Break one line of the package on purpose, to show that a test fails when the code it guards breaks.

`mutate(monkeypatch, fn, old, new)` recompiles `fn` from its source with `old` replaced by `new` (which must occur
exactly once) and puts the mutant in every loaded module that holds `fn` (the package's and the tests'), so callers
that imported it by name get it too; pytest's `monkeypatch` restores the original after the test.
"""
import inspect, sys, textwrap


def mutate(monkeypatch, fn, old, new):
    "Replace `fn` by a copy whose source has `old` replaced by `new`, in every loaded module that holds it; returns the copy."
    source = textwrap.dedent(inspect.getsource(fn))
    assert source.count(old) == 1, f"{old!r} occurs {source.count(old)} times in {fn.__qualname__}, not once"
    namespace = dict(sys.modules[fn.__module__].__dict__)
    exec(compile(source.replace(old, new), f"<mutant of {fn.__qualname__}>", 'exec'), namespace)
    mutant = namespace[fn.__name__]
    owner, _, method = fn.__qualname__.rpartition('.')
    if owner:  # a method: the mutant goes on its class
        monkeypatch.setattr(sys.modules[fn.__module__].__dict__[owner], method, mutant)
        return mutant
    for module in list(sys.modules.values()):
        for attr, value in list(getattr(module, '__dict__', {}).items()):
            if value is fn: monkeypatch.setattr(module, attr, mutant)
    return mutant
