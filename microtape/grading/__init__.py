"""The grader: the box a submission runs in, the wire to it, and the gradebook.

:mod:`.box` starts a boxed child (bubblewrap, limits); :mod:`.boxed` is what
runs inside it (never imported by the grader); :mod:`.remote` turns the
child's functions into callables the checker grades; :mod:`.gradebook` is
``microtape grade``. It sits one layer above :mod:`microtape.exercises` (the
framework and the course, which never import it) and below :mod:`microtape.cli`.
"""
