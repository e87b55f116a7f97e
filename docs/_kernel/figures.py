"""A marker under each cell that made a matplotlib figure, in the kernels that build the site and test the notebooks.

``make docs`` (docs/conf.py) and ``make test`` (tests/docs/test_notebooks.py)
start their kernels with this file as an IPython startup script, never a
student's Jupyter. Every figure pyplot makes while a cell runs
(``plt.subplots``, ``plt.figure``: a figure meant to be shown) is counted;
after the cell, when it made any, a hidden ``<span class="mt-drew"
data-figures="N">`` is added to that cell's outputs. The tests then ask that
each marked cell also shows an image: a figure made and never drawn
(``plt.show()`` on a non-interactive backend) fails the build instead of
leaving a page without its picture. (A plain ``Figure`` such as
``mt.viz.memory``'s shows itself as a cell's result; one kept for its
``.table`` is not meant to be drawn; a figure pyplot made and closed unshown is counted, and fails.)
"""

from IPython import get_ipython
from IPython.display import display
from matplotlib._pylab_helpers import Gcf

_made = [0]  # figures pyplot made during the running cell
_register = Gcf._set_new_active_manager.__func__


@classmethod
def _counting_register(cls, manager):
    # Every figure pyplot makes (plt.figure, plt.subplots) is registered here, whatever the backend.
    _made[0] += 1
    return _register(cls, manager)


def _mark(result):
    if _made[0]:
        display({"text/html": f'<span class="mt-drew" data-figures="{_made[0]}" hidden></span>'}, raw=True)
    _made[0] = 0


Gcf._set_new_active_manager = _counting_register
get_ipython().events.register("post_run_cell", _mark)
