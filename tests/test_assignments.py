"The assignment generator end to end: student versions written, solutions gone, they fail first with NotImplementedError; grading."
import importlib.util, json, os, subprocess, sys
from pathlib import Path

import pytest

from transformer_tutorial.assignments import make_assignments, strip_solutions, grade_notebook, STUB_MESSAGE

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "nbs" / "exercises"
NAMES = sorted(p.name for p in EXERCISES.glob("*.ipynb"))


def cells(path):
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    return [dict(c, text="".join(c["source"])) for c in nb["cells"]]


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    return out, make_assignments(out)


def test_strip_solutions_keeps_indentation_and_surroundings():
    src = 'class A:\n    def f(self):\n        "doc"\n        ### BEGIN SOLUTION\n        return 1\n        ### END SOLUTION\n\n    def g(self):\n        ### BEGIN SOLUTION\n        return 2\n        ### END SOLUTION\n        # after\n'
    out = strip_solutions(src)
    assert "return 1" not in out and "return 2" not in out and "SOLUTION" not in out
    assert out.count(f"        raise NotImplementedError({STUB_MESSAGE!r})\n") == 2
    assert '        "doc"\n' in out and "    def g(self):\n" in out and out.endswith("        # after\n")
    assert strip_solutions("x = 1") == "x = 1"


@pytest.mark.parametrize("src, msg", [("### BEGIN SOLUTION\nx = 1", "without a matching"),
                                      ("x = 1\n### END SOLUTION", "without a '### BEGIN"),
                                      ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "nested")])
def test_strip_solutions_rejects_unbalanced_markers(src, msg):
    with pytest.raises(ValueError, match=msg): strip_solutions(src)


def test_exercise_notebooks_carry_nbgrader_metadata():
    assert NAMES == ["ex01_attention.ipynb", "ex02_masks.ipynb", "ex03_multi_head_attention.ipynb",
                     "ex04_positional_encoding.ipynb", "ex05_layer_norm_feed_forward.ipynb", "ex06_encoder_decoder_layers.ipynb", "ex07_loss_and_schedule.ipynb",
                                       "ex08_online_softmax_tiled_attention.ipynb", "ex09_byte_pair_encoding.ipynb",
                                       "ex10_training_step.ipynb", "ex11_greedy_decoding_cache.ipynb", "ex12_beam_search.ipynb", "ex13_gpt_and_sampling.ipynb"]
    for name in NAMES:
        cs = cells(EXERCISES / name)
        sol = [c for c in cs if "### BEGIN SOLUTION" in c["text"]]
        chk = [c for c in cs if c["text"].startswith("check_")]
        assert sol and len(sol) == len(chk), name
        assert all(c["metadata"]["nbgrader"]["solution"] and not c["metadata"]["nbgrader"]["grade"] for c in sol), name
        assert all(c["metadata"]["nbgrader"]["grade"] and c["metadata"]["nbgrader"]["locked"] for c in chk), name
        ids = [c["metadata"]["nbgrader"]["grade_id"] for c in sol + chk]
        assert len(set(ids)) == len(ids), name


def test_make_assignments_writes_student_versions(student_dir):
    out, paths = student_dir
    assert [p.name for p in paths] == NAMES and all(p.parent == out and p.is_file() for p in paths)
    for p in paths:
        src, stu = cells(EXERCISES / p.name), cells(p)
        blocks = sum(c["text"].count("### BEGIN SOLUTION") for c in src)
        code = [c for c in stu if c["cell_type"] == "code"]
        assert not any("SOLUTION" in c["text"] for c in code), p.name
        assert sum(c["text"].count("raise NotImplementedError(") for c in code) == blocks, p.name
        assert all(c["outputs"] == [] and c["execution_count"] is None for c in code), p.name
        # everything else is kept: the markdown (less the badge, which opens the solution), checks and metadata
        assert [c["text"] for c in stu if c["cell_type"] == "markdown"] == \
               [c["text"] for c in src if c["cell_type"] == "markdown" and "colab-badge.svg" not in c["text"]]
        assert [c["metadata"] for c in code] == [c["metadata"] for c in src if c["cell_type"] == "code"]
        assert [c["text"] for c in code if c["text"].startswith("check_")] == \
               [c["text"] for c in src if c["text"].startswith("check_")]
        # the solution bodies are gone, the signatures stay
        for s, t in zip([c for c in src if c["cell_type"] == "code"], code):
            if "### BEGIN SOLUTION" not in s["text"]: assert s["text"] == t["text"]
            else: assert s["text"].split("\n")[0] == t["text"].split("\n")[0]


