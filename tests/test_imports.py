"""What ``import microtape`` loads: the engine, the ops, the value types, numpy's names and the transforms.

The upper layers (``nn``, ``check``, ``viz``, ``exercises``, ``train``, and
``optim``, ``grading`` and ``cli`` with them) load on first use, through the package's
``__getattr__``: a student's ``import microtape`` stays fast, and drawing or
training pulls in graphviz, matplotlib or the layers only when asked for.
Every built-in op is still registered at import, the tiled attention op
included (it lives in ``ops/``, not in ``nn/``).

The check runs in a fresh interpreter: inside pytest, other tests have long
imported the whole package.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAZY_FOLDERS = ("nn", "check", "viz", "exercises", "train", "optim", "grading", "cli")
EAGER_FOLDERS = ("engine", "ops", "values", "numpy_api", "transforms")

PROBE = (
    "import json, sys, microtape; "
    "print(json.dumps({'modules': sorted(m for m in sys.modules if m.startswith('microtape')), "
    "'ops': sorted(microtape.ops.OPS)}))"
)


def _fresh_import(code=PROBE):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _folder(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_import_microtape_loads_no_upper_layer():
    loaded = _fresh_import()["modules"]
    upper = [m for m in loaded if _folder(m) in LAZY_FOLDERS]
    assert not upper, f"`import microtape` loaded modules of the lazy folders: {upper}"
    # The lower layers are there (the check above is not vacuous: the probe saw the package's modules).
    assert {_folder(m) for m in loaded} >= set(EAGER_FOLDERS)


def test_every_built_in_op_is_registered_at_import_tiled_attention_included():
    ops = _fresh_import()["ops"]
    assert "tiled_attention" in ops
    assert {"add", "mul", "exp", "tanh", "matmul", "softmax"} <= set(ops)


def test_an_upper_layer_loads_on_first_use():
    # Touching mt.nn loads it (and only then): the lazy path works, it is not just absent.
    code = (
        "import json, sys, microtape as mt; before = 'microtape.nn' in sys.modules; mt.nn.Linear; "
        "print(json.dumps({'modules': [str(before), str('microtape.nn' in sys.modules)], 'ops': []}))"
    )
    assert _fresh_import(code)["modules"] == ["False", "True"]
