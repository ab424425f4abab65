"""Every notebook runs top to bottom alone, in an empty folder, as a learner runs it (their own asserts are the checks).

CI (.ci/run) builds the wheel and two virtual environments, the newest and the oldest supported torch, holding only
torch and ipykernel: `TT_WHEEL` names the wheel and `TT_KERNELS` the interpreters, as `name=python name=python`.
Each notebook's hidden Colab install cell is then pointed at the wheel and run, so it is what installs the package
and its requirements. Every notebook runs in the first environment; the chapters that depend on the torch version
run in the others too. Without those variables (a developer's clone) every notebook runs in this interpreter.
"""
import os, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import run_notebooks  # noqa: E402

NBS = sorted(p for p in (ROOT / "nbs").rglob("*.ipynb") if not any(s.startswith((".", "_")) for s in p.relative_to(ROOT / "nbs").parts))
FIRST = ROOT / "nbs" / "index.ipynb"  # run first and alone: its install cell installs into the fresh environment
VERSION_DEPENDENT = ["01_attention", "03_multi_head_attention", "03a_complexity", "09a_modern_blocks", "10_training", "11_copy_task", "11a_model_files", "12_cli", "12a_data_parallel", "17c_llama", "19_flash_attention", "19a_flash_triton", "20_fast"]


def kernels():
    "[(name, python)] from TT_KERNELS, or this interpreter alone."
    spec = os.environ.get("TT_KERNELS", "").split()
    if not spec:
        if os.environ.get("CI"): pytest.fail("CI must set TT_KERNELS and TT_WHEEL (see .ci/run)")
        return [("here", sys.executable)]
    return [tuple(s.split("=", 1)) for s in spec]


def plan():
    "(kernel name, python, notebooks) per environment: all notebooks in the first, the version-dependent ones in the rest."
    ks = kernels()
    ordered = [FIRST] + [p for p in NBS if p != FIRST]
    some = [FIRST] + [p for p in NBS if p.stem in VERSION_DEPENDENT]
    return [(name, py, ordered if i == 0 else some) for i, (name, py) in enumerate(ks)]


@pytest.fixture(scope="session")
def results():
    "Run every planned notebook once per session; {(kernel name, notebook stem): result}."
    out = {}
    for name, py, nbs in plan():
        for r in run_notebooks.run(nbs, python=py, wheel=os.environ.get("TT_WHEEL"), workers=2):
            out[name, Path(r["notebook"]).stem] = r
    return out


CASES = [(name, p.stem) for name, _, nbs in plan() for p in nbs]


@pytest.mark.notebooks
@pytest.mark.parametrize("kernel, notebook", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_notebook_runs_alone(results, kernel, notebook):
    r = results[kernel, notebook]
    print(f"{kernel} {notebook}: {r['seconds']} s")
    assert r["error"] is None, f"{notebook} failed in the {kernel} environment:\n{r['error']}"