def test_make_assignments_links_and_errors(tmp_path):
    paths = make_assignments(tmp_path / "a", source=EXERCISES, badge_url="https://colab.example/{name}",
                             site_url="https://site.example/course/")
    text = paths[0].read_text(encoding="utf-8")
    badge = next(c["source"] for c in json.loads(text)["cells"] if "colab-badge.svg" in "".join(c["source"]))
    assert badge == ['<a href="https://colab.example/ex01_attention.ipynb"><img src="https://colab.research.google.com/assets/colab-badge.svg" alt="Open In Colab"></a>']
    assert "github/" not in text and "solution notebook" not in text
    assert "(https://site.example/course/attention.html)" in text and "../01_attention.ipynb" not in text  # nbdev drops the 01_
    with pytest.raises(FileNotFoundError, match="source must be a folder"): make_assignments(tmp_path / "b", source=tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .ipynb"): make_assignments(tmp_path / "b", source=tmp_path / "empty")
    with pytest.raises(ValueError, match="overwrite the solutions"): make_assignments(EXERCISES, source=EXERCISES)


@pytest.mark.parametrize("name", NAMES)
def test_student_notebook_fails_first_with_not_implemented(student_dir, name):
    out, _ = student_dir
    report = grade_notebook(out / name, timeout=300)
    nb = cells(out / name)
    first_solution = next(i for i, c in enumerate(nb) if "nbgrader" in c["metadata"] and c["metadata"]["nbgrader"]["solution"])
    first_check = next(i for i, c in enumerate(nb) if "nbgrader" in c["metadata"] and c["metadata"]["nbgrader"]["grade"])
    err = report["first_error"]
    assert "NotImplementedError" in err["error"], err  # raised by the stub, or reported by the check that called it
    assert err["cell"] in (first_solution, first_check), (err, first_solution, first_check)
    assert report["score"] == 0 and not any(c["passed"] for c in report["checks"].values())


def test_grade_notebook_gives_partial_credit(student_dir, tmp_path):
    "ex02 with only causal_mask written: one check of two passes, the other names the NotImplementedError."
    out, _ = student_dir
    nb = json.loads((out / "ex02_masks.ipynb").read_text(encoding="utf-8"))
    for c in nb["cells"]:
        text = "".join(c["source"])
        if text.startswith("def causal_mask"):
            c["source"] = text.split("    # YOUR CODE HERE")[0] + "    return torch.ones(size, size, dtype=torch.bool).tril()[None, None]\n"
    path = tmp_path / "ex02_masks.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    r = grade_notebook(path, timeout=300)
    assert (r["score"], r["max_score"]) == (1, 2)
    assert r["checks"]["ex02_masks_check_causal_mask"]["passed"]
    assert r["checks"]["ex02_masks_check_padding_mask"]["error"].count("NotImplementedError")


@pytest.mark.parametrize("name", ["ex07_loss_and_schedule.ipynb", "ex08_online_softmax_tiled_attention.ipynb", "ex09_byte_pair_encoding.ipynb",
                                  "ex10_training_step.ipynb", "ex11_greedy_decoding_cache.ipynb", "ex12_beam_search.ipynb", "ex13_gpt_and_sampling.ipynb"])
def test_the_second_half_grades_a_half_done_notebook_in_between(student_dir, tmp_path, name):
    "The student's version with only its first function written (the solution's cell put in): 1 point, every other check names the stub."
    out, _ = student_dir
    student = json.loads((out / name).read_text(encoding="utf-8"))
    solution = json.loads((EXERCISES / name).read_text(encoding="utf-8"))
    first = next(c for c in solution["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    gid = first["metadata"]["nbgrader"]["grade_id"]
    for c in student["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == gid: c["source"] = first["source"]
    path = tmp_path / name
    path.write_text(json.dumps(student), encoding="utf-8")
    r = grade_notebook(path, timeout=300)
    checks = sum(bool(c["metadata"].get("nbgrader", {}).get("grade")) for c in solution["cells"])
    assert (r["score"], r["max_score"]) == (1, checks) and checks >= 2, r
    failed = [v for v in r["checks"].values() if not v["passed"]]
    assert len(failed) == checks - 1 and all("NotImplementedError" in f["error"] for f in failed), r


@pytest.mark.parametrize("name", NAMES)
def test_solution_notebooks_pass(name):
    r = grade_notebook(EXERCISES / name, timeout=300)
    assert r["first_error"] is None and r["score"] == r["max_score"] > 0, r


@pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None, reason="nbgrader is not installed")
def test_nbgrader_generate_assignment(tmp_path):
    course = tmp_path / "course"
    src = course / "source" / "transformer"
    src.mkdir(parents=True)
    for name in NAMES: (src / name).write_bytes((EXERCISES / name).read_bytes())
    r = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "transformer",
                        f"--CourseDirectory.root={course}"], cwd=course, capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})  # nbgrader runs `alembic`
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    for name in NAMES:
        rel = cells(course / "release" / "transformer" / name)
        code = "".join(c["text"] for c in rel if c["cell_type"] == "code")
        assert "SOLUTION" not in code and "raise NotImplementedError()" in code, name
        assert sum(c["text"].startswith("check_") for c in rel) == sum(c["text"].startswith("check_") for c in cells(EXERCISES / name))


