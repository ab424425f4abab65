"""Grading a class (chapter 15a): the bad-input table and the integrity flag, then a generated class of seven
(tests/classroom.py) through the batch grader and through nbgrader's whole loop, each with the grades it deserves.

In CI (`TT_WHEEL` set) both graders run with the package installed from the wheel into the newest environment (nbgrader
beside it, not in it), from an empty folder; elsewhere they run with this interpreter's install."""
import csv, importlib.util, io, json, os, subprocess, sys
from pathlib import Path

import nbformat
import pytest

from transformer_tutorial.assignments import exercise_folder
from transformer_tutorial.cli import main
from transformer_tutorial.grading import (course_exercises, copies, find_submissions, fingerprint, grade_folder, identify,
                                          reference_fingerprints, reference_uses)
from classroom import CLASS, EXERCISES, EXPECTED, write_class
import test_installed

EXERCISE_SET = course_exercises()
NEEDS_NBGRADER = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None, reason="nbgrader is not installed")


# ---------------------------------------------------------------- integrity
@pytest.mark.parametrize("code, found", [
    ("from transformer_tutorial.attention import scaled_dot_product_attention", "imports scaled_dot_product_attention from transformer_tutorial.attention"),
    ("from transformer_tutorial.attention import scaled_dot_product_attention as mine", "imports scaled_dot_product_attention"),
    ("from transformer_tutorial.attention import *", "imports * from transformer_tutorial.attention"),
    ("import transformer_tutorial\nf = transformer_tutorial.attention.scaled_dot_product_attention", "uses transformer_tutorial.attention.scaled_dot_product_attention"),
    ("import transformer_tutorial.attention as A\ndef scaled_dot_product_attention(q, k, v, mask=None):\n    return A.scaled_dot_product_attention(q, k, v, mask)",
     "uses transformer_tutorial.attention.scaled_dot_product_attention"),
    ("from transformer_tutorial import attention\n%time attention.scaled_dot_product_attention(q, k, v)", "uses transformer_tutorial.attention.scaled_dot_product_attention"),
])
def test_reference_uses_are_found(code, found):
    assert any(f.startswith(found) for f in reference_uses([code], ["scaled_dot_product_attention"])), reference_uses([code], ["scaled_dot_product_attention"])


@pytest.mark.parametrize("code", ["from transformer_tutorial.multi_head import MultiHeadAttention",  # not this exercise's
                                  "from transformer_tutorial.checks import check_scaled_dot_product_attention",
                                  "import math\ndef scaled_dot_product_attention(q, k, v, mask=None): return q",
                                  "def f(:\n  broken"])
def test_legitimate_code_is_not_flagged(code):
    assert reference_uses([code], ["scaled_dot_product_attention"]) == []


def test_copies_found_up_to_names_comments_and_strings():
    import inspect
    from transformer_tutorial import positional
    refs = reference_fingerprints(EXERCISE_SET["ex04_positional_encoding"])
    source = inspect.getsource(positional.sinusoidal_positional_encoding)
    disguised = "# my own work\n" + source.replace("max_len", "n").replace("d_model", "width").replace("must", "has to")
    assert copies([disguised], refs) == ["sinusoidal_positional_encoding is a copy of transformer_tutorial.positional.sinusoidal_positional_encoding"]
    solution = EXERCISE_SET["ex04_positional_encoding"].solutions
    assert copies(solution, refs) == ["sinusoidal_positional_encoding is a copy of sinusoidal_positional_encoding of the solution notebook ex04_positional_encoding.ipynb"]


def test_what_is_never_a_copy():
    "Constructors, what the student is handed, one-line bodies, and a correct solution written otherwise."
    import ast
    ln = EXERCISE_SET["ex05_layer_norm_feed_forward"]
    refs = reference_fingerprints(ln)
    assert not any("__init__" in w for w in refs.values())
    from transformer_tutorial.assignments import strip_solutions
    assert copies([strip_solutions(s) for s in ln.solutions], refs) == []
    assert fingerprint(ast.parse("def f(x):\n    'doc'\n    return x.tril()").body[0]) is None
    own = ("class LayerNorm(nn.Module):\n    def forward(self, x):\n        mu = x.mean(-1, keepdim=True)\n"
           "        sd = ((x - mu) ** 2).mean(-1, keepdim=True).add(self.eps).sqrt()\n        return self.weight * (x - mu) / sd + self.bias\n")
    assert copies([own], refs) == []


