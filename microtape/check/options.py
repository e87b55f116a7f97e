"""The options every step-by-step report takes, parsed in one place.

This module lets :func:`~microtape.check.attention_report`,
:func:`~microtape.check.layer_report`, :func:`~microtape.check.tiled_report`
and ``microtape check`` agree on what ``tolerance``, ``finite_differences``,
``seed`` and ``mistakes`` mean and on how a bad one is refused::

    options = ReportOptions.parse("layer_report", layer.dtype, tolerance=None,
                                  finite_differences=True, seed=0, mistakes="forgot_scale")
    options.tolerance, options.fd_samples, options.seed, options.mistakes
    # (1e-10, 3, 0, ('forgot_scale',))

Each bad value raises a ``ValueError`` (or ``TypeError`` for the wrong kind of
thing) naming the report, the argument and the value, before anything runs.
Which mistake names exist is each report's business: ``parse`` returns the
names as given, in order, each once.
"""

import numbers
from typing import Any, NamedTuple

from .rows import default_tolerance

__all__ = ["ReportOptions", "DEFAULT_FD_SAMPLES", "mistake_names", "call_config"]

#: Entries per row that ``finite_differences=True`` samples.
DEFAULT_FD_SAMPLES = 3


class ReportOptions(NamedTuple):
    """A report's parsed options: ``tolerance`` (float), ``fd_samples`` (0: none), ``seed`` (int), ``mistakes``."""

    tolerance: float
    fd_samples: int
    seed: int
    mistakes: tuple

    @classmethod
    def parse(
        cls,
        where: str,
        dtype: Any,
        *,
        tolerance: float | None = None,
        finite_differences: bool | int = False,
        seed: int = 0,
        mistakes: Any = None,
    ) -> Any:
        """Check every option of the report called ``where`` (for messages); gradients are of ``dtype``."""
        return cls(
            _tolerance(where, tolerance, dtype),
            _fd_samples(where, finite_differences),
            _seed(where, seed),
            mistake_names(where, mistakes),
        )


def _tolerance(where: str, tolerance: Any, dtype: Any) -> float:
    if tolerance is None:
        return default_tolerance(dtype)
    if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or not 0 < tolerance < 1:  # type: ignore[operator]  # a Real compares
        raise ValueError(f"{where}(tolerance={tolerance!r}): expected a number between 0 and 1")
    return float(tolerance)


def _fd_samples(where: str, finite_differences: Any) -> int:
    if finite_differences is False or finite_differences is None:
        return 0
    if finite_differences is True:
        return DEFAULT_FD_SAMPLES
    if isinstance(finite_differences, numbers.Integral) and finite_differences > 0:  # type: ignore[operator]  # an Integral compares
        return int(finite_differences)
    raise ValueError(
        f"{where}(finite_differences={finite_differences!r}): expected True, False or a "
        "positive number of entries to sample per row"
    )


def _seed(where: str, seed: int) -> Any:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"{where}(seed={seed!r}): expected an integer")
    return int(seed)


def mistake_names(where: str, mistakes: Any) -> Any:
    """``mistakes`` (None, a name, or names) as a tuple of strings, in order, each once."""
    if mistakes is None:
        return ()
    if isinstance(mistakes, str):
        mistakes = [mistakes]
    try:
        names = list(mistakes)
    except TypeError:
        raise TypeError(
            f"{where}(mistakes=...): expected a name or a set of names, got {type(mistakes).__name__}"
        ) from None
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{where}(mistakes=...): expected names (strings), got {name!r}")
    return tuple(dict.fromkeys(names))


def call_config(attn: Any, call: Any) -> Any:
    """What every attention report's ``config`` starts with: the kind of attention and its sizes."""
    return {
        "attention": "self" if call.self_attention else "cross",
        "batch": call.batch,
        "q_len": call.q_len,
        "k_len": call.k_len,
        "embed": attn.embed,
        "heads": attn.num_heads,
    }
