"""The engine: the autograd a student reads first.

Read it in this order:

1. :mod:`.node` — a value in a computation (:class:`Node`) and :func:`record`,
   which runs an op and appends its result to every active tape;
2. :mod:`.tape` — the :class:`Tape`, a Wengert list of equations, printable
   (the listing's names come from :mod:`.listing`);
3. :mod:`.reverse` — the reverse pass, one pure function :func:`gradients`:
   walk the equations backwards, call each op's VJP, *add* into a dict;
4. :mod:`.boundary` — the guards where user code meets the engine: the seed,
   a user op's forward and VJP, and adding into every ``.grad`` or none;
5. :mod:`.fast_scalar` — an optimisation of steps 1 and 3 for Scalars (Python
   floats): the same ops' ``forward`` and VJPs in the same order with fewer
   Python calls (``Scalar.__mul__`` records in one call; ``Scalar.backward()``
   adds straight into ``.grad``). Its reverse pass calls the public functions
   above (:func:`.tape.topological_order`, :func:`.reverse.vjp_params`, the
   guards of :mod:`.boundary`); its recorder reads the same recording state
   as :func:`.node.record` (the tapes and modules in force), which is why it
   lives here. A test holds it bit for bit to the plain pass on random
   programs (``tests/engine/test_fast_scalar.py``);
6. :mod:`.lean` — the lean tape: keep only what some VJP reads;
7. :mod:`.nonfinite` — where a NaN or inf first appeared on a tape;
8. :mod:`.protocols` — the types the annotations speak of (``Value``, ``Operation``).

The ops (:mod:`microtape.ops`) and the values (:mod:`microtape.values`) sit
above this folder and import it; nothing here imports them. Where the engine
must call up — ``Tape.backward`` calls the reverse pass — the upper module
registers itself in a slot the lower one reads (:func:`.tape.register_reverse_pass`).
"""

from .node import Node, current_tapes, module_scope, paused, record
from .reverse import Gradients, Step, backward_pass, derivative_labels, gradients
from .tape import Equation, Tape

__all__ = [
    "Node",
    "record",
    "module_scope",
    "paused",
    "current_tapes",
    "Tape",
    "Equation",
    "gradients",
    "backward_pass",
    "Gradients",
    "Step",
    "derivative_labels",
]
