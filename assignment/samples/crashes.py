# A sample submission whose code crashes: exit() at the top of a cell, exceptions,
# sys.exit() and KeyboardInterrupt inside functions. One exercise is right, to show
# that a crash costs only its own exercise.
# Each "# %% NAME" section is the answer cell of exercise NAME in the student notebook.

# %% softmax_backward
import sys

sys.exit("I give up")  # stops this cell: softmax_backward is never defined


def softmax_backward(p, grad_p):
    return p * (grad_p - (grad_p * p).sum(axis=-1, keepdims=True))


# %% linear_backward
def linear_backward(x, weight, grad_y):
    return grad_y @ weight, grad_y.T @ x, grad_y.sum(axis=0)


# %% tanh_layer_backward
def tanh_layer_backward(x, weight, bias, grad_h):
    raise ValueError("not sure what to return")


# %% attention_backward
def attention_backward(q, k, v, grad_c):
    sys.exit(0)


# %% masked_softmax_backward
def masked_softmax_backward(s, mask, grad_p):
    raise KeyboardInterrupt


# %% dropout_backward
def dropout_backward(grad_y, mask, p):
    return grad_y / 0 * mask


# %% logsumexp_vjp
def logsumexp_vjp(g, ans, x):
    return g * np.exp(x - ans)  # g lost its axis: numpy cannot broadcast [N] with [N, T]


# %% logaddexp_vjp
def logaddexp_vjp(g, ans, a, b):
    return g * np.exp(a - ans), (g * np.exp(b - ans)).sum(axis=2)  # no axis 2
