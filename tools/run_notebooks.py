#!/usr/bin/env python
"""Run notebooks the way a learner meets them: each alone, in an empty temporary folder, in a kernel of a chosen Python.

- `--python PY` runs the kernel with that interpreter (a virtual environment with the package installed from a
  wheel, say); the repository is never on the kernel's `sys.path`, since the kernel starts in the empty folder.
- `--wheel WHL` turns on each notebook's hidden Colab install cell, pointed at that wheel instead of the repository,
  so the cell itself is tested: in a fresh environment it is what installs the package and its requirements.
- Cells flagged with settings.ini's `tst_flags` (`#| notest`, `#| slow`) are skipped, as `nbdev_test` does.

`python tools/run_notebooks.py [--python PY] [--wheel WHL] [--workers 2] NB...` prints one line per notebook and
exits 1 if any failed. `run(...)` returns the results for the tests. `--save` stores the fresh outputs back into the
notebooks (the skipped cells keep their source and get no output), which is how the stored outputs the site shows are
made; run `nbdev_clean` afterwards. Its kernels record in each figure the size of its smallest text
(tools/figure_text.py), which the site tests check against the page.
"""
import argparse, configparser, copy, json, os, re, shutil, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALL_MARK, WIDGET = "google.colab", "application/vnd.jupyter.widget-view+json"


def tst_flags():
    cp = configparser.ConfigParser(delimiters=["="])
    cp.read(ROOT / "settings.ini", encoding="utf-8")
    return cp["DEFAULT"].get("tst_flags", "").split()


def prepare(nb, wheel, flags):
    "Blank the cells nbdev_test skips; with `wheel`, make the Colab install cell install that wheel instead."
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        if wheel and INSTALL_MARK in cell.source:
            cell.source = re.sub(r"if '" + re.escape(INSTALL_MARK) + r"' in sys\.modules:", "if True:", cell.source)
            cell.source = re.sub(r"git\+\S+", str(Path(wheel).resolve()), cell.source)
            continue
        directives = [l[3:].split() for l in cell.source.splitlines() if l.startswith("#| ")]
        if any(d and d[0] in flags for d in directives): cell.source = ""
    return nb


def kernel_spec_dir(python, figure_text=False):
    """A Jupyter data folder holding a kernel spec `tt-kernel` that starts `python`; with `figure_text`, its kernels
    first run tools/figure_text.py (an IPython startup file), so that the figures they draw record their smallest
    text for the site tests."""
    d = Path(tempfile.mkdtemp(prefix="tt-kernels-"))
    spec = d / "kernels" / "tt-kernel"
    spec.mkdir(parents=True)
    python = os.path.abspath(python)  # absolute, since the kernel starts elsewhere; not resolve(): a venv's python is a symlink
    kernel = {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
              "display_name": f"notebook runner ({python})", "language": "python"}
    if figure_text:
        startup = d / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        shutil.copy(ROOT / "tools" / "figure_text.py", startup / "00-figure-text.py")
        kernel["env"] = {"IPYTHONDIR": str(d / "ipython")}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return d


def run_one(path, kernel, wheel=None, timeout=900, save=False):
    "Execute the notebook at `path` alone in an empty folder; returns a result dict (error is None on success)."
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    original = nbformat.read(path, as_version=4)
    nb = prepare(original, wheel, tst_flags())
    work = Path(tempfile.mkdtemp(prefix=f"nb-{Path(path).stem}-"))
    t0, error = time.perf_counter(), None
    try:
        NotebookClient(nb, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(work)}}).execute()
    except CellExecutionError as e:
        error = re.sub(r"\x1b\[[0-9;]*m", "", str(e))[-4000:]  # without the terminal colours of the traceback
    except Exception as e:  # a dead kernel, a timeout
        error = f"{type(e).__name__}: {e}"[-4000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if save and error is None:
        for kept, ran in zip(original.cells, nb.cells):
            if kept.cell_type == "code":
                outputs = [o for o in ran.outputs if WIDGET not in o.get("data", {})]  # progress bars: nothing to show once saved
                kept.outputs, kept.execution_count = (outputs, ran.execution_count) if ran.source else ([], None)
        nbformat.write(original, path)
    return {"notebook": str(path), "seconds": round(time.perf_counter() - t0, 1), "error": error}


def run(paths, python=None, wheel=None, workers=2, timeout=900, save=False, report=None):
    "Run the notebooks (the first alone, so that its install cell installs into a fresh environment); returns results in order; `report(result)` is called as each one ends."
    # read when each client starts its kernel; stored figures record their smallest text
    os.environ["JUPYTER_PATH"] = str(kernel_spec_dir(python or sys.executable, figure_text=save))
    if workers > 1:  # kernels side by side share the cores: each gets its share, or their OpenMP pools fight over them
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    paths = [Path(p) for p in paths]
    def one(p):
        r = run_one(p, "tt-kernel", wheel, timeout, save)
        if report: report(r)
        return r
    first = [one(paths[0])] if paths else []
    with ThreadPoolExecutor(max(1, workers)) as ex:
        rest = list(ex.map(one, paths[1:]))
    return first + rest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="+")
    ap.add_argument("--python", help="interpreter of the kernel (default: this one)")
    ap.add_argument("--wheel", help="run the Colab install cells, installing this wheel")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--save", action="store_true", help="store the outputs in the notebooks (those that ran without error)")
    a = ap.parse_args(argv)
    def line(r):   # as each notebook ends, its error with it: a run cut short still says what failed
        print(f"{'ok  ' if r['error'] is None else 'FAIL'} {r['seconds']:6.1f} s  {r['notebook']}", flush=True)
        if r["error"]: print(f"\n=== {r['notebook']}\n{r['error']}\n", flush=True)
    results = run(a.notebooks, a.python, a.wheel, a.workers, a.timeout, a.save, report=line)
    return 1 if any(r["error"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
