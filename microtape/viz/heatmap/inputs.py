"""What a heatmap shows: the maps read from a layer or an array, and the arguments that pick them, checked.

:func:`read_maps` turns ``attention_heatmaps``'s arguments into one
:class:`Maps` — the arrays ``[B, H, Tq, Tk]`` of each kind of map, the batch
entry and heads to draw, the tokens, and which cells are masked or dropped —
or raises a ``ValueError``/``TypeError`` naming the argument.
"""

import numbers
from typing import Any

import numpy as np

from ...nn.masks import SUPPRESSED_BELOW

__all__ = [
    "Maps",
    "read_maps",
    "is_layer",
    "array_for",
    "masked_cells",
    "dropped_cells",
    "WHICH",
    "GRADIENTS",
    "MASKED_AT",
]

MASKED_AT = SUPPRESSED_BELOW  # an additive mask value at or below this hides the cell
WHICH = ("weights", "dropped", "grad_scores", "grad_weights")
GRADIENTS = ("grad_scores", "grad_weights")


class Maps:
    """The maps of one figure, checked: ``whiches`` and their ``arrays``, and what to draw of them.

    ``shape`` is ``(B, H, Tq, Tk)``; ``batch`` the entry drawn, ``heads`` the
    heads drawn (a list); ``masked`` and ``dropped`` are boolean ``[H, Tq, Tk]``
    for that entry.
    """

    def __init__(
        self,
        whiches: Any,
        arrays: Any,
        batch: int,
        heads: int,
        query_labels: Any,
        key_labels: Any,
        masked: Any,
        dropped: Any,
    ) -> None:
        self.whiches, self.arrays = whiches, arrays
        self.shape = arrays[0].shape
        self.batch, self.heads = batch, heads
        self.query_labels, self.key_labels = query_labels, key_labels
        self.masked, self.dropped = masked, dropped


def read_maps(source: Any, which: Any, batch: int, heads: Any, tokens: Any, key_tokens: Any, mask: Any) -> "Maps":
    """The :class:`Maps` that ``attention_heatmaps(source, which=..., ...)`` draws."""
    whiches = (which,) if isinstance(which, str) else tuple(which)
    if not whiches or any(w not in WHICH for w in whiches):
        raise ValueError(f"attention_heatmaps(which=...): expected one of {', '.join(WHICH)}, got {which!r}")
    layer = is_layer(source)
    if not layer and len(whiches) > 1:
        raise ValueError("attention_heatmaps: several `which` need a layer; an array is just one kind of map")
    arrays = [array_for(source, w, layer) for w in whiches]
    shape = arrays[0].shape
    for w, a in zip(whiches, arrays, strict=True):
        if a.shape != shape:
            raise ValueError(f"attention_heatmaps: {w} has shape {a.shape}, expected {shape}")
    B, H, Tq, Tk = shape
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or not -B <= batch < B:
        raise ValueError(f"attention_heatmaps(batch={batch!r}): expected an integer in 0..{B - 1}")
    head_list = _heads(heads, H)
    query_labels = _labels(tokens, Tq, "tokens")
    key_labels = _labels(key_tokens, Tk, "key_tokens") if key_tokens is not None else None
    if key_labels is None:
        if tokens is not None and Tk != Tq:
            raise ValueError(f"attention_heatmaps: {Tq} query tokens but {Tk} keys; pass key_tokens=... for the keys")
        key_labels = _labels(tokens, Tk, "tokens")
    masked = masked_cells(source, mask, layer, shape)[batch]  # [H, Tq, Tk] bool
    dropped = dropped_cells(source, layer, shape)[batch]  # [H, Tq, Tk] bool
    return Maps(whiches, arrays, batch, head_list, query_labels, key_labels, masked, dropped)


def is_layer(source: Any) -> Any:
    return hasattr(source, "attention_weights")


def _as_bhqk(array: Any, what: str) -> Any:
    raw = np.asarray(getattr(array, "data", array))
    if raw.dtype.kind not in "fiu":
        raise TypeError(
            f"attention_heatmaps: {what} must hold real numbers, got dtype {raw.dtype}"
            + (" (the imaginary part would be dropped)" if raw.dtype.kind == "c" else "")
        )
    array = raw.astype(np.float64)
    if array.ndim == 2:
        array = array[None, None]
    elif array.ndim == 3:
        array = array[None]
    if array.ndim != 4:
        raise ValueError(
            f"attention_heatmaps: {what} must have shape [B, H, Tq, Tk], [H, Tq, Tk] or [Tq, Tk], got {array.shape}"
        )
    return array


