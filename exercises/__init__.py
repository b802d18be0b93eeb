"""Workshop exercises: `checkers` (one checker per exercise) and `grading` (what they share: running
a learner's kernel, comparing with a reference, reading the trace, the failure message).

The notebooks here and in solutions/ are generated from exercises/src/ by tools/make_exercises.py.
"""
