"""The hand-derived backward of the Transformer's other pieces, in plain numpy.

This module lets you compute the gradients of LayerNorm, the feed-forward
block, the embedding lookup, the cross-entropy loss and a whole post-norm
Transformer layer from the formulas alone. Like :mod:`microtape.nn.attention.analytic`
(attention's links, which it reuses) it composes the links by hand, never
through the tape, so it is an *independent* check of what the tape computes
(a primitive's own derivative — GELU's, softmax's — is the op registry's,
written once beside its forward); the layers'
``backward(g, method="analytic")`` run it.

Notation: ``dX`` is the gradient of the loss with respect to ``X``; rows are
every leading axis at once (``[B, T, E]`` is ``B·T`` rows of ``E``).

    LayerNorm   x̂ = (x − mean(x)) / σ,  σ = sqrt(var(x) + eps),  y = γ ⊙ x̂ + β   (per row)
        dβ = Σ_rows dy,   dγ = Σ_rows dy ⊙ x̂,   ĝ = dy ⊙ γ
        dx = (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)) / σ
        (three paths from x to y — directly, through the mean, through the
        variance — folded into one line; the two row means are the last two.)

    Feed-forward   z = x W₁ᵀ + b₁,  a = act(z),  ã = a ⊙ keep,  y = ã W₂ᵀ + b₂
        dW₂, db₂, dã = Linear's link;   da = dã ⊙ keep;   dz = da ⊙ act'(z)
        dW₁, db₁, dx = Linear's link
        relu'(z) = [z > 0];   gelu'(z) (tanh form): (1 + t)/2 + z/2 (1 − t²) c (1 + 3k z²)

    Residual   r = x + f(x)   (the skip and the branch both start at x)
        dx = dr + (what the branch sends back to x)

    Embedding  y = W[idx]:   dW = scatter-add of dy into the rows idx (a repeated index adds up)

    Cross-entropy  L = −mean_n log softmax(logits_n)[t_n]
        dlogits = (softmax(logits) − onehot(t)) / N    (ignored targets: a zero row, not counted in N)

A post-norm layer (PyTorch's ``norm_first=False``) is a stack of blocks
``h = norm_i(h + dropout_i(sublayer_i(h)))``; :func:`post_norm_backward`
walks it backwards with the links above, one block at a time. Every link can
be swapped through ``links=`` — the teaching mistakes of
:mod:`microtape.check.layer_mistakes` are wrong links, never copies of the
chain.
"""

from typing import Any

import numpy as np

from .. import ops
from ..ops.attention_links import dropout_backward
from .linear import linear_backward

__all__ = [
    "LINKS",
    "layernorm_backward",
    "relu_backward",
    "gelu_backward",
    "ACTIVATIONS",
    "activation_backward",
    "residual_backward",
    "feedforward_backward",
    "embedding_backward",
    "cross_entropy_backward",
    "post_norm_backward",
    "link",
]


def _row_axes(weight: Any) -> Any:
    """The axes a LayerNorm normalises over: the last ``weight.ndim`` ones."""
    return tuple(range(-weight.ndim, 0))


def layernorm_backward(grad_y: Any, normalized: Any, std: Any, weight: Any) -> Any:
    """``y = γ ⊙ x̂ + β``, ``x̂ = (x − μ)/σ``: returns ``(dx, dγ, dβ)``.

    ``normalized`` is x̂ and ``std`` is σ (kept with its normalised axes as
    size 1) from the forward. With ``ĝ = dy ⊙ γ`` (the gradient of x̂):
    ``dx = (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)) / σ``. The ``mean(ĝ)`` term is the
    path through the row mean, the ``x̂ ⊙ mean(ĝ ⊙ x̂)`` term the path
    through the variance.
    """
    axes = _row_axes(weight)
    rows = tuple(range(grad_y.ndim - weight.ndim))
    grad_weight = np.sum(grad_y * normalized, axis=rows)
    grad_bias = np.sum(grad_y, axis=rows)
    grad_normalized = grad_y * weight
    mean_grad = np.mean(grad_normalized, axis=axes, keepdims=True)
    mean_grad_normalized = np.mean(grad_normalized * normalized, axis=axes, keepdims=True)
    grad_x = (grad_normalized - mean_grad - normalized * mean_grad_normalized) / std
    return grad_x, grad_weight, grad_bias


def relu_backward(grad_hidden: Any, pre_activation: Any) -> Any:
    """``a = relu(z)``: returns ``dz = da ⊙ [z > 0]``."""
    return grad_hidden * (pre_activation > 0)


def gelu_backward(grad_hidden: Any, pre_activation: Any) -> Any:
    """``a = gelu(z)`` (tanh approximation): returns ``dz = da ⊙ gelu'(z)`` — the op's VJP, written once there."""
    (grad_pre_activation,) = ops.gelu.vjp(grad_hidden, None, pre_activation)
    return grad_pre_activation


#: The activations a feed-forward block may use, by name: their backward links.
ACTIVATIONS = {"relu": relu_backward, "gelu": gelu_backward}


def activation_backward(grad_hidden: Any, pre_activation: Any, activation: Any) -> Any:
    """The backward link of the named activation (``"relu"`` or ``"gelu"``)."""
    return ACTIVATIONS[activation](grad_hidden, pre_activation)


def residual_backward(grad_skip: Any, grad_branch: Any) -> Any:
    """``r = x + f(x)``: ``dx`` is the sum of what both paths send back to ``x``."""
    return grad_skip + grad_branch


