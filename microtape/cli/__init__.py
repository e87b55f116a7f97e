"""The command line: `microtape demo | check | graph | heatmap | exercises | grade | train`.

Also ``python -m microtape``.

:mod:`.main` parses the command and hands it to its module (:mod:`.check`,
:mod:`.exercises`, :mod:`.train`); :mod:`.args` holds the argument checks
they share. Nothing below this folder imports it.
"""

from .main import main

__all__ = ["main"]
