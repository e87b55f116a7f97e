"""Make the repository's top-level folders importable from the tests.

The reference solutions live in ``instructor/`` (deliberately outside the
``microtape`` package, so they are not installed for students); the tests
import them as ``instructor.solutions`` from the repository's root.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
