"""Structured control flow with lax's semantics: loops whose body is traced once (never
unrolled) and compiled as one loop, differentiable to any order.

    carry, ys = drx.lax.scan(step, init, xs)       # step(carry, x) -> (carry, y)
    out = drx.lax.fori_loop(0, 10, body, init)      # body(i, carry) -> carry

More of lax (while_loop, cond, dot_general, ...) joins in the next part of the Python layer.
"""

import numpy as np

from . import _drx
from . import tree_util
from ._api import _concrete, _flatten_args, _out_leaf, jit
from ._tracer import Error, Tracer


def _leaves_of(tree_value):
    """The C++ leaves of one pytree argument (constants inside a trace) and its structure."""
    leaf_lists, weak_lists, trees = _flatten_args((tree_value,))
    return leaf_lists[0], weak_lists[0], trees[0], _concrete(leaf_lists)


def _carry_leaf(new, old_value):
    """A new carry leaf as a Value of the trace, in the old carry's dtype when it is a Python
    number or weakly typed (as JAX promotes weak carries)."""
    value, weak = _out_leaf(new)
    if weak and value.dtype != old_value.dtype:
        value = _drx.astype(value, old_value.dtype)
    return value


def scan(f, init, xs=None, length=None, reverse=False, *, remat=False, checkpoint_every=0):
    """Runs ``f(carry, x) -> (carry, y)`` over the leading axis of xs (a pytree), as
    jax.lax.scan: returns the final carry and the ys stacked along a new leading axis. The
    carry keeps init's structure, shapes and dtypes. ``length`` is required when xs is None.
    ``remat=True`` saves only each iteration's carry for reverse mode and recomputes the rest
    (jax.checkpoint of the body); ``checkpoint_every=k`` saves one carry per k iterations."""
    init_leaves, init_weak, init_tree, init_concrete = _leaves_of(init)
    xs_leaves, xs_weak, xs_tree, xs_concrete = _leaves_of(xs)
    if init_concrete and xs_concrete:  # outside a trace: a compiled call, as JAX's eager scan
        return jit(lambda c, x: scan(f, c, x, length, reverse, remat=remat,
                                     checkpoint_every=checkpoint_every))(init, xs)
    if length is not None and not isinstance(length, (int, np.integer)):
        raise Error(f"drx.lax.scan: length must be an int, got {length!r}")
    if length is None and not xs_leaves:
        raise Error("drx.lax.scan: xs has no arrays, so length must be given")
    y_tree = []

    def body(args):
        carry_leaves, x_leaves = args
        carry = tree_util.tree_unflatten(
            init_tree, [Tracer(v, w) for v, w in zip(carry_leaves, init_weak)])
        x = tree_util.tree_unflatten(xs_tree, [Tracer(v) for v in x_leaves])
        out = f(carry, x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise Error("drx.lax.scan: the body must return a pair (carry, y), got "
                        f"{type(out).__name__}")
        new_leaves, new_tree = tree_util.tree_flatten(out[0])
        if new_tree != init_tree:
            raise Error(f"drx.lax.scan: the body's carry has structure {new_tree}, but init "
                        f"has {init_tree}")
        y_leaves, tree = tree_util.tree_flatten(out[1])
        y_tree[:] = [tree]
        return ([_carry_leaf(n, o) for n, o in zip(new_leaves, carry_leaves)]
                + [_out_leaf(y)[0] for y in y_leaves])

    carry_out, ys_out = _drx.scan(body, init_leaves, xs_leaves,
                                  -1 if length is None else int(length), bool(reverse),
                                  bool(remat), int(checkpoint_every))
    carry = tree_util.tree_unflatten(
        init_tree, [Tracer(v, w) for v, w in zip(carry_out, init_weak)])
    return carry, tree_util.tree_unflatten(y_tree[0], [Tracer(v) for v in ys_out])


def fori_loop(lower, upper, body_fun, init_val):
    """``body_fun(i, val) -> val`` for i = lower, ..., upper - 1 (i an int32 scalar), as
    jax.lax.fori_loop with concrete bounds: a scan, so it is reverse-differentiable."""
    for name, bound in (("lower", lower), ("upper", upper)):
        if isinstance(bound, Tracer) or not isinstance(bound, (int, np.integer)):
            raise Error(f"drx.lax.fori_loop: {name} must be a Python int (traced bounds need "
                        f"drx.lax.while_loop), got {bound!r}")
    leaves, weak, tree, concrete = _leaves_of(init_val)
    if concrete:
        return jit(lambda v: fori_loop(lower, upper, body_fun, v))(init_val)

    def body(args):
        i, carry_leaves = args
        val = tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(carry_leaves, weak)])
        new_leaves, new_tree = tree_util.tree_flatten(body_fun(Tracer(i), val))
        if new_tree != tree:
            raise Error(f"drx.lax.fori_loop: the body returned structure {new_tree}, but "
                        f"init_val has {tree}")
        return [_carry_leaf(n, o) for n, o in zip(new_leaves, carry_leaves)]

    out = _drx.fori_loop(int(lower), int(upper), body, leaves)
    return tree_util.tree_unflatten(tree, [Tracer(v, w) for v, w in zip(out, weak)])
