"The project's shape: a light import, one default_exp per notebook, chapters with a title and summary, docs in sync."
import configparser, json, re, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = sorted(p for p in (ROOT / "nbs").rglob("*.ipynb") if not any(s.startswith((".", "_")) for s in p.relative_to(ROOT / "nbs").parts))


def cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def modules():
    "{dotted name below the package ('model', 'checks', 'checks.core'): file} of every module but the package's own __init__."
    pkg = ROOT / "transformer_tutorial"
    names = {".".join(p.relative_to(pkg).with_suffix("").parts).removesuffix(".__init__"): p for p in pkg.rglob("*.py")}
    return {n: p for n, p in names.items() if n != "__init__"}


def test_import_is_light():
    "Importing the package and every module loads torch but no plotting or widget library."
    mods = sorted(n for n in modules() if not n.split(".")[-1].startswith("_"))
    assert "checks.layers" in mods
    code = ("import sys, importlib\n"
            f"for m in {mods!r}: importlib.import_module('transformer_tutorial.' + m)\n"
            "heavy = [m for m in ('matplotlib', 'ipywidgets', 'IPython', 'pandas') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"importing transformer_tutorial loaded {out}"


def test_package_face():
    "The top-level names are the modules' own objects, loaded on first use: the bare import loads no torch, none loads a plotting library."
    code = ("import sys, importlib, transformer_tutorial as t\n"
            "assert 'torch' not in sys.modules, 'import transformer_tutorial loaded torch'\n"
            "from transformer_tutorial import Transformer, greedy_decode, beam_search, save_pretrained, from_pretrained, CopyTask, NumberWords\n"
            "for name, module in t._WHERE.items():\n"
            "    m = importlib.import_module('transformer_tutorial.' + module)\n"
            "    assert getattr(t, name) is getattr(m, name) and name in m.__all__, name\n"
            "assert sorted(t.__all__) == sorted(t._WHERE) and set(t.__all__) <= set(dir(t))\n"
            "try: t.Transformr\n"
            "except AttributeError as e: assert str(e) == \"module 'transformer_tutorial' has no attribute 'Transformr'\"\n"
            "else: raise AssertionError('no AttributeError')\n"
            "print([m for m in ('matplotlib', 'ipywidgets', 'IPython', 'pandas') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


MODEL_MODULES = ["attention", "masks", "multi_head", "feed_forward", "layer_norm", "positional", "embeddings", "layers", "model"]
DRAWING = ("matplotlib", "ipywidgets", "altair", "IPython", "transformer_tutorial.utils")


def package_imports():
    "{module: the package modules and outside libraries it imports, at the top or inside a function} of transformer_tutorial."
    import ast
    found = {}
    for name, path in modules().items():
        package = ["transformer_tutorial"] + name.split(".")[:None if path.stem == "__init__" else -1]  # where `.` points
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import): names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) if node.level else node.module
                names |= {base} | ({f"{base}.{a.name}" for a in node.names} if node.level and not node.module else set())
        found[name] = {n.replace("transformer_tutorial.", "", 1) if n.startswith("transformer_tutorial.") else n for n in names}
    return found


def test_no_import_circle_and_no_drawing_in_the_model():
    "The package's modules import each other without a circle, and no module of the model (attention through model) imports a drawing library or helper."
    imports = package_imports()
    graph = {m: {n for n in names if n in imports and n != m} for m, names in imports.items()}
    def circle_from(start, path):
        for nxt in graph[path[-1]]:
            if nxt == start: return path + [nxt]
            if nxt not in path and (c := circle_from(start, path + [nxt])): return c
    circles = [c for m in graph if (c := circle_from(m, [m]))]
    assert not circles, f"import circles: {circles}"
    drawing = {m: sorted(n for n in imports[m] if n.split(".")[0] in DRAWING or n == "utils") for m in MODEL_MODULES}
    assert not any(drawing.values()), f"model modules importing drawing code: {drawing}"


def test_every_notebook_has_its_own_default_exp():
    exps = {}
    for nb in NBS:
        found = [m.group(1) for c in cells(nb) if c["cell_type"] == "code"
                 for m in [re.match(r"#\|\s*default_exp\s+(\S+)", src(c))] if m]
        assert len(found) == 1, f"{nb.name}: expected one default_exp cell, found {found}"
        exps.setdefault(found[0], []).append(nb.name)
    shared = {k: v for k, v in exps.items() if len(v) > 1}
    assert not shared, f"notebooks sharing a default_exp: {shared}"


@pytest.mark.parametrize("nb", NBS, ids=lambda p: p.relative_to(ROOT / "nbs").as_posix())
def test_notebook_has_title_summary_badge_and_outputs(nb):
    cs = cells(nb)
    first = src(cs[0])
    assert cs[0]["cell_type"] == "markdown" and re.match(r"# \S", first), f"{nb.name}: first cell must be '# Title'"
    assert re.search(r"^> \S", first, re.M), f"{nb.name}: the title cell needs a '> one-line summary'"
    assert any("colab-badge.svg" in src(c) for c in cs if c["cell_type"] == "markdown"), f"{nb.name}: no Colab badge"
    install = [c for c in cs if c["cell_type"] == "code" and "google.colab" in src(c)]
    assert len(install) == 1 and "#| hide" in src(install[0]) and "#| notest" in src(install[0])
    if "exercises" not in nb.parts:  # chapters store their outputs so the site shows them
        assert any(c.get("outputs") for c in cs if c["cell_type"] == "code"), f"{nb.name}: no stored outputs"


