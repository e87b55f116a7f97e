"""A red-team file: every answer differentiates the forward numerically — no derivation anywhere.

The complex step (exact to float64) on the forward alone, perturbing at once all
the entries that never meet in one output (a colouring): the entries of a row
for row-wise maps, a weight's input column for a linear map, every entry of an
elementwise map. One forward per colour. Used by tests/grading/test_grading_round3.py:
it earns only the elementwise maps' points (about a ninth of the lab's) and is flagged.
"""

import numpy as np

H = 1e-30


def _vjp(forward, args, which, grad_out, pairs):
    """g · J for args[which], one complex-step forward per colour; ``pairs``: (input axis, output axis) kept apart."""
    x = np.asarray(args[which], dtype=np.float64)
    paired = sorted(pairs)
    in_axes = [a for a, _ in paired]
    out_axes = [o for _, o in paired]
    free = [axis for axis in range(x.ndim) if axis not in in_axes]
    grad = np.zeros(x.shape)
    for colour in np.ndindex(*[x.shape[axis] for axis in free]):
        index = [slice(None)] * x.ndim
        for axis, i in zip(free, colour):
            index[axis] = i
        direction = np.zeros(x.shape)
        direction[tuple(index)] = 1.0
        moved = list(args)
        moved[which] = x + H * 1j * direction
        change = np.imag(forward(*moved)) / H
        weighted = grad_out * change
        summed = weighted.sum(axis=tuple(axis for axis in range(weighted.ndim) if axis not in out_axes))
        order = sorted(out_axes)
        grad[tuple(index)] = summed.transpose([order.index(o) for o in out_axes]) if out_axes else summed
    return grad


def _softmax(s):
    e = np.exp(s - np.max(s.real, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_backward(p, grad_p):
    s = np.log(p)
    rows = [(axis, axis) for axis in range(p.ndim - 1)]
    return _vjp(_softmax, [s], 0, grad_p, rows)


def linear_backward(x, weight, grad_y):
    forward = lambda x, w: x @ w.T  # noqa: E731
    grad_x = _vjp(forward, [x, weight], 0, grad_y, [(0, 0)])
    grad_w = _vjp(forward, [x, weight], 1, grad_y, [(0, 1)])
    grad_b = _vjp(lambda b: np.zeros(grad_y.shape) + b, [np.zeros(weight.shape[0])], 0, grad_y, [(0, 1)])
    return grad_x, grad_w, grad_b


def tanh_layer_backward(x, weight, bias, grad_h):
    forward = lambda x, w, b: np.tanh(x @ w.T + b)  # noqa: E731
    args = [x, weight, bias]
    grad_x = _vjp(forward, args, 0, grad_h, [(0, 0)])
    grad_w = _vjp(forward, args, 1, grad_h, [(0, 1)])
    grad_b = _vjp(forward, args, 2, grad_h, [(0, 1)])
    grad_z = _vjp(lambda z: np.tanh(z), [x @ weight.T + bias], 0, grad_h, [(0, 0), (1, 1)])
    return {"z": grad_z, "x": grad_x, "weight": grad_w, "bias": grad_b}


def affine_relu_backward(x, w, b, grad_out):
    relu = lambda z: z * (z.real > 0)  # noqa: E731
    forward = lambda x, w, b: relu(x @ w + b)  # noqa: E731
    args = [x, w, b]
    everything = [(0, 0), (1, 1)]
    return {"grad_z": _vjp(relu, [x @ w + b], 0, grad_out, everything),
            "grad_x": _vjp(forward, args, 0, grad_out, [(0, 0)]), "grad_w": _vjp(forward, args, 1, grad_out, [(1, 1)]),
            "grad_b": _vjp(forward, args, 2, grad_out, [(0, 1)])}  # fmt: skip


def mlp_backward(x, w1, b1, w2, grad_y):
    # each step is the loss's forward written from that intermediate on
    forward = lambda x, w1, b1, w2, b2: np.tanh(x @ w1.T + b1) @ w2.T + b2  # noqa: E731
    from_h = lambda h: h @ w2.T  # noqa: E731
    from_z = lambda z: np.tanh(z) @ w2.T  # noqa: E731
    z = x @ w1.T + b1
    args = [x, w1, b1, w2, np.zeros(w2.shape[0])]
    return {"grad_w2": _vjp(forward, args, 3, grad_y, [(0, 1)]), "grad_b2": _vjp(forward, args, 4, grad_y, [(0, 1)]),
            "grad_h": _vjp(from_h, [np.tanh(z)], 0, grad_y, [(0, 0)]), "grad_z": _vjp(from_z, [z], 0, grad_y, [(0, 0)]),
            "grad_x": _vjp(forward, args, 0, grad_y, [(0, 0)]), "grad_w1": _vjp(forward, args, 1, grad_y, []),
            "grad_b1": _vjp(forward, args, 2, grad_y, [])}  # fmt: skip


def dropout_backward(grad_y, mask, p):
    everything = [(axis, axis) for axis in range(grad_y.ndim)]
    return _vjp(lambda x: x * mask / (1 - p), [np.zeros(grad_y.shape)], 0, grad_y, everything)


def layernorm_backward(x, gamma, grad_y, eps):
    def forward(x, gamma, beta):
        centred = x - x.mean(axis=-1, keepdims=True)
        return gamma * centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps) + beta

    args = [x, gamma, np.zeros(gamma.shape)]
    return (_vjp(forward, args, 0, grad_y, [(0, 0)]), _vjp(forward, args, 1, grad_y, [(0, 1)]),
            _vjp(forward, args, 2, grad_y, [(0, 1)]))  # fmt: skip


def mse_backward(pred, target):
    everything = [(axis, axis) for axis in range(pred.ndim)]
    terms = lambda pred, target: (pred - target) ** 2 / pred.size  # noqa: E731
    ones = np.ones(pred.shape)
    return _vjp(terms, [pred, target], 0, ones, everything), _vjp(terms, [pred, target], 1, ones, everything)


def logistic_loss_backward(logits, y):
    terms = lambda z: (np.log(1 + np.exp(-np.abs(z.real)) + 0j) + np.maximum(z.real, 0)  # noqa: E731
                       + (z - z.real) * (1 / (1 + np.exp(-z.real))) - y * z) / z.shape[0]  # fmt: skip
    everything = [(axis, axis) for axis in range(logits.ndim)]
    return _vjp(terms, [logits], 0, np.ones(logits.shape), everything)


def softmax_cross_entropy_backward(logits, y):
    rows = np.arange(logits.shape[0])
    from_log_p = lambda log_p: -log_p[rows, y] / log_p.shape[0]  # noqa: E731
    from_p = lambda p: from_log_p(np.log(p))  # noqa: E731

    def from_logits(s):
        shifted = s - np.max(s.real, axis=-1, keepdims=True)
        return from_log_p(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))

    p = _softmax(logits)
    ones = np.ones(logits.shape[0])
    return {"grad_log_p": _vjp(from_log_p, [np.log(p)], 0, ones, [(0, 0)]),
            "grad_p": _vjp(from_p, [p], 0, ones, [(0, 0)]),
            "grad_logits": _vjp(from_logits, [logits], 0, ones, [(0, 0)])}  # fmt: skip


