"""What the sandboxed child runs: never imported by the grader's own checking.

This folder goes on the child's ``sys.path`` as it is (see
:mod:`microtape.grading.box`): ``child.py`` runs a student's code and
answers the grader's calls, ``wire.py`` is the message format both sides
share (the grader imports it from here), and ``microtape/`` is the stand-in
package a submission sees — ``mt.ops.define`` records a definition, and
nothing of the engine is there to compute an answer with.
"""