# ---------------------------------------------------------------- finding and naming submissions
def _nb(exercise):
    return json.loads((exercise_folder() / f"{exercise}.ipynb").read_text(encoding="utf-8"))


def test_identify_by_check_cells_then_by_name():
    nb = nbformat.from_dict(_nb("ex02_masks"))
    assert identify(nb, Path("ex01_attention.ipynb"), EXERCISE_SET) == ("ex02_masks", "holds exercise ex02_masks (by its check cells): graded as ex02_masks")
    assert identify(nb, Path("ex02_masks.ipynb"), EXERCISE_SET) == ("ex02_masks", None)
    bare = nbformat.from_dict({**_nb("ex02_masks"), "cells": []})
    assert identify(bare, Path("ex02_masks.ipynb"), EXERCISE_SET)[0] == "ex02_masks"
    name, line = identify(bare, Path("homework.ipynb"), EXERCISE_SET)
    assert name is None and line.startswith("no check cells, and its name is none of the exercises'")


def test_an_empty_folder_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "class").mkdir()
    assert main(["grade", str(tmp_path / "class"), "--out", str(tmp_path / "grades.csv")]) == 2
    assert capsys.readouterr().err == (f"transformer-tutorial grade: error: no submissions in {tmp_path / 'class'}: expected "
                                       "STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb\n")
    assert sorted(tmp_path.rglob("*")) == [tmp_path / "class"]


def test_find_submissions_bad_input(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no submissions in .*: expected STUDENT/EXERCISE.ipynb"): find_submissions(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no submissions folder at"): find_submissions(tmp_path / "nope")
    for rel in ["c/ann/ex01_attention.ipynb", "c/Ann /ex02_masks.ipynb", "c/ann/notes.txt", "c/loose.ipynb",
                "c/ann/.ipynb_checkpoints/ex01_attention-checkpoint.ipynb", "c/bob/a/b/deep.ipynb"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True); (tmp_path / rel).write_text("{}")
    found, problems = find_submissions(tmp_path / "c")
    assert [(s, p.name) for s, p in found] == [("Ann ", "ex02_masks.ipynb"), ("ann", "ex01_attention.ipynb")]
    assert problems == ["ann/notes.txt: not a notebook (.ipynb), skipped",
                        "bob/a/b/deep.ipynb: not where a submission goes (STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb), skipped",
                        "loose.ipynb: not where a submission goes (STUDENT/EXERCISE.ipynb, or nbgrader's submitted/STUDENT/ASSIGNMENT/EXERCISE.ipynb), skipped",
                        "student folders 'Ann ', 'ann' look like one student: each is graded under its own name; merge them by hand if they are"]


@pytest.mark.parametrize("submissions, out, message", [
    ("c", "c/grades.csv", "the grades CSV .* and the submissions folder .* overlap"),
    ("grades_feedback/c", "grades.csv", "the feedback folder .* and the submissions folder .* overlap"),
    ("c", "folder", "--out .* is a folder")])