def array_for(source: Any, which: Any, is_layer: Any) -> Any:
    if not is_layer:
        if source is None or isinstance(source, (str, bytes, dict)):
            raise TypeError(
                "attention_heatmaps: expected a MultiHeadAttention or an array [B, H, Tq, Tk], "
                f"got {type(source).__name__}"
            )
        return _as_bhqk(source, "the array")
    weights = source.attention_weights
    if weights is None:
        raise ValueError("attention_heatmaps: the layer has no attention weights yet; run a forward pass first")
    weights = _as_bhqk(weights, "attention_weights")
    if which == "weights":
        return weights
    if which == "dropped":
        if getattr(source, "dropout_keep", True) is None:
            # Without dropout the "weights after dropout" are the weights: a picture of them would
            # suggest that something was dropped.
            raise ValueError(
                "attention_heatmaps(which='dropped'): the last forward ran without dropout "
                f"(dropout={getattr(source, 'dropout', 0.0)}, training={getattr(source, 'training', None)}), "
                "so nothing was dropped; run a forward in training mode with dropout > 0, or use which='weights'"
            )
        dropped = getattr(source, "dropped_attention_weights", None)
        if dropped is None:
            dropped = _tape_value(source, "dropped_weights", grad=False)
        if dropped is None:
            raise ValueError(
                "attention_heatmaps(which='dropped'): the layer keeps no post-dropout weights "
                "(dropout=0 or eval mode?); use which='weights'"
            )
        return np.asarray(dropped, dtype=np.float64).reshape(weights.shape)
    method = getattr(source, which, None)  # grad_scores() / grad_weights()
    grad = None
    if callable(method):
        try:
            grad = method()
        except RuntimeError:  # the layer's way of saying "no backward yet"
            grad = None
    if grad is None:
        # Read it off the tape: dP is the gradient of "weights", dS that of
        # the softmax's input.
        grad = _tape_value(source, "weights", grad=True, softmax_input=which == "grad_scores")
    if grad is None:
        raise ValueError(f"attention_heatmaps(which={which!r}): no gradient yet; run attn.backward(grad_output) first")
    return np.asarray(grad, dtype=np.float64).reshape(weights.shape)


def _tape_value(layer: Any, name: str, grad: Any, softmax_input: bool = False) -> Any:
    tape = getattr(layer, "tape", None)
    if tape is None:
        return None
    try:
        node = tape.find(name).output
    except (KeyError, AttributeError):
        return None
    if softmax_input:
        node = node.inputs[0] if node.inputs else None
        if node is None:
            return None
    return node.grad if grad else node.data


def masked_cells(source: Any, mask: Any, is_layer: Any, shape: Any) -> Any:
    """Boolean [B, H, Tq, Tk]: True where the additive mask hides the cell."""
    if mask is False or mask is None:
        return np.zeros(shape, dtype=bool)
    if mask is True:
        mask = getattr(source, "last_mask", None) if is_layer else None
        if mask is None:
            return np.zeros(shape, dtype=bool)
    mask = np.asarray(getattr(mask, "data", mask))
    if mask.dtype == bool:
        raise TypeError(
            "attention_heatmaps(mask=...): a boolean mask is ambiguous; pass the additive float mask "
            "(0 = allowed, -1e9 or -inf = hidden), e.g. microtape.nn.masks.from_bool(allowed)"
        )
    if not np.issubdtype(mask.dtype, np.number):
        raise TypeError(f"attention_heatmaps(mask=...): expected a float array, got dtype {mask.dtype}")
    try:
        hidden = np.broadcast_to(mask <= MASKED_AT, shape)
    except ValueError:
        raise ValueError(
            f"attention_heatmaps(mask=...): mask of shape {mask.shape} does not fit maps of shape "
            f"{shape[-2:]} (expected [Tq, Tk])"
        ) from None
    return hidden | np.broadcast_to(np.isneginf(mask), shape)


def dropped_cells(source: Any, is_layer: Any, shape: Any) -> Any:
    """Boolean [B, H, Tq, Tk]: True where the layer's last dropout zeroed the weight."""
    keep = getattr(source, "dropout_keep", None) if is_layer else None
    if keep is None or np.size(keep) != np.prod(shape):
        return np.zeros(shape, dtype=bool)
    return np.asarray(keep).reshape(shape) == 0


def _heads(heads: Any, H: int) -> Any:
    if heads is None:
        return list(range(H))
    items = [heads] if isinstance(heads, numbers.Integral) and not isinstance(heads, bool) else heads
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"attention_heatmaps(heads=...): expected an int or a list of ints, got {heads!r}") from None
    if not items:
        raise ValueError("attention_heatmaps(heads=...): the list of heads is empty")
    for h in items:
        if isinstance(h, bool) or not isinstance(h, numbers.Integral) or not 0 <= h < H:  # type: ignore[operator]  # an Integral compares
            raise ValueError(f"attention_heatmaps(heads=...): head {h!r} is not in 0..{H - 1}")
    return [int(h) for h in items]


def _labels(tokens: Any, n: Any, what: str) -> Any:
    if tokens is None:
        return [str(i) for i in range(n)]
    if isinstance(tokens, str):
        raise TypeError(f"attention_heatmaps({what}=...): expected a list of labels, not one string")
    labels = [str(t) for t in tokens]
    if len(labels) != n:
        raise ValueError(f"attention_heatmaps({what}=...): {len(labels)} labels for {n} positions")
    return labels
