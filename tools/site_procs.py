"""Notebook processors for the rendered site only: they change the pages `nbdev_docs` renders, never the notebooks.

nbdev 2 runs its own processors on a copy of every notebook (in `_proc/`) before Quarto renders it, then the ones
named in settings.ini's `procs` (space separated `module:object`, imported from PYTHONPATH, which
`tools/render_site.sh` extends with `tools/`):

    procs = site_procs:drop_widget_outputs site_procs:fold_solutions site_procs:explorers_as_raw_html

Each is a `nbdev.process.Processor` subclass: nbdev instantiates it with the notebook (`self.nb`, an
`execnb` notebook whose `path_` is the source path), calls `begin()`, then `cell(cell)` for every cell, then
`end()`. A cell's `#|` nbdev directives are already stripped from its source by then (Quarto's `#| key: value`
options stay), and cells whose `source` is deleted are dropped afterwards.

- `drop_widget_outputs`: Jupyter widget outputs (tqdm progress bars, `interact` sliders) cannot work on a static
  page: they leave blank gaps and make Quarto load the jupyter-widgets manager from a CDN with a floating version.
  Drops them, the empty stream outputs progress bars leave behind, and the notebook's widget state; a text
  progress bar's \r-redrawn frames are reduced to the last one, as a terminal would show it.
- Importing this module also sets how `show_doc` writes an API entry on the site (fastcore's renderer, which nbdev
  runs in this process): signatures wrapped to the code column, a docstring's whole first paragraph in italics, and
  the tokenizer's long default pattern shown by its name (see below).
- `fold_solutions`: in the exercise notebooks (`nbs/exercises/`), shows each solution cell as the student sees
  it (`transformer_tutorial.assignments.strip_solutions`) followed by the solution, without nbgrader's markers,
  folded behind a closed "Show a solution" toggle. The outputs the solutions made (the graded checks' passes,
  what the demonstrations after them print or draw: any cell using a name a solution defines, or one defined from
  it) move out of their cells into callouts that say so, a check's pass open, a demonstration's folded: on the page
  no output sits under the student's stub, which raises.
- Importing this module also installs tools/figure_text.py in this process, so that a figure drawn while rendering (a
  cell nbdev runs again because it imports) records its smallest text as the stored ones do.
"""
import ast
from pathlib import Path

import fastcore.docments as _docments
from execnb.nbio import mk_cell
import yaml
from nbdev.process import Processor

# the cells nbdev runs again while rendering (those that import) may draw figures: they record their smallest text too
import figure_text  # noqa: F401

# `show_doc` as nbdev runs it while rendering (in this process, after this module is imported to name the processors
# below): a signature's parameters wrapped at SIGNATURE_WIDTH, which with their 4-space indent and a comma fits the
# site's 98-character code column (fastcore's default is 110), and a docstring's whole first paragraph in italics
# (fastcore italicizes its first line only, which cuts a docstring wrapped at the column in mid-sentence).
SIGNATURE_WIDTH = 90
_init = _docments.ShowDocRenderer.__init__
assert _init.__code__.co_varnames[:5] == ("self", "sym", "name", "title_level", "maxline"), "fastcore changed show_doc"
_init.__defaults__ = _init.__defaults__[:-1] + (SIGNATURE_WIDTH,)


def _italic_first_paragraph(doc: str) -> str:
    first, sep, rest = doc.partition("\n\n")
    return " " * (len(first) - len(first.lstrip())) + "*" + " ".join(first.split()) + "*" + sep + rest


_docments._ital_first = _italic_first_paragraph
_fmt_default = _docments._fmt_default


def _named_default(value):
    "A default the package names shows by its name: `pattern:str=GPT2_PATTERN`, not the 90 characters of the regex."
    from transformer_tutorial.tokenizer import GPT2_PATTERN
    return "GPT2_PATTERN" if isinstance(value, str) and value == GPT2_PATTERN else _fmt_default(value)


_docments._fmt_default = _named_default

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
SOLUTION_SUMMARY = "Show a solution"
EXERCISES_DIR = "exercises"


def _text(value):
    return "".join(value) if isinstance(value, (list, tuple)) else (value or "")


def _as_shown(text):
    "A stream's text as a terminal shows it: of the frames a progress bar redraws with \\r, only the last per line."
    return "\n".join(next((f for f in reversed(line.split("\r")) if f.strip()), "") for line in text.split("\n"))


class drop_widget_outputs(Processor):
    "Drop widget-view outputs, empty stream outputs and the notebook's `widgets` metadata; collapse \\r frames."
    def begin(self):
        self.nb.metadata.pop("widgets", None)

    def cell(self, cell):
        if cell.cell_type != "code" or not cell.get("outputs"): return
        kept = []
        for out in cell.outputs:
            kind = out.get("output_type")
            if kind in ("display_data", "execute_result") and WIDGET_MIME in out.get("data", {}): continue
            if kind == "stream":
                text = _text(out.get("text"))
                if not text.replace("\r", "").strip(): continue  # an empty leftover of a widget progress bar
                if "\r" in text: out["text"] = _as_shown(text)
            kept.append(out)
        cell.outputs = kept


