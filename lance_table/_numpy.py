"""numpy helpers that are faster than numpy's own for the arrays this package hands them.

numpy 2's :func:`numpy.unique` of an integer array (without ``return_index`` and the like) goes
through a hash table and sorts its result afterwards: on a few thousand values it took 270 us
where sorting and dropping repeats took 35 us (6x faster on a million); a small append's writer
calls it on every string page.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sorted_unique"]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, sorted: what ``np.unique(values)`` returns.

    Integer and boolean arrays are sorted and their repeats dropped; other dtypes (floats, whose
    NaNs ``np.unique`` folds into one, objects) go to :func:`numpy.unique` as they are.
    """
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iub":
        return np.unique(values)
    out = np.sort(values)
    if out.size < 2:
        return out
    keep = np.empty(out.size, bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]
