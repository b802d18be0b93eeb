"""Workshop exercises: `checks` (one checker per exercise) and `checking` (their machinery).

The notebooks here and in solutions/ are generated from exercises/src/ by tools/make_exercises.py.
"""
