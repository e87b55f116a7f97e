"""Write ``tests/golden/second_order.npz``: second derivatives and JVPs by PyTorch (float64).

Run from the repository root with torch installed (``make test-torch`` installs it)::

    .venv/bin/python tests/golden/make_golden_second_order.py

The cases (and how microtape computes the same numbers) are in
``second_order_cases.py``; ``tests/transforms/test_second_order_torch_live.py`` checks
that this file is what torch computes now.
"""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from golden.second_order_cases import CASES, SECOND_ORDER_FILE, make_arrays, pack, run_torch  # noqa: E402


def main():
    results = {case.name: run_torch(torch, case, make_arrays(case)) for case in CASES}
    np.savez_compressed(SECOND_ORDER_FILE, **pack(results))
    print(f"wrote {SECOND_ORDER_FILE} ({len(results)} cases)")


if __name__ == "__main__":
    main()
