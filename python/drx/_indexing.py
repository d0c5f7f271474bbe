"""NumPy-style indexing of traced arrays, and JAX's ``x.at[index].set(v)`` / ``.add(v)``.

Basic indices (integers, slices with any step, None, Ellipsis) select with slice, reshape
and, for steps other than 1, take; one integer array (a list, a NumPy array or a traced
integer array) selects along its axis with take, as ``jnp.take`` does. ``.at`` updates the
selected elements with scatter (set) or scatter_add (add), so updates are differentiable.
"""

import numpy as np

from . import _drx
from ._tracer import Error, Tracer, as_value, is_python_scalar


def _is_int_array(i):
    if isinstance(i, Tracer):
        return i.dtype.kind in "iu"
    if isinstance(i, (list, np.ndarray)):
        return np.asarray(i).dtype.kind in "iu" and np.asarray(i).ndim >= 1
    return False


def _normalise(index, ndim):
    """index as a tuple of per-axis entries, Ellipsis expanded (None adds an axis)."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for an array of {ndim} dimensions: {used}")
    out = []
    for i in index:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(i)
    if not any(i is Ellipsis for i in index):
        out.extend([slice(None)] * (ndim - used))
    return out


def _int_index(i, size, axis):
    i = int(i)
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
    return i + size if i < 0 else i


def getitem(x, index):
    entries = _normalise(index, x.ndim)
    if sum(_is_int_array(i) for i in entries) > 1:
        raise Error("indexing a traced array: one integer-array index at most is supported "
                    "(use drx.numpy.take along each axis)")
    value, axis, weak = x._value, 0, x._weak
    for entry in entries:
        shape = value.shape
        if entry is None:
            value = _drx.expand_dims(value, axis)
            axis += 1
        elif isinstance(entry, slice):
            start, stop, step = entry.indices(shape[axis])
            if step == 1:
                starts = [0] * len(shape)
                stops = list(shape)
                starts[axis], stops[axis] = start, max(start, stop)
                value = _drx.slice(value, starts, stops)
            else:
                picked = np.arange(start, stop, step, dtype=np.int32)
                value = _drx.take(value, _drx.constant(_drx.asarray(picked)), axis)
            axis += 1
        elif _is_int_array(entry):
            idx = entry._value if isinstance(entry, Tracer) else as_value(np.asarray(entry))
            value = _drx.take(value, idx, axis)
            axis += idx.ndim
        elif is_python_scalar(entry) or isinstance(entry, np.integer):
            if isinstance(entry, (bool, np.bool_)):
                raise IndexError("boolean indices are not supported by drx")
            i = _int_index(entry, shape[axis], axis)
            starts = [0] * len(shape)
            stops = list(shape)
            starts[axis], stops[axis] = i, i + 1
            value = _drx.squeeze(_drx.slice(value, starts, stops), axis)
        elif isinstance(entry, Tracer):
            if entry.ndim != 0 or entry.dtype.kind not in "iu":
                raise IndexError("a traced index must be an integer scalar or integer array")
            value = _drx.squeeze(_drx.take(value, _drx.reshape(entry._value, [1]), axis), axis)
        else:
            raise IndexError(f"unsupported index {entry!r}: integers, slices, None, "
                             "Ellipsis and integer arrays are supported")
    return Tracer(value, weak)


class _IndexUpdate:
    def __init__(self, x, index):
        self._x, self._index = x, index

    def _indices(self):
        """The selected positions along axis 0, as an integer Value."""
        x, index = self._x, self._index
        if isinstance(index, tuple):
            if len(index) != 1:
                raise Error("x.at[...]: updates index the first axis (one index) in this version")
            index = index[0]
        n = x.shape[0]
        if isinstance(index, slice):
            picked = np.arange(*index.indices(n), dtype=np.int32)
        elif isinstance(index, Tracer):
            return index._value if index.ndim else _drx.reshape(index._value, [1])
        elif _is_int_array(index):
            picked = np.asarray(index)
        else:
            picked = np.asarray([_int_index(index, n, 0)], dtype=np.int32)
        return _drx.constant(_drx.asarray(picked))

    def _updates(self, v, indices):
        """v broadcast to the selected elements' shape, in x's dtype (NumPy's rules)."""
        x = self._x
        u = as_value(v)
        if u.dtype != x._value.dtype:
            u = _drx.astype(u, x._value.dtype)
        return _drx.broadcast_to(u, list(indices.shape) + list(x.shape[1:]))

    def get(self):
        return self._x[self._index]

    def set(self, v):
        indices = self._indices()
        return Tracer(_drx.scatter(self._x._value, indices, self._updates(v, indices)),
                      self._x._weak)

    def add(self, v):
        indices = self._indices()
        return Tracer(
            _drx.scatter_add(self._x._value, indices, self._updates(v, indices)),
            self._x._weak)


class IndexUpdateHelper:
    def __init__(self, x):
        self._x = x

    def __getitem__(self, index):
        return _IndexUpdate(self._x, index)
