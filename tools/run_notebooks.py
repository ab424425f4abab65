#!/usr/bin/env python
"""Run notebooks the way a learner meets them: each alone, in an empty temporary folder, in a kernel of a chosen Python.

- `--python PY` runs the kernel with that interpreter (a virtual environment with the package installed from a
  wheel, say); the repository is never on the kernel's `sys.path`, since the kernel starts in the empty folder.
- `--wheel WHL` turns on the first notebook's hidden Colab install cell, pointed at that wheel instead of the
  repository, so the cell itself is tested: in a fresh environment it is what installs the package and its
  requirements. It is the same cell in every notebook (tools/sync_docs.py --check), so it runs once.
- Cells flagged with settings.ini's `tst_flags` (`#| notest`, `#| slow`) are skipped, as `nbdev_test` does.

`python tools/run_notebooks.py [--python PY] [--wheel WHL] [--workers 2] NB...` prints one line per notebook and
exits 1 if any failed; `Pool` runs them in the background, in one environment or several, for the tests. `--save`
stores the fresh outputs back into the notebooks (the skipped cells keep their source and get no output), which is how
the stored outputs the site shows are made; run `nbdev_clean` afterwards. Its kernels record in each figure the size
of its smallest text (tools/figure_text.py), which the site tests check against the page.
"""
import argparse, configparser, copy, json, os, queue, re, shutil, sys, tempfile, threading, time
from concurrent.futures import Future
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


def kernel_spec_dir(pythons, figure_text=False, threads=None):
    """A folder of kernel specs, `tt-NAME` starting the interpreter of each `NAME: python` in `pythons`; with
    `figure_text`, their kernels first run tools/figure_text.py (an IPython startup file), so that the figures they draw
    record their smallest text for the site tests; with `threads`, each kernel's OpenMP pool has that many."""
    d = Path(tempfile.mkdtemp(prefix="tt-kernels-"))
    env = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    if figure_text:
        startup = d / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        shutil.copy(ROOT / "tools" / "figure_text.py", startup / "00-figure-text.py")
        env["IPYTHONDIR"] = str(d / "ipython")
    for name, python in pythons.items():
        spec = d / "kernels" / f"tt-{name}"
        spec.mkdir(parents=True)
        python = os.path.abspath(python)  # absolute, since the kernel starts elsewhere; not resolve(): a venv's python is a symlink
        (spec / "kernel.json").write_text(json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                                      "display_name": f"notebook runner ({python})", "language": "python", "env": env}))
    return d


def run_one(path, specs, kernel, env, wheel=None, timeout=900, save=False):
    """Execute the notebook at `path` alone in an empty folder, in the kernel `tt-{kernel}` of the folder `specs`, whose
    process gets the variables `env`; returns a result dict (error is None on success)."""
    import nbformat
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    original = nbformat.read(path, as_version=4)
    nb = prepare(original, wheel, tst_flags())
    work = Path(tempfile.mkdtemp(prefix=f"nb-{Path(path).stem}-"))
    km = KernelManager(kernel_name=f"tt-{kernel}", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs / "kernels")]))
    t0, error = time.perf_counter(), None
    try:
        NotebookClient(nb, km=km, timeout=timeout, resources={"metadata": {"path": str(work)}}).execute(env=env)
    except CellExecutionError as e:
        error = re.sub(r"\x1b\[[0-9;]*m", "", str(e))[-4000:]  # without the terminal colours of the traceback
    except Exception as e:  # a dead kernel, a timeout
        error = f"{type(e).__name__}: {e}"[-4000:]
    finally:   # the client shuts down only the kernels it made itself
        if km.has_kernel: km.shutdown_kernel(now=True)
        shutil.rmtree(work, ignore_errors=True)
    if save and error is None:
        for kept, ran in zip(original.cells, nb.cells):
            if kept.cell_type == "code":
                outputs = [o for o in ran.outputs if WIDGET not in o.get("data", {})]  # progress bars: nothing to show once saved
                kept.outputs, kept.execution_count = (outputs, ran.execution_count) if ran.source else ([], None)
        nbformat.write(original, path)
    return {"notebook": str(path), "kernel": kernel, "seconds": round(time.perf_counter() - t0, 1), "error": error}


class Pool:
    """Notebooks run by `workers` threads, which start at once and leave the caller free: `plan` is
    [(environment name, python, notebooks)]. Each environment's first notebook runs before its others, so that with
    `wheel` its install cell installs the package into the fresh environment; the others' install cells stay the
    no-op they are outside Colab (the cells are the same in every notebook: tools/sync_docs.py --check). The first
    notebooks go first, then the rest in the plan's order, or sorted by the key `order(name, path)`. `result(name,
    path)` waits for one notebook; `report(result)` is called as each one ends; `threads` is each kernel's OpenMP pool
    (by default the cores shared among the workers)."""

    def __init__(self, plan, wheel=None, workers=2, timeout=900, save=False, report=None, threads=None, order=None):
        if threads is None and workers > 1: threads = max(1, (os.cpu_count() or 1) // workers)  # else their OpenMP pools fight
        self.specs = kernel_spec_dir({name: py for name, py, _ in plan}, figure_text=save, threads=threads)
        self.env = dict(os.environ)   # as they are when the pool starts, whatever the caller's threads change later
        self.options, self.report = dict(wheel=wheel, timeout=timeout, save=save), report
        self.done = {(name, Path(p)): Future() for name, _, nbs in plan for p in nbs}
        firsts = [(name, Path(nbs[0])) for name, _, nbs in plan if nbs]
        self.first = dict(firsts)
        self.jobs = queue.SimpleQueue()
        rest = [(name, Path(p)) for name, _, nbs in plan for p in nbs[1:]]
        for job in firsts + (sorted(rest, key=lambda job: order(*job)) if order else rest): self.jobs.put(job)
        for _ in range(max(1, workers)): threading.Thread(target=self._work, daemon=True).start()

    def _work(self):
        while True:
            try: name, path = self.jobs.get_nowait()
            except queue.Empty: return
            first = self.first[name] == path
            if not first: self.done[name, self.first[name]].result()   # the environment holds the package
            try: r = run_one(path, self.specs, name, self.env, **{**self.options, "wheel": self.options["wheel"] if first else None})
            except BaseException as e: r = {"notebook": str(path), "kernel": name, "seconds": 0, "error": f"{type(e).__name__}: {e}"}
            self.done[name, path].set_result(r)
            try:
                if self.report: self.report(r)
            except Exception:   # a closed pipe, say: the results stand, and the other notebooks still run
                self.report = None

    def result(self, name, path):
        return self.done[name, Path(path)].result()


def run(paths, python=None, wheel=None, workers=2, timeout=900, save=False, report=None):
    "Run the notebooks in one environment (the first alone, see `Pool`); returns the results in order."
    pool = Pool([("here", python or sys.executable, [Path(p) for p in paths])], wheel, workers, timeout, save, report)
    return [pool.result("here", p) for p in paths]


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