#: The links of this module by name; a layer's ``links=`` replaces them (and
#: attention's, see :data:`microtape.ops.attention_links.LINKS`) for teaching mistakes.
LINKS = {
    "layernorm": layernorm_backward,
    "activation": activation_backward,
    "residual": residual_backward,
    "dropout": dropout_backward,
    "linear": linear_backward,
}


def link(links: Any, name: str) -> Any:
    """The link called ``name``: the replacement in ``links`` if there is one, else :data:`LINKS`'."""
    return (links or {}).get(name, LINKS[name])


def feedforward_backward(grad_output: Any, cache: Any, links: Any = None) -> Any:
    """The feed-forward block ``linear2(dropout(act(linear1(x))))``, link by link.

    ``cache`` holds ``x``, ``pre_activation`` (z), ``hidden`` (a = act(z)),
    ``keep`` (the dropout mask, or None), ``activation`` and the weights
    ``linear1.weight``, ``linear2.weight``. Returns ``{name: gradient}`` with
    ``"linear2.weight"``, ``"linear2.bias"``, ``"hidden_dropped"`` (with dropout only),
    ``"hidden"``, ``"pre_activation"``, ``"linear1.weight"``, ``"linear1.bias"`` and
    ``"x"``.
    """
    keep = cache["keep"]
    used = cache["hidden"] if keep is None else cache["hidden"] * keep
    grads = {}
    grad_used, grads["linear2.weight"], grads["linear2.bias"] = link(links, "linear")(
        grad_output, used, cache["linear2.weight"]
    )
    if keep is None:
        grads["hidden"] = grad_used
    else:
        grads["hidden_dropped"] = grad_used
        grads["hidden"] = link(links, "dropout")(grad_used, keep)
    grads["pre_activation"] = link(links, "activation")(grads["hidden"], cache["pre_activation"], cache["activation"])
    grads["x"], grads["linear1.weight"], grads["linear1.bias"] = link(links, "linear")(
        grads["pre_activation"], cache["x"], cache["linear1.weight"]
    )
    return grads


def embedding_backward(grad_output: Any, indices: Any, num_embeddings: Any) -> Any:
    """``y = W[indices]``: returns ``dW`` ``[num_embeddings, dim]`` (a scatter-add of ``dy``)."""
    dim = grad_output.shape[-1]
    grad_weight = np.zeros((num_embeddings, dim), dtype=grad_output.dtype)
    # np.add.at, not grad_weight[indices] += ...: a token used twice must add both gradients.
    np.add.at(grad_weight, np.ravel(indices), grad_output.reshape(-1, dim))
    return grad_weight


def cross_entropy_backward(logits: Any, targets: Any, ignore_index: Any = None) -> Any:
    """``L = −mean log softmax(logits)[target]``: returns ``dlogits = (softmax − onehot) / N``.

    ``N`` counts the targets that are not ``ignore_index``; ignored positions
    get a zero row.
    """
    probabilities = ops.softmax.forward(logits, axis=-1)  # the stable softmax, written once (the op's)
    counted = np.ones(targets.shape, dtype=bool) if ignore_index is None else targets != ignore_index
    onehot = np.zeros_like(probabilities)
    np.put_along_axis(onehot, np.where(counted, targets, 0)[..., None], 1.0, axis=-1)
    return (probabilities - onehot) * counted[..., None] / counted.sum()


def post_norm_backward(grad_output: Any, blocks: Any, links: Any = None) -> Any:
    """Walk a post-norm stack backwards: ``h_i = norm_i(h_{i-1} + dropout_i(sublayer_i(h_{i-1})))``.

    ``blocks`` lists, in forward order, one dict per block: ``"norm"`` (the
    norm's name, e.g. ``"norm2"``), ``"residual"`` (the name of the sum it
    normalises, ``"residual2"``), ``"sublayer"`` (its name, ``"ff"``),
    ``"input"`` (the name of the block's input, ``"norm1"`` or ``"x"``),
    ``"normalized"``, ``"std"``, ``"weight"`` (the norm's cache), ``"keep"``
    (the residual dropout mask, or None) and ``"backward"``: a function
    ``(gradient of the sublayer's output, its links)`` returning ``(its
    gradients by name, the gradient it sends back to the block's input)``.
    ``links`` maps a block's norm, residual or sublayer name to replacement
    links for that part only (``{"norm1": {"layernorm": wrong}}``).

    Returns ``{name: gradient}``: each residual sum, each norm's ``weight``
    and ``bias``, each sublayer's output (and ``<sublayer>_dropped`` with
    dropout), whatever the sublayers' ``backward`` returned, and the input of
    every block — for the second block that is the first norm's output, the
    sum of what its skip and its sublayer send back.
    """
    links = links or {}
    grads = {}
    grad = grad_output
    for block in reversed(blocks):
        norm, residual, sublayer = block["norm"], block["residual"], block["sublayer"]
        grads[residual], grads[f"{norm}.weight"], grads[f"{norm}.bias"] = link(links.get(norm), "layernorm")(
            grad, block["normalized"], block["std"], block["weight"]
        )
        grad_branch = grads[residual]
        if block["keep"] is not None:
            grads[f"{sublayer}_dropped"] = grad_branch
            grad_branch = link(links.get(residual), "dropout")(grad_branch, block["keep"])
        grads[sublayer] = grad_branch
        sublayer_grads, grad_branch_input = block["backward"](grad_branch, links.get(sublayer))
        grads.update(sublayer_grads)
        grad = link(links.get(residual), "residual")(grads[residual], grad_branch_input)
        grads[block["input"]] = grad
    return grads
