"""The batch grader: `from transformer_tutorial.grading import grade_folder`.

Written by hand: nbdev exports `grading.submissions` (exercises and the submissions folder, chapter 15a),
`grading.imports` (the reference imported, 15b), `grading.references` (the reference pasted, 15c), `grading.detector`
(the copy detector measured, 15d), `grading.tamper` (code that tampers with the grading, 15e), `grading.wire` (values
between kernel and grader, 15f), `grading.verdict` (the verdict process, 15g), `grading.sandbox` (limits and
confinement, 15h), `grading.watch` (processes, memory and disk watched, 15i), `grading.kernel` (a notebook run in a
confined kernel, 15j), `grading.running` (the verdict process's client, one notebook graded, 15k) and
`grading.gradebook` (feedback and a whole class, 15l); this file gathers what a teacher calls under one name.
"""
from .submissions import Exercise, course_exercises, find_submissions, identify, hand_in, printable
from .imports import reference_uses
from .references import MIN_STATEMENTS, fingerprint, reference_sources, reference_fingerprints, reference_code_prints, copies
from .detector import honest_solutions, disguises, copy_detector_rates
from .tamper import tampering
from .sandbox import Limits, landlock_abi, isolation
from .running import grade_submission
from .gradebook import COLUMNS, Grades, feedback_markdown, grade_folder

__all__ = ['Exercise', 'course_exercises', 'find_submissions', 'identify', 'hand_in', 'printable', 'MIN_STATEMENTS',
           'reference_uses', 'fingerprint', 'reference_sources', 'reference_fingerprints', 'reference_code_prints', 'copies',
           'honest_solutions', 'disguises', 'copy_detector_rates', 'tampering', 'Limits', 'landlock_abi', 'isolation',
           'grade_submission', 'COLUMNS', 'Grades', 'feedback_markdown', 'grade_folder']
