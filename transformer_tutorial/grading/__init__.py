"""The batch grader: `from transformer_tutorial.grading import grade_folder`.

Written by hand: nbdev exports `grading.submissions` (exercises and the submissions folder, chapter 15a),
`grading.references` (the reference imported or pasted, 15b), `grading.tamper` (code that tampers with the grading, 15c),
`grading.wire` (values between kernel and grader, 15d), `grading.verdict` (the verdict process, 15e), `grading.sandbox`
(limits and confinement, 15f), `grading.running` (one notebook run and graded, 15g) and `grading.gradebook` (feedback and
a whole class, 15h); this file gathers what a teacher calls under one name.
"""
from .submissions import Exercise, course_exercises, find_submissions, identify, hand_in, printable
from .references import (MIN_STATEMENTS, reference_uses, fingerprint, reference_sources, reference_fingerprints,
                     reference_code_prints, copies, honest_solutions, disguises, copy_detector_rates)
from .tamper import tampering
from .sandbox import Limits, landlock_abi, isolation
from .running import grade_submission
from .gradebook import COLUMNS, Grades, feedback_markdown, grade_folder

__all__ = ['Exercise', 'course_exercises', 'find_submissions', 'identify', 'hand_in', 'printable', 'MIN_STATEMENTS',
           'reference_uses', 'fingerprint', 'reference_sources', 'reference_fingerprints', 'reference_code_prints', 'copies',
           'honest_solutions', 'disguises', 'copy_detector_rates', 'tampering', 'Limits', 'landlock_abi', 'isolation',
           'grade_submission', 'COLUMNS', 'Grades', 'feedback_markdown', 'grade_folder']