def test_outputs_that_would_clash_are_refused(tmp_path, capsys, submissions, out, message):
    "The CSV among the submissions, the submissions inside the feedback folder, a folder as the CSV: one line, exit 2, nothing written."
    import re
    student = tmp_path / submissions / "ann"
    student.mkdir(parents=True)
    (student / "ex02_masks.ipynb").write_text(json.dumps(_nb("ex02_masks")))
    (tmp_path / "folder").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert main(["grade", str(tmp_path / submissions), "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]), err
    assert sorted(tmp_path.rglob("*")) == before


# ---------------------------------------------------------------- the generated class, through both graders
TIMEOUT = 10  # seconds a cell may run: dee's loop is stopped after it, every other cell needs far less


class Grader:
    "Runs the console scripts: from the wheel in the newest environment in CI, else from this interpreter's install."
    def __init__(self, tmp):
        if os.environ.get("TT_WHEEL"):
            self.python = test_installed.environments()[0][1]
            self._pip(["install", "-q", os.environ["TT_WHEEL"]])
            self._pip(["install", "-q", "--target", str(tmp / "nbgrader"), "nbgrader"])  # beside the environment, not in it
            self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JUPYTER_PATH")}
            self.env["JUPYTER_DATA_DIR"] = str(tmp / "jupyter")  # the kernel `python3` is the environment's own
        else:
            self.python, self.env = sys.executable, dict(os.environ)
        self.bin = Path(self.python).parent
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"  # nbgrader runs `alembic`
        target = tmp / "nbgrader"  # nbgrader's modules, scripts and nbconvert templates, when installed beside the environment
        self.nbgrader_env = self.env if not target.is_dir() else dict(
            self.env, PYTHONPATH=str(target), JUPYTER_PATH=str(target / "share" / "jupyter"),
            PATH=f"{target / 'bin'}{os.pathsep}{self.env['PATH']}")

    def _pip(self, args):
        r = subprocess.run([self.python, "-m", "pip", *args], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]

    def grade(self, args, cwd):
        return subprocess.run([str(self.bin / "transformer-tutorial"), "grade", *args], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=1200)

    def nbgrader(self, args, cwd):
        r = subprocess.run([self.python, "-m", "nbgrader", *args], cwd=cwd, env=self.nbgrader_env, capture_output=True, text=True,
                           timeout=1200)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        return r.stdout + r.stderr


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    return Grader(tmp_path_factory.mktemp("grader"))


def _rows(path):
    return list(csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8"))))


def _totals(rows, students=CLASS):
    return {s: sum(float(r["points"]) for r in rows if r["student"] == s) for s in students}


@pytest.fixture(scope="module")
def batch(grader, tmp_path_factory):
    "The class in STUDENT/EXERCISE.ipynb, plus the bad input of the issue's table beside it, graded once."
    root = tmp_path_factory.mktemp("batch")
    write_class(root / "class")
    ada = root / "class" / "ada"
    (root / "class" / "hal").mkdir(); (root / "class" / "hal" / "ex01_attention.ipynb").write_bytes((ada / "ex02_masks.ipynb").read_bytes())
    (root / "class" / "Ada").mkdir(); (root / "class" / "Ada" / "ex01_attention.ipynb").write_bytes((ada / "ex01_attention.ipynb").read_bytes())
    (root / "class" / "ivy").mkdir(); (root / "class" / "ivy" / "notes.txt").write_text("my notes")
    bare = {**_nb("ex02_masks"), "cells": [c for c in _nb("ex02_masks")["cells"] if "grade" not in c["metadata"].get("nbgrader", {})
                                           or not c["metadata"]["nbgrader"]["grade"]]}
    (root / "class" / "ivy" / "homework.ipynb").write_text(json.dumps(bare))
    (root / "class" / "ivy" / "ex01_attention.ipynb").write_text('{"cells": [')  # cut short by a failed upload
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", str(TIMEOUT), "--jobs", "2"], root)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return root, r


def test_batch_grader_gives_each_student_the_grade_deserved(batch):
    root, r = batch
    print(r.stdout)
    rows = _rows(root / "out" / "grades.csv")
    assert _totals(rows) == EXPECTED
    by = {(row["student"], row["exercise"]): row for row in rows}
    assert {k for k, row in by.items() if row["status"] != "ok"} == {("dee", "ex01_attention")}
    assert by["dee", "ex01_attention"]["status"] == "timed out" and f"ran longer than {TIMEOUT} s" in by["dee", "ex01_attention"]["notes"]
    assert by["cy", "ex01_attention"]["first_failure"] == "check_scaled_dot_product_attention: NameError: name 'scaled_dot_product_attention' is not defined"
    assert "no scaling" in by["gus", "ex01_attention"]["first_failure"]
    assert by["ben", "ex02_masks"]["passed"] == "check_causal_mask" and "NotImplementedError" in by["ben", "ex02_masks"]["first_failure"]
    assert by["eve", "ex01_attention"]["notes"] == "check_scaled_dot_product_attention was edited: the original ran"
    assert by["eve", "ex02_masks"]["notes"] == "check_causal_mask is missing (deleted?): 0 points"
    assert by["fay", "ex01_attention"]["integrity"] == "imports scaled_dot_product_attention from transformer_tutorial.attention"
    assert by["fay", "ex02_masks"]["integrity"] == "padding_mask is a copy of transformer_tutorial.masks.padding_mask"
    assert {k for k, row in by.items() if row["integrity"]} == {("fay", "ex01_attention"), ("fay", "ex02_masks")}
    assert {k for k, row in by.items() if row["notes"]} == {("dee", "ex01_attention"), ("eve", "ex01_attention"), ("eve", "ex02_masks")}
    for student, points in EXPECTED.items():
        assert f"**{points:g} / 3 points**" in (root / "out" / "grades_feedback" / f"{student}.md").read_text(encoding="utf-8")


def test_batch_grader_bad_input_is_one_line_each_and_the_rest_is_graded(batch):
    root, r = batch
    lines = [line for line in r.stderr.splitlines() if line.startswith("transformer-tutorial grade: ")]  # not the progress bar
    broken = [line for line in lines if line.startswith("transformer-tutorial grade: ivy/ex01_attention.ipynb: not a readable notebook (")]
    assert len(broken) == 1 and broken[0].endswith("), skipped"), lines
    assert sorted(set(lines) - set(broken)) == sorted("transformer-tutorial grade: " + line for line in [
        "hal/ex01_attention.ipynb: holds exercise ex02_masks (by its check cells): graded as ex02_masks",
        "ivy/homework.ipynb: no check cells, and its name is none of the exercises' (ex01_attention, ex02_masks, "
        "ex03_multi_head_attention, ex04_positional_encoding, ex05_layer_norm_feed_forward, ex06_encoder_decoder_layers, "
        "ex07_loss_and_schedule, ex08_online_softmax_tiled_attention, ex09_byte_pair_encoding): skipped",
        "ivy/notes.txt: not a notebook (.ipynb), skipped",
        "student folders 'Ada', 'ada' look like one student: each is graded under its own name; merge them by hand if they are"])
    rows = _rows(root / "out" / "grades.csv")
    assert [(row["student"], row["exercise"], row["points"]) for row in rows if row["student"] in ("Ada", "hal")] == \
           [("Ada", "ex01_attention", "1.0"), ("hal", "ex02_masks", "2.0")]
    assert not any(row["student"] == "ivy" for row in rows)


def test_batch_grader_rerun_skips_unchanged_submissions(batch, grader):
    root, _ = batch
    before = (root / "out" / "grades.csv").read_text(encoding="utf-8")
    r = grader.grade(["class", "--out", "out/grades.csv", "--timeout", str(TIMEOUT)], root)
    assert r.returncode == 0 and "graded 16 notebooks of 9 students (16 unchanged since the last run, not rerun)" in r.stdout, r.stdout + r.stderr
    assert (root / "out" / "grades.csv").read_text(encoding="utf-8") == before


@pytest.fixture(scope="module")
def nbgrader_course(grader, tmp_path_factory):
    "A course folder with the two exercises, released, submitted by the class, collected, autograded, fed back and exported."
    root = tmp_path_factory.mktemp("nbgrader")
    course, exchange = root / "course", root / "exchange"
    (course / "source" / "transformer").mkdir(parents=True); exchange.mkdir()
    for e in EXERCISES: (course / "source" / "transformer" / f"{e}.ipynb").write_bytes((exercise_folder() / f"{e}.ipynb").read_bytes())
    (course / "nbgrader_config.py").write_text(
        f'c = get_config()\nc.CourseDirectory.course_id = "transformer-course"\nc.CourseDirectory.root = r"{course}"\n'
        f'c.Exchange.root = r"{exchange}"\nc.Execute.timeout = {TIMEOUT}\n'
        'c.CollectApp.check_owner = False  # every student submits as the user running the test\n')
    logs = {}
    for step in (["generate_assignment", "transformer"], ["release_assignment", "transformer"]): logs[step[0]] = grader.nbgrader(step, course)
    write_class(root / "students", "{student}/transformer/{exercise}.ipynb")
    for student in CLASS:
        grader.nbgrader(["submit", "transformer", "--course", "transformer-course", f"--student={student}",
                         f"--Exchange.root={exchange}"], root / "students" / student)
    for step in (["collect", "transformer"], ["autograde", "transformer"], ["generate_feedback", "transformer"], ["export"]):
        logs[step[0]] = grader.nbgrader(step, course)
    return course, logs


@NEEDS_NBGRADER
def test_nbgrader_loop_grades_every_student(nbgrader_course, grader):
    course, logs = nbgrader_course
    rows = _rows(course / "grades.csv")
    assert {r["student_id"]: float(r["score"]) for r in rows} == EXPECTED and {r["max_score"] for r in rows} == {"3.0"}
    for student in CLASS:
        for e in EXERCISES: assert (course / "feedback" / student / "transformer" / f"{e}.html").is_file(), (student, e)
    # the hung cell was interrupted, and its check scored 0
    dee = nbformat.read(course / "autograded" / "dee" / "transformer" / "ex01_attention.ipynb", as_version=4)
    check = next(c for c in dee.cells if c.source.startswith("check_"))
    assert "CellTimeoutError" in [o.get("ename") for o in check.outputs]
    # the edited check cell: found by its checksum and replaced by the original, which failed
    assert "Attribute 'checksum' for cell ex01_attention_check_scaled_dot_product_attention has changed" in logs["autograde"]
    eve = nbformat.read(course / "autograded" / "eve" / "transformer" / "ex01_attention.ipynb", as_version=4)
    check = next(c for c in eve.cells if c.metadata.get("nbgrader", {}).get("grade"))
    assert check.source == "check_scaled_dot_product_attention(scaled_dot_product_attention)"
    # the deleted check cell: no score, and the notebook waits for a manual grade
    query = ("from nbgrader.api import Gradebook\nwith Gradebook('sqlite:///gradebook.db') as gb:\n"
             "    nb = gb.find_submission_notebook('ex02_masks', 'transformer', 'eve')\n"
             "    print(nb.needs_manual_grade, [(g.name, g.auto_score) for g in nb.grades])")
    r = subprocess.run([grader.python, "-c", query], cwd=course, capture_output=True, text=True, env=grader.nbgrader_env)
    assert r.stdout.strip() == "True [('ex02_masks_check_padding_mask', 1.0), ('ex02_masks_check_causal_mask', None)]", r.stdout + r.stderr


@NEEDS_NBGRADER
def test_batch_grader_reads_nbgrader_folders_and_agrees(nbgrader_course, batch, grader):
    "nbgrader's submitted/ holds the same notebooks, so the batch grader's cache answers for all of them, and the grades agree."
    course, _ = nbgrader_course
    root, _ = batch
    r = grader.grade([str(course), "--out", "out/grades.csv", "--timeout", str(TIMEOUT)], root)
    assert r.returncode == 0 and "graded 14 notebooks of 7 students (14 unchanged" in r.stdout, r.stdout + r.stderr
    rows = _rows(root / "out" / "grades.csv")
    assert {row["notebook"] for row in rows} == {f"submitted/{s}/transformer/{e}.ipynb" for s in CLASS for e in EXERCISES}
    assert _totals(rows) == {r["student_id"]: float(r["score"]) for r in _rows(course / "grades.csv")}
