"""A class of generated submissions of ex01_attention and ex02_masks, for the graders' tests (tests/test_grading.py).

`CLASS` maps each student to what they wrote: the code of each solution cell (by its grade id; a cell not named holds
`OWN`'s right solution, written otherwise than the reference, or the reference's one-line solution), the cells they
changed otherwise, and code they added to an exercise's import cell (`IMPORTS_EX02`). `EXPECTED` is the grade each
deserves, which the batch grader gives; `NBGRADER_EXPECTED` is what nbgrader gives, the same but for the student who
forges the verdicts inside the kernel by rebinding the checks."""
import inspect, json
from pathlib import Path

from transformer_tutorial.assignments import BEGIN, END, exercise_folder, strip_solutions
import transformer_tutorial.masks

EXERCISES = ["ex01_attention", "ex02_masks"]
SDPA, PAD, CAUSAL = "ex01_attention_scaled_dot_product_attention", "ex02_masks_padding_mask", "ex02_masks_causal_mask"
CHECK_SDPA, CHECK_CAUSAL = "ex01_attention_check_scaled_dot_product_attention", "ex02_masks_check_causal_mask"
STUB, DELETE = "stub", "delete"  # a solution cell left as handed out; a cell the student deleted
IMPORTS_EX02 = ("ex02_masks", "imports")  # code added at the end of the masks notebook's import cell

UNSCALED = '''def scaled_dot_product_attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1)
    if mask is not None: scores = scores.masked_fill(~mask, float('-inf'))
    weights = scores.softmax(-1)
    return weights @ value, weights
'''
OWN = {SDPA: '''import math, torch
def scaled_dot_product_attention(query, key, value, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(key.shape[-1])
    if mask is not None: scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None: weights = weights * mask
    return torch.einsum("...qk,...kd->...qd", weights, value), weights
'''}
CLASS = {
    "ada": {},                                                        # everything right
    "ben": {PAD: STUB},                                               # partly done
    "cy": {SDPA: "import torch.nn.functionall as G  # raises at import\n"},
    "dee": {SDPA: "def scaled_dot_product_attention(query, key, value, mask=None):\n    while True: pass\n"},  # hangs
    "eve": {SDPA: STUB, CHECK_SDPA: "print('all checks pass')\n", CAUSAL: STUB, CHECK_CAUSAL: DELETE},  # edits and deletes checks
    "fay": {SDPA: "from transformer_tutorial.attention import scaled_dot_product_attention\n",
            PAD: "import torch\n" + inspect.getsource(transformer_tutorial.masks.padding_mask).replace("tokens", "ids")},
    "gus": {SDPA: UNSCALED},                                          # a mistake the check names
    # the masks left as handed out, and the verdict forged in the kernel: the checks rebound, the checks' helper patched
    # to call the reference, every later error swallowed
    "kim": {PAD: STUB, CAUSAL: STUB, IMPORTS_EX02: "check_padding_mask = check_causal_mask = lambda fn: None"},
    "lee": {PAD: STUB, CAUSAL: STUB, IMPORTS_EX02: "import transformer_tutorial.checks.attention as A\n"
            "A._call = lambda name, fn, *args, **kw: getattr(A, name)(*args, **kw)"},
    "mo": {PAD: STUB, CAUSAL: STUB, IMPORTS_EX02: "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)"},
}
# points out of 3 (1 for ex01, 2 for ex02), as each deserves
EXPECTED = {"ada": 3, "ben": 2, "cy": 2, "dee": 2, "eve": 1, "fay": 3, "gus": 2, "kim": 1, "lee": 1, "mo": 1}
# nbgrader runs the checks in the student's kernel: kim's rebinding passes there; lee's patch is caught by the checks' own
# guard (chapter 13), and mo's exception handler hides no error from nbgrader (the kernel's reply still says "error")
NBGRADER_EXPECTED = dict(EXPECTED, kim=3)


def _solution(source):
    "A solution cell of the exercise notebook as a student who wrote the reference solution hands it in."
    return "".join(line for line in source.splitlines(keepends=True) if line.strip() not in (BEGIN, END))


def submission(student, exercise, stub=None):
    "The notebook `student` hands in for `exercise`, as a dict; `stub` rewrites a solution cell as handed out (default: make_assignments')."
    nb = json.loads((exercise_folder() / f"{exercise}.ipynb").read_text(encoding="utf-8"))
    cells = []
    for cell in nb["cells"]:
        meta, source = cell["metadata"].get("nbgrader", {}), "".join(cell["source"])
        wrote = CLASS[student].get(meta.get("grade_id"), OWN.get(meta.get("grade_id")))
        if wrote == DELETE: continue
        if meta.get("solution"): source = (stub or strip_solutions)(source) if wrote == STUB else wrote or _solution(source)
        elif wrote: source = wrote
        elif cell["cell_type"] == "code" and source.startswith("import") and (exercise, "imports") in CLASS[student]:
            source = source.rstrip("\n") + "\n" + CLASS[student][exercise, "imports"]
        if cell["cell_type"] == "code": cell["outputs"], cell["execution_count"] = [], None
        cells.append(dict(cell, source=source))
    return dict(nb, cells=cells)


def write_class(folder, layout="{student}/{exercise}.ipynb", stub=None):
    "Write every student's notebooks under `folder` at `layout`; returns their paths."
    paths = []
    for student in CLASS:
        for exercise in EXERCISES:
            path = Path(folder) / layout.format(student=student, exercise=exercise)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(submission(student, exercise, stub), indent=1), encoding="utf-8")
            paths.append(path)
    return paths
