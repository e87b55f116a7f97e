"""`python -m microtape` is the same as the `microtape` command."""

from .cli import main

raise SystemExit(main())