def test_settings_flags_are_space_separated():
    cfg = configparser.ConfigParser(delimiters=["="]); cfg.read(ROOT / "settings.ini")
    assert cfg["DEFAULT"]["tst_flags"].split() == ["notest", "slow"]


def test_quarto_config_has_one_source():
    link = ROOT / "nbs" / "_quarto.yml"
    assert link.is_symlink() and link.resolve() == (ROOT / "_quarto.yml").resolve()


def test_docs_in_sync():
    "Badges, Colab install cells, README == index, sidebar == notebooks (tools/sync_docs.py --check)."
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "sync_docs.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_links_to_site_pages_that_exist():
    "README's links into the site use nbdev's page names (`01_attention.ipynb` renders to `attention.html`)."
    from transformer_tutorial.assignments import _site_page
    cfg = configparser.ConfigParser(delimiters=["="]); cfg.read(ROOT / "settings.ini")
    c = cfg["DEFAULT"]
    site = f"{c['doc_host']}{c['doc_baseurl']}".replace("%(user)s", c["user"]).replace("%(repo)s", c["repo"])
    pages = {_site_page(p.relative_to(ROOT / "nbs").as_posix()) for p in NBS}
    links = re.findall(re.escape(site) + r"/([\w/.-]+\.html)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert links and not [l for l in links if l not in pages], sorted(set(links) - pages)


def test_the_triton_chapter_says_what_to_install_when_triton_is_missing():
    "Without Triton, importing chapter 19a's module fails with one line naming the package to install, not a bare ModuleNotFoundError."
    import subprocess, sys
    code = ("import sys; sys.modules['triton'] = None\n"
            "try: import transformer_tutorial.flash_triton\n"
            "except ImportError as e: print(e)")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "transformer_tutorial.flash_triton needs Triton: pip install triton (or pip install 'transformer_tutorial[triton]')"


class _StartedCuda:
    "A stand-in for one started CUDA device where there is none: its generator's state, and every seed asked of it."
    def __init__(self, monkeypatch):
        import torch
        self.state, self.seeds = torch.tensor([7], dtype=torch.uint8), []
        for name, value in [('is_initialized', lambda: True), ('device_count', lambda: 1),
                            ('get_rng_state', lambda device='cuda': self.state.clone()),
                            ('set_rng_state', lambda state, device='cuda': setattr(self, 'state', state)),
                            ('manual_seed_all', self.seeds.append), ('manual_seed', self.seeds.append)]:
            monkeypatch.setattr(torch.cuda, name, value)


def test_keep_rng_restores_a_started_cuda_generator_and_seeds_none(monkeypatch):
    "A block that draws on the GPU (a check's dropout there) leaves the device's generator as it found it."
    import torch
    from transformer_tutorial.utils import keep_rng
    cuda = _StartedCuda(monkeypatch)
    with keep_rng(5):
        cuda.state = torch.tensor([9], dtype=torch.uint8)   # what a draw on the device would do
    assert cuda.state.tolist() == [7] and cuda.seeds == []


def test_seeded_builders_and_checks_keep_every_generator(monkeypatch):
    "make_model, position_model and the checks seed the CPU's generator alone (torch.manual_seed would reseed every CUDA "
    "device for good) and give the caller's CPU stream back."
    import torch
    from transformer_tutorial import checks
    from transformer_tutorial.copy_task import CopyTask
    from transformer_tutorial.position_models import position_model
    from transformer_tutorial.layer_norm import LayerNorm
    cuda = _StartedCuda(monkeypatch)
    torch.manual_seed(123); expected = torch.rand(3)
    torch.manual_seed(123)
    cuda.seeds.clear()                                    # the test's own seeding above
    CopyTask().make_model(seed=1)
    position_model('rope', seed=1)
    checks.check_layer_norm(LayerNorm)
    for check in [checks.check_train_step, checks.check_train_loop, checks.check_cached_self_attention, checks.check_gpt_forward]:
        with pytest.raises(AssertionError):
            check(lambda *args, **kwargs: 0.0)           # wrong, but built and seeded on the way to saying so
    assert cuda.seeds == [] and cuda.state.tolist() == [7]
    assert torch.equal(torch.rand(3), expected)


# The site's code column at a 1280 px screen is 98 characters (tests/test_site.py measures it in Chromium); shown code
# is written to 96, which also fits a block indented inside a list.
CODE_WIDTH = 96
HIDDEN = re.compile(r"^#\|\s*(hide|echo:\s*false|include:\s*false)\s*$", re.M)


def test_shown_code_fits_the_site_column():
    "Every line of code the site shows (code cells not hidden, `#|` options aside) is at most CODE_WIDTH characters."
    long = [f"{nb.relative_to(ROOT)} cell {i}: {len(line)} characters: {line.strip()[:60]!r}"
            for nb in NBS for i, c in enumerate(cells(nb))
            if c["cell_type"] == "code" and not HIDDEN.search(src(c))
            for line in src(c).splitlines() if len(line) > CODE_WIDTH and not line.startswith("#|")]
    assert not long, f"{len(long)} shown lines wider than {CODE_WIDTH} characters:\n" + "\n".join(long[:20])