def _tiny(*cells):
    "A notebook of code cells without torch; a cell given as ('check', code) is a graded check cell."
    import nbformat
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "python3", "language": "python"}})
    for i, c in enumerate(cells):
        check = isinstance(c, tuple)
        cell = nbformat.v4.new_code_cell(c[1] if check else c)
        if check: cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": f"check{i}", "points": 1}
        nb.cells.append(cell)
    return nb


def test_run_check_cells_interrupts_a_hung_cell_and_goes_on(tmp_path):
    from transformer_tutorial.assignments import run_check_cells
    r = run_check_cells(_tiny("import time", ("check", "while True: time.sleep(0.05)"), ("check", "x = 1")), tmp_path, timeout=3)
    assert r["status"] == "timed out" and r["score"] == 1
    assert r["checks"]["check1"]["error"] == "CellTimeoutError: the cell ran longer than 3 s and was interrupted" and r["checks"]["check2"]["passed"]


def test_run_check_cells_says_crashed_and_counts_what_never_ran(tmp_path):
    from transformer_tutorial.assignments import run_check_cells
    nb = _tiny(("check", "x = 1"), "import os\nos._exit(1)", ("check", "y = 2"))
    nb.cells[2].outputs = [{"output_type": "stream", "name": "stdout", "text": "stored by the student\n"}]  # not a result
    r = run_check_cells(nb, tmp_path, timeout=60)
    assert r["status"] == "crashed" and r["score"] == 1
    assert r["checks"]["check2"]["error"].startswith("not run: the kernel died") and nb.cells[2].outputs == []


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_AS is a POSIX limit")
def test_run_check_cells_caps_the_kernels_memory(tmp_path):
    "2 GiB fit this machine, but not under a 1 GiB cap: the student's code gets the MemoryError, the grading goes on."
    from transformer_tutorial.assignments import run_check_cells
    r = run_check_cells(_tiny(("check", "b = bytearray(2 << 30)"), ("check", "x = 1")), tmp_path, timeout=60, memory_limit=1 << 30)
    assert r["status"] == "ok" and r["checks"]["check0"]["error"].startswith("MemoryError") and r["checks"]["check1"]["passed"]