def _is_exercise(nb):
    path = Path(str(nb.get("path_", "")))
    return EXERCISES_DIR in path.parent.parts


def _has_solution(cell):
    from transformer_tutorial.assignments import BEGIN
    return cell.cell_type == "code" and any(line.strip() == BEGIN for line in cell.source.splitlines())


def _without_markers(source):
    from transformer_tutorial.assignments import BEGIN, END
    return "".join(l for l in source.splitlines(keepends=True) if l.strip() not in (BEGIN, END))


class fold_solutions(Processor):
    """In exercise notebooks: the student's version of each solution cell, then the solution folded behind a toggle;
    the outputs the solutions produced moved into callouts that say so."""
    def begin(self):
        if not _is_exercise(self.nb): return
        from transformer_tutorial.assignments import strip_solutions
        cells, needs = [], set()  # needs: names whose value depends on a solution
        for cell in self.nb.cells:
            if not _has_solution(cell):
                cells.append(cell)
                if cell.cell_type == "code" and needs and cell.get("outputs") and _names_used(cell.source) & needs:
                    needs |= _names_defined(cell.source)
                    check = bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))
                    cells.append(_outputs_as_callout(cell, check))
                    cell.outputs = []
                elif cell.cell_type == "code" and _names_used(cell.source) & needs:
                    needs |= _names_defined(cell.source)
                continue
            needs |= _names_defined(_without_markers(cell.source))
            student = mk_cell(strip_solutions(cell.source), "code", metadata={})
            student.execution_count = None
            cell.source = (f'#| code-fold: true\n#| code-summary: "{SOLUTION_SUMMARY}"\n'
                           + _without_markers(cell.source))
            cell.metadata.pop("nbgrader", None)
            cells += [student, cell]
        self.nb.cells = cells


def _code_lines(source):
    return "".join(l for l in source.splitlines(keepends=True) if not l.lstrip().startswith(("#|", "%", "!")))


def _names_defined(source):
    "The top-level names a cell binds: its functions, classes and assignments (imports bind nothing of the student's)."
    try: tree = ast.parse(_code_lines(source))
    except SyntaxError: return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)): continue
        else:
            for target in ast.walk(node):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store): names.add(target.id)
    return names


def _names_used(source):
    try: return {n.id for n in ast.walk(ast.parse(_code_lines(source))) if isinstance(n, ast.Name)}
    except SyntaxError: return set()


def _options(source):
    "A cell's Quarto options (`#| key: value`) as a dict."
    lines = [l.lstrip()[3:] for l in source.splitlines() if l.lstrip().startswith("#| ")]
    try: return yaml.safe_load("\n".join(lines)) or {}
    except yaml.YAMLError: return {}


def _outputs_as_callout(cell, check):
    """A markdown cell that shows `cell`'s stored outputs (made by the solutions) inside a callout saying so: a
    check's pass shown open, what a demonstration prints or draws folded, so that on the page no output sits under a
    function that raises. Text becomes a `text` fence, a figure a captioned image, HTML stays HTML."""
    opts, parts = _options(cell.source), []
    for out in cell.outputs:
        data = out.get("data", {})
        if out.get("output_type") == "stream": text = _as_shown(_text(out.get("text")))
        elif "image/png" in data:
            cap = str(opts.get("fig-cap", "")).replace("\n", " ")
            alt = str(opts.get("fig-alt", cap)).replace('"', "'").replace("\n", " ")
            parts.append(f'![{cap}](data:image/png;base64,{_text(data["image/png"]).strip()}){{fig-alt="{alt}"}}')
            continue
        elif "text/html" in data:
            parts.append("```{=html}\n" + _text(data["text/html"]).strip() + "\n```")
            continue
        else: text = _text(data.get("text/plain"))
        if text.strip(): parts.append("```text\n" + text.rstrip("\n") + "\n```")
    title = ("What passing looks like: with the solutions above, this check prints"
             if check else "With the solutions above, this shows")
    attrs = '.callout-tip appearance="simple"' if check else '.callout-note collapse="true"'
    body = "\n\n".join(parts)
    return mk_cell(f'::: {{{attrs} title="{title}"}}\n{body}\n:::', "markdown", metadata={})


class explorers_as_raw_html(Processor):
    """Move each Altair chart's stored `text/html` output into a raw HTML block right after its cell.

    Quarto adds require.js and jQuery to every page with a `text/html` output, for scripts that expect them; the
    explorers need neither (without require.js their HTML loads the pinned Vega scripts itself), so the pages load
    two fewer CDN assets."""
    def begin(self):
        cells = []
        for cell in self.nb.cells:
            cells.append(cell)
            if cell.cell_type != "code" or not cell.get("outputs"): continue
            html = [o for o in cell.outputs if "vegaEmbed" in _text(o.get("data", {}).get("text/html"))]
            if not html: continue
            cell.outputs = [o for o in cell.outputs if o not in html]
            cells += [mk_cell('```{=html}\n<div class="explorer">\n' + _text(o["data"]["text/html"]) + "\n</div>\n```", "markdown")
                      for o in html]  # .explorer (styles.css) scrolls a chart wider than the column inside its own box
        self.nb.cells = cells
