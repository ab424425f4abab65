#!/usr/bin/env python
"""Keep the parts of the notebooks and README that derive from settings.ini and nbs/index.ipynb in sync.

- every notebook's "Open in Colab" badge points at its own file in the repository named in settings.ini (an exercise's
  badge at its student version in assignments/, with a link for teachers to the solution notebook);
- every notebook has the hidden Colab-only install cell, installing from that repository;
- assignments/ holds the student versions of nbs/exercises, made by `make_assignments` (never edited by hand);
- README.md is the home page (nbs/index.ipynb) as Markdown (nbdev_readme would need Quarto);
- nbs/sidebar.yml lists every notebook exactly once.

`python tools/sync_docs.py` rewrites what is out of date; `--check` only reports and exits 1 if anything is.
A fork edits `user`/`repo`/`branch` in settings.ini and runs this once.
"""
import argparse, configparser, re, sys
from pathlib import Path

import nbformat
from transformer_tutorial.assignments import _colab_badge, _site_page, _student_version

ROOT = Path(__file__).resolve().parent.parent
BADGE_MARK, INSTALL_MARK = "colab-badge.svg", "google.colab"
STUDENT_DIR = "assignments"  # the generated student versions of nbs/exercises


def settings():
    cp = configparser.ConfigParser(delimiters=["="])
    cp.read(ROOT / "settings.ini", encoding="utf-8")
    return cp["DEFAULT"]


def notebooks(cfg):
    nbs = ROOT / cfg["nbs_path"]
    return sorted(p for p in nbs.rglob("*.ipynb") if not any(part.startswith((".", "_")) for part in p.relative_to(nbs).parts))


def colab_url(cfg, rel):
    "The Colab address of the repository file at `rel`."
    return f"https://colab.research.google.com/github/{cfg['user']}/{cfg['repo']}/blob/{cfg['branch']}/{rel}"


def badge_source(cfg, nb_path):
    "The badge cell: HTML, so that Quarto shows an inline badge with alt text rather than a captioned figure."
    rel = nb_path.relative_to(ROOT).as_posix()
    if nb_path.parent.name != "exercises": return _colab_badge(colab_url(cfg, rel))
    return (_colab_badge(colab_url(cfg, f"{STUDENT_DIR}/{nb_path.name}")) + " opens your own copy of this exercise, where "
            "each function body to write is a `raise NotImplementedError(...)` line.\n"
            f"Teachers: [the solution notebook]({colab_url(cfg, rel)}) has the solutions between nbgrader's markers; "
            "on the course site each solution is folded behind *Show a solution*.")


def install_source(cfg):
    return ("#| hide\n#| notest\n"
            "# Colab only: install the course's package from its repository (a no-op everywhere else).\n"
            "import sys\n"
            f"if '{INSTALL_MARK}' in sys.modules:\n"
            f"    %pip install -q git+{cfg['git_url']}.git@{cfg['branch']}")


def _title_end(nb):
    "Index just after the title cell and the `default_exp` cell, where the badge and install cell go."
    i = 0
    if nb.cells and nb.cells[0].cell_type == "markdown" and nb.cells[0].source.lstrip().startswith("# "): i = 1
    if i < len(nb.cells) and nb.cells[i].cell_type == "code" and "default_exp" in nb.cells[i].source: i += 1
    return i


def sync_notebook(cfg, path, write):
    "Return a list of problems; fix them when `write`."
    nb = nbformat.read(path, as_version=4)
    problems = []
    want = {"badge": ("markdown", badge_source(cfg, path), BADGE_MARK),
            "install cell": ("code", install_source(cfg), INSTALL_MARK)}
    for name, (kind, src, mark) in want.items():
        found = [c for c in nb.cells if c.cell_type == kind and mark in c.source]
        if len(found) == 1 and found[0].source == src: continue
        problems.append(f"{path.relative_to(ROOT)}: {name} {'missing' if not found else 'out of date'}")
        if not write: continue
        if found:
            found[0].source = src
            for extra in found[1:]: nb.cells.remove(extra)
        else:
            at = _title_end(nb) + (1 if name == "install cell" else 0)
            cell = nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
            nb.cells.insert(at, cell)
    if problems and write:
        nbformat.write(nb, path)
    return problems


