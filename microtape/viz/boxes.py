"""The pieces of a view: boxes, the links between them, and the junctions of shared parameters.

Plain records, no behaviour: :class:`microtape.viz.view.View` makes them,
the painters read them.
"""

from typing import Any

__all__ = ["Box", "Link", "Junction"]


class Box:
    """One box of a picture: what it stands for, not how it looks."""

    __slots__ = ("id", "kind", "cluster", "equations", "leaves", "copy_of", "group")

    def __init__(
        self,
        id: Any,
        kind: Any,
        cluster: Any,
        equations: Any = (),
        leaves: Any = (),
        copy_of: Any = None,
        group: Any = None,
    ) -> None:
        self.id = id
        self.kind = kind  # op, shape, input, parameter, constant, summary
        self.cluster = cluster  # module path ("" = top level)
        self.equations = list(equations)  # the equations drawn in this box
        self.leaves = list(leaves)  # the leaves drawn in this box
        self.copy_of = copy_of  # a per-use copy of a shared leaf: the id of the leaf's main box
        self.group = group  # a summary: its key (module path, or "path#k" for a stretch)

    @property
    def summarised(self) -> bool:
        """True for a box that stands for a group (a module summary, or a group of leaves)."""
        return self.group is not None


class Link:
    """An edge: from the box of an input to the box of the equation that reads it.

    ``uses`` lists the ``(equation, operand position)`` pairs it stands for
    (one, unless an end is a summary); ``constant`` is True when none of them
    carries a gradient.
    """

    __slots__ = ("tail", "head", "uses", "constant")

    def __init__(self, tail: Any, head: Any, uses: Any, constant: Any) -> None:
        self.tail, self.head, self.uses, self.constant = tail, head, uses, constant


class Junction:
    """The point where a shared parameter's line to one sibling module splits into that module's uses.

    Why not one edge per use: wired straight to every use, a weight shared by
    samples 0…N makes every sample look alike to ``dot``'s crossing
    minimisation, which then orders them at random (the invisible same-rank
    edges of :func:`microtape.viz.orders.sibling_rows` cannot order clusters: ``dot`` may swap
    them freely). Junctions are plain nodes next to the parameter (in its
    cluster), kept in one row in recorded order (module by module) above
    every module they feed (:func:`microtape.viz.orders.below_junctions`), so the modules below follow
    that order.

    ``links`` are the indices (in ``View.links``) of the uses it feeds.
    """

    __slots__ = ("id", "cluster", "tail", "module", "links")

    def __init__(self, id: Any, cluster: Any, tail: Any, module: Any, links: Any) -> None:
        self.id, self.cluster, self.tail, self.module, self.links = id, cluster, tail, module, links