def logsumexp_vjp(g, ans, x):
    forward = lambda x: np.log(np.exp(x - x.real.max(axis=-1, keepdims=True)).sum(axis=-1)) + x.real.max(axis=-1)  # noqa: E731
    return (_vjp(forward, [x], 0, g, [(axis, axis) for axis in range(x.ndim - 1)]),)


def logaddexp_vjp(g, ans, a, b):
    def forward(a, b):
        top = np.maximum(a.real, b.real)
        return top + np.log(np.exp(a - top) + np.exp(b - top))

    b_full = np.broadcast_to(b, a.shape)
    everything = [(axis, axis) for axis in range(a.ndim)]
    grad_a = _vjp(forward, [a, b_full], 0, g, everything)
    grad_b = _vjp(forward, [a, b_full], 1, g, everything)
    return grad_a, grad_b.sum(axis=tuple(range(grad_b.ndim - np.ndim(b))))


def masked_softmax_backward(s, mask, grad_p):
    rows = [(axis, axis) for axis in range(s.ndim - 1)]
    return _vjp(lambda s: _softmax(s + mask), [s], 0, grad_p, rows)


def softmax_jvp(s, ds):
    # forward mode is one complex step: J ds = Im(softmax(s + i h ds)) / h
    return np.imag(_softmax(s + H * 1j * ds)) / H


def logsumexp_hvp(x, v):
    # the gradient of logsumexp is the softmax: H v is its JVP, one complex step
    return np.imag(_softmax(x + H * 1j * v)) / H


def embedding_backward(tokens, table, grad_out):
    return _vjp(lambda table: table[tokens], [table], 0, grad_out, [(1, 2)])


def scalar_chain_rule(a, b, c, g):
    # every copy of the expression is independent: one complex step per node gives all its entries
    def loss_from(node, values):
        e = values.get("e", values["a"] * values["b"])
        d = values.get("d", e + values["c"])
        f = values.get("f", np.tanh(d))
        return f * values["g"]

    leaves = {"a": a, "b": b, "c": c, "g": g}
    e = a * b
    d = e + c
    points = {**leaves, "e": e, "d": d, "f": np.tanh(d)}
    grads = {}
    for node in ("a", "b", "c", "e", "d", "f", "g"):
        known = {key: value for key, value in points.items() if key in leaves or key == node}
        if node in ("a", "b", "c"):
            known = dict(leaves)
        everything = [(0, 0)]
        grads[f"grad_{node}"] = _vjp(
            lambda x, node=node, known=known: loss_from(node, {**known, node: x}),
            [points[node]], 0, np.ones(a.shape), everything)  # fmt: skip
    return grads
