"""Multi-head attention: the layer, its derivation table and hand-derived route, and tiled attention.

Read :mod:`.chain` (the forward, written once) and :mod:`.derivation` (every
step's forward, VJP and formula) first; :mod:`.layer` is
:class:`MultiHeadAttention` itself; :mod:`.analytic` and :mod:`.links` the
hand-derived backward in plain numpy; :mod:`.tiled` the tiled (flash) core.
"""
