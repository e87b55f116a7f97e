"""Exercise: the backward pass of an embedding lookup — the scatter-add of repeated tokens.

``out = table[tokens]``: each token id picks a row of the table. A token that
appears several times sends the table row several gradients, and they add up
(``np.add.at``); fancy-index assignment keeps only one of them. The tape's
answer records the lookup with ``Tensor.take`` and runs the tape backward.
"""

from typing import Any

import numpy as np

from ...engine import Tape
from ...values.tensor import Tensor
from .. import Exercise, Mistake, Output, register
from .core import variant

__all__ = ["embedding_backward"]


def embedding_backward(tokens, table, grad_out):
    r"""Backward pass of an embedding lookup: the gradient of the table.

    Forward (done for you):
        out = table[tokens]        out[b, t] = table[tokens[b, t]]

    Arguments: ``tokens`` [B, T] integer token ids (each in 0 … V−1, and
    ids repeat), ``table`` [V, D] the embedding weights, and ``grad_out`` =
    dL/dout [B, T, D].

    Return ``grad_table`` = dL/dtable, shaped like ``table``.

    The maths: ``out[b, t, :]`` is a copy of row ``tokens[b, t]``, so that row
    receives ``grad_out[b, t, :]``; a row that is looked up k times receives
    k gradients, *added up*, and a row nobody looks up receives 0. Beware:
    ``grad[tokens] = grad_out`` and even ``grad[tokens] += grad_out`` keep only
    one gradient per repeated id (numpy buffers fancy-index writes);
    ``np.add.at`` adds every one.
    """
    raise NotImplementedError("embedding_backward: return grad_table")


# One dict per trial: (B, T, V, D). The vocabulary is small next to B·T, so
# ids repeat in every trial (and some ids are never used). A hidden trial has
# 8192 tokens into an 8000 × 32 table: 256 000 weights, too many to
# differentiate numerically one at a time within the time limit.
VISIBLE = (
    {"shape": (2, 5, 4, 3)},
    {"shape": (3, 4, 6, 2)},
    {"shape": (2, 8, 3, 4)},
    {"shape": (4, 3, 5, 3)},
    {"shape": (2, 6, 9, 2)},
)
HIDDEN = (
    {"shape": (3, 5, 4, 3)},
    {"shape": (2, 7, 5, 4)},
    {"shape": (5, 2, 3, 2)},
    {"shape": (2, 9, 7, 5)},
    {"shape": (4, 4, 6, 1)},
    {"shape": (16, 512, 8000, 32), "shared": True},
)


def make_inputs(rng: np.random.Generator, case: dict[str, Any]) -> Any:
    batch, length, vocab, depth = case["shape"]
    tokens = rng.integers(0, vocab, size=(batch, length))
    tokens[:, :2] = tokens[0, 0]  # one id repeated in every sequence, whatever the draw
    return {
        "tokens": tokens,
        "table": rng.standard_normal((vocab, depth)),
        "grad_out": rng.standard_normal((batch, length, depth)),
    }


def tape_gradients(inputs: dict[str, Any]) -> Any:
    table = Tensor(inputs["table"], requires_grad=True, name="table")
    with Tape() as tape:
        out = table.take(inputs["tokens"], axis=0, name="out")
    tape.backward(out, inputs["grad_out"])
    return (table.grad,)


# ---------------------------------------------------------------- known mistakes
#
# ``_with_mistake`` is the scatter with exactly one thing wrong; it refuses
# any other name, so no call of it is the right answer.

_MISTAKES = (
    "fancy_index_assignment",
    "repeats_averaged",
    "only_first_sequence",
    "counts_instead_of_gradients",
    "multiplied_by_the_table",
    "every_row_gets_the_total",
)


def _with_mistake(mistake: Any, tokens: Any, table: Any, grad_out: Any) -> Any:
    if mistake not in _MISTAKES:
        raise ValueError(f"_with_mistake(mistake={mistake!r}): expected one of {', '.join(_MISTAKES)}")
    grad = np.zeros_like(table)
    if mistake == "fancy_index_assignment":
        grad[tokens] = grad_out  # a repeated id keeps one of its gradients
    elif mistake == "only_first_sequence":
        np.add.at(grad, tokens[0], grad_out[0])
    elif mistake == "counts_instead_of_gradients":
        np.add.at(grad, tokens, np.ones_like(grad_out))
    elif mistake == "multiplied_by_the_table":
        np.add.at(grad, tokens, grad_out * table[tokens])
    elif mistake == "every_row_gets_the_total":
        grad[:] = grad_out.sum(axis=(0, 1))
    else:
        np.add.at(grad, tokens, grad_out)
        counts = np.bincount(tokens.ravel(), minlength=table.shape[0])
        grad = grad / np.maximum(counts, 1)[:, None]
    return {"grad_table": grad}


EXERCISE = Exercise(
    name="embedding_backward",
    stub=embedding_backward,
    visible=VISIBLE,
    hidden=HIDDEN,
    make_inputs=make_inputs,
    tape_gradients=tape_gradients,
    title="Embedding lookup backward: the scatter-add of repeated tokens",
    outputs=(Output("grad_table", "table"),),
    mistakes=(
        Mistake(
            "fancy_index_assignment",
            "repeats_dropped",
            "your grad_table keeps only one gradient per repeated token: grad[tokens] = grad_out "
            "(or += : numpy buffers fancy-index writes) overwrites instead of adding. Use "
            "np.add.at(grad, tokens, grad_out), which adds every one.",
            variant(_with_mistake, "fancy_index_assignment"),
        ),
        Mistake(
            "repeats_averaged",
            "repeats_dropped",
            "your grad_table divides each row by how often its token appears. A row looked up k "
            "times is used k times: its k gradients add up, not average.",
            variant(_with_mistake, "repeats_averaged"),
        ),
        Mistake(
            "only_first_sequence",
            "skipped_step",
            "your grad_table has the gradients of the first sequence only (tokens[0]). Every "
            "sequence of the batch looked rows up: scatter all of tokens [B, T] with grad_out [B, T, D].",
            variant(_with_mistake, "only_first_sequence"),
        ),
        Mistake(
            "counts_instead_of_gradients",
            "skipped_step",
            "your grad_table counts how often each token appears: the local derivative of a copy "
            "is 1, but the chain rule multiplies it by the gradient arriving: scatter-add grad_out itself.",
            variant(_with_mistake, "counts_instead_of_gradients"),
        ),
        Mistake(
            "multiplied_by_the_table",
            "wrong_derivative",
            "your grad_table multiplies by the table's values. A lookup copies a row, it does not "
            "multiply it: d out[b, t] / d table[v] is 1 where tokens[b, t] == v, so scatter-add grad_out alone.",
            variant(_with_mistake, "multiplied_by_the_table"),
        ),
        Mistake(
            "every_row_gets_the_total",
            "wrong_axis",
            "your grad_table gives every row the sum of all of grad_out. Each gradient goes only "
            "to the row its token picked (and rows never picked get 0): np.add.at(grad, tokens, grad_out).",
            variant(_with_mistake, "every_row_gets_the_total"),
        ),
    ),
)
register(EXERCISE)
