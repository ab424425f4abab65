"""Every notebook runs top to bottom alone, in an empty folder, as a learner runs it (their own asserts are the checks).

CI (.ci/run) builds the wheel and two virtual environments, the newest and the oldest supported torch, holding only
torch and ipykernel: `TT_WHEEL` names the wheel and `TT_KERNELS` the interpreters, as `name=python name=python`.
The first notebook's hidden Colab install cell (the same cell in every notebook) is then pointed at the wheel and run
in each environment, so it is what installs the package and its requirements. Every notebook runs in the first
environment; the chapters that depend on the torch version run in the others too. Without those variables (a
developer's clone) every notebook runs in this interpreter.

The first of these tests starts every selected notebook, two at a time (tools/run_notebooks.py's `Pool`, the slowest
first, both environments in one queue); each test waits for its own notebook.
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


# Seconds the slowest took in a CI run (2026-11-30, two at a time; the larger of the two environments'): they start
# first, so that none is left running alone at the end. Only the order depends on them.
SECONDS = {"12a_data_parallel": 181, "09c_length_generalization": 165, "17c_llama": 157, "17a_sampling": 146, "17_gpt": 141,
           "15l_grading_class": 115, "20_fast": 101, "17f_gguf": 89, "11_copy_task": 62, "11b_decoding": 60,
           "11c_number_words": 54, "05_layer_norm": 50, "16a_tokens": 49, "11a_model_files": 43, "16_shakespeare": 30}


def plan(cases=None):
    """(kernel name, python, notebooks) per environment: all notebooks in the first, the version-dependent ones in the
    rest; with `cases`, only those (kernel name, notebook stem), and each environment's first notebook, which installs."""
    ks = kernels()
    rest = [p for p in NBS if p != FIRST]
    some = [p for p in rest if p.stem in VERSION_DEPENDENT]
    envs = [(name, py, [FIRST] + (rest if i == 0 else some)) for i, (name, py) in enumerate(ks)]
    return [(name, py, [p for p in nbs if p == FIRST or cases is None or (name, p.stem) in cases]) for name, py, nbs in envs]


CASES = [(name, p.stem) for name, _, nbs in plan() for p in nbs]


@pytest.fixture(scope="session")
def pool(request):
    """The notebooks of the selected tests, started by the first of them, two at a time, the slowest first; at the end of
    the session, each one's seconds (CI's log shows where its time goes)."""
    params = [i.callspec.params for i in request.session.items if i.path == Path(__file__) and hasattr(i, "callspec")]
    cases = {(p["kernel"], p["notebook"]) for p in params if "kernel" in p}
    pool = run_notebooks.Pool(plan(cases), wheel=os.environ.get("TT_WHEEL"), workers=2, order=lambda name, p: -SECONDS.get(p.stem, 0))
    yield pool
    done = sorted((f.result() for f in pool.done.values() if f.done()), key=lambda r: -r["seconds"])
    reporter, capture = (request.config.pluginmanager.get_plugin(name) for name in ("terminalreporter", "capturemanager"))
    if reporter and capture and done:
        with capture.global_and_fixture_disabled():   # a fixture's teardown is captured, like a test
            reporter.write_line("")
            reporter.write_sep("=", "test_notebooks: seconds per notebook, slowest first")
            reporter.write_line("\n".join(f"{r['seconds']:6.1f} s  {r['kernel']} {Path(r['notebook']).stem}" for r in done))


@pytest.mark.notebooks
@pytest.mark.parametrize("kernel, notebook", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_notebook_runs_alone(pool, kernel, notebook):
    r = pool.result(kernel, next(p for p in NBS if p.stem == notebook))
    print(f"{kernel} {notebook}: {r['seconds']} s")
    assert r["error"] is None, f"{notebook} failed in the {kernel} environment:\n{r['error']}"


def _kernels_of_this_process():
    "The kernel processes this process started and that still run (Linux's /proc)."
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try: fields, cmd = stat.read_text().rsplit(")", 1)[1].split(), (stat.parent / "cmdline").read_bytes()
        except OSError: continue
        if int(fields[1]) == os.getpid() and b"ipykernel_launcher" in cmd: out.append(int(stat.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc to list the kernels")
def test_the_pool_leaves_no_kernel_running(tmp_path):
    "Each notebook's kernel ends with it, in error or not: 76 idle kernels of half a gigabyte each would fill CI's memory."
    import nbformat
    for name, code in (("ok", "x = 1"), ("fails", "raise ValueError('on purpose')")):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), tmp_path / f"{name}.ipynb")
    before = _kernels_of_this_process()
    results = run_notebooks.run([tmp_path / "ok.ipynb", tmp_path / "fails.ipynb"])
    assert [r["error"] is None for r in results] == [True, False] and "on purpose" in results[1]["error"]
    assert _kernels_of_this_process() == before
