"""For teachers: the reference solutions of the exercises (never part of the installed package).

``pyproject.toml`` packages only ``microtape*``, so this folder is not in the
wheel a student installs; ``tests/exercises/test_solutions_not_shipped.py`` checks that.
"""