def site_links(cfg, text):
    "Point links to sibling notebooks at their pages on the rendered site (README sits outside nbs/)."
    site = f"{cfg['doc_host']}{cfg['doc_baseurl']}".rstrip("/")
    return re.sub(r"\]\((?!https?:)([\w/.-]+\.ipynb)\)", lambda m: f"]({site}/{_site_page(m.group(1))})", text)


def readme_text(cfg):
    """The home page as GitHub Markdown: markdown cells as they are, shown code in python fences; hidden cells, and
    those that only draw the site's picture (`#| echo: false`), left out."""
    nb = nbformat.read(ROOT / cfg["nbs_path"] / cfg["readme_nb"], as_version=4)
    parts = ["<!-- Generated from nbs/index.ipynb by tools/sync_docs.py: edit the notebook, then run the tool. -->"]
    for c in nb.cells:
        src = c.source.strip()
        if not src or "default_exp" in src.splitlines()[0]: continue
        if c.cell_type == "markdown": parts.append(site_links(cfg, src))
        elif c.cell_type == "code" and not re.search(r"^#\|\s*(hide\s*$|echo:\s*false)", src, re.M):
            code = "\n".join(l for l in src.splitlines() if not l.startswith("#|"))
            lang = "sh" if code.startswith("!") else "python"
            parts.append(f"```{lang}\n{code.lstrip('!') if lang == 'sh' else code}\n```")
    return "\n\n".join(parts) + "\n"


def sidebar_problems(cfg):
    nbs = ROOT / cfg["nbs_path"]
    text = (nbs / "sidebar.yml").read_text(encoding="utf-8")
    listed = [l.strip().lstrip("- ").strip() for l in text.splitlines() if l.strip().lstrip("- ").strip().endswith(".ipynb")]
    have = [p.relative_to(nbs).as_posix() for p in notebooks(cfg)]
    problems = [f"nbs/sidebar.yml does not list {n}" for n in have if n not in listed]
    problems += [f"nbs/sidebar.yml lists {n}, which does not exist" for n in listed if n not in have]
    problems += [f"nbs/sidebar.yml lists {n} more than once" for n in set(listed) if listed.count(n) > 1]
    return problems


def student_problems(cfg, write):
    "assignments/ must hold exactly the student versions of nbs/exercises, badges pointing at themselves."
    src, out = ROOT / cfg["nbs_path"] / "exercises", ROOT / STUDENT_DIR
    site = f"{cfg['doc_host']}{cfg['doc_baseurl']}".rstrip("/")
    want = {p.name: _student_version(p, colab_url(cfg, f"{STUDENT_DIR}/{{name}}"), site) for p in sorted(src.glob("*.ipynb"))}
    have = {p.name for p in out.glob("*.ipynb")} if out.is_dir() else set()
    problems = []
    for name, text in want.items():
        if name in have and (out / name).read_text(encoding="utf-8") == text: continue
        problems.append(f"{STUDENT_DIR}/{name} {'out of date' if name in have else 'missing'}")
        if write: out.mkdir(exist_ok=True); (out / name).write_text(text, encoding="utf-8")
    for name in sorted(have - set(want)):
        problems.append(f"{STUDENT_DIR}/{name} has no exercise in nbs/exercises")
        if write: (out / name).unlink()
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report only; exit 1 if anything is out of sync")
    ap.add_argument("--notebook", help="sync only this notebook's badge and install cell")
    a = ap.parse_args(argv)
    cfg = settings()
    if a.notebook: return 1 if sync_notebook(cfg, Path(a.notebook).resolve(), write=not a.check) and a.check else 0
    problems = []
    for p in notebooks(cfg): problems += sync_notebook(cfg, p, write=not a.check)
    readme = ROOT / "README.md"
    text = readme_text(cfg)
    if not readme.exists() or readme.read_text(encoding="utf-8") != text:
        problems.append("README.md does not match nbs/index.ipynb")
        if not a.check: readme.write_text(text, encoding="utf-8")
    problems += sidebar_problems(cfg)
    problems += student_problems(cfg, write=not a.check)
    for p in problems: print(("out of sync: " if a.check else "synced: ") + p)
    return 1 if a.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
