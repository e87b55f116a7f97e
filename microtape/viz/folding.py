"""What folds into one box: shape chains, a Linear's ``W.T`` into its leaf, repeated constants.

Reshapes and transposes only move numbers, so ``detail="auto"`` draws a chain
of them as one box (see :mod:`microtape.viz.view`).
"""

from typing import Any

import numpy as np

__all__ = ["SHAPE_OPS", "merge_shape_chains", "fold_into_leaves", "repeated_constant", "one_number"]

SHAPE_OPS = frozenset({"reshape", "transpose"})  # ops that only move numbers


def merge_shape_chains(program: Any, clusters: Any) -> Any:
    """``rep[i]``: the equation whose box shows equation ``i`` (a shape chain's last link)."""
    equations = program.equations
    outputs = set(program.outputs)
    rep = list(range(len(equations)))
    for i, node in enumerate(equations):
        users = program.consumers[i]
        if node.op.name not in SHAPE_OPS or node.name or node in outputs or len(users) != 1:
            continue
        if equations[users[0]].op.name in SHAPE_OPS and clusters[users[0]] == clusters[i]:
            rep[i] = users[0]
    for i in range(len(rep) - 1, -1, -1):  # resolve chains: a later link may be merged further
        if rep[i] != i:
            rep[i] = rep[rep[i]]
    return rep


def fold_into_leaves(program: Any, rep: Any) -> Any:
    """``{equation: leaf}`` for shape chains that start at a leaf used nowhere else (a Linear's ``W.T``)."""
    equations = program.equations
    chains: dict[Any, Any] = {}
    for i, r in enumerate(rep):
        if equations[r].op.name in SHAPE_OPS:
            chains.setdefault(r, []).append(i)
    folded = {}
    outputs = set(program.outputs)
    for r, members in chains.items():
        if equations[r] in outputs:
            continue
        j = program.leaf_index.get(equations[members[0]].inputs[0])
        if j is not None and len(program.uses[j]) == 1:
            folded.update(dict.fromkeys(members, j))
    return folded


def repeated_constant(leaf: Any, kind: Any) -> Any:
    """An unnamed one-number constant (the ``2`` in ``2 * a``): such constants may share a box."""
    return kind == "constant" and not leaf.name and (leaf.data.__class__ is float or np.size(leaf.data) == 1)


def one_number(leaf: Any) -> Any:
    """The one number a one-number leaf holds (a Scalar's float as it is: no array made for it)."""
    data = leaf.data
    return data if data.__class__ is float else float(np.reshape(data, -1)[0])
