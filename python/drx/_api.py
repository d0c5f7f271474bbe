"""drx's transformations and DrJAX's placements for Python functions.

A Python function crosses into drx's C++ core flattened: each positional argument (a pytree)
becomes the list of its leaves, and the result the list of its leaves, while the tree
structures stay here and are rebuilt around every call. Leaves are traced arrays (Tracers)
inside a trace; outside one, NumPy arrays and Python numbers (weakly typed), which every
transformation runs through a compiled program, as JAX's eager calls of transformed
functions do.
"""

import functools

import numpy as np

from . import _drx
from . import tree_util
from ._tracer import Error, Tracer, as_value, is_python_scalar, weak_array


# ---- leaves ------------------------------------------------------------------------------
def _in_leaf(x):
    """A leaf of an argument, for the C++ side, and whether it is weakly typed."""
    if isinstance(x, Tracer):
        return x._value, x._weak
    if isinstance(x, (_drx.Value, _drx.Array)):
        return x, False
    if is_python_scalar(x):
        return weak_array(x), True
    if x is None:
        raise Error("drx: None is not an array leaf")
    if type(x) is not np.ndarray and hasattr(x, "__dlpack__"):  # a PyTorch tensor, say
        try:
            x = np.from_dlpack(x)  # NumPy's view of its memory, without a copy
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass  # not on the CPU, or not exportable: NumPy's conversion below decides
    try:  # viewed in place where its layout allows: drx never writes an argument
        return _drx.asarray(x if type(x) is np.ndarray else np.asarray(x), False), False
    except (TypeError, ValueError) as e:
        raise Error(f"drx: an argument leaf of type {type(x).__name__} is not an array: {e}") \
            from None


_LEAF = tree_util.tree_structure(0)


def _flatten_args(args):
    """Per positional argument: its leaves (C++ side), weak flags and tree structure."""
    leaf_lists, weak_lists, trees = [], [], []
    for a in args:
        if type(a) is np.ndarray or type(a) is Tracer:  # the common case: one leaf
            leaf, weak = _in_leaf(a)
            leaf_lists.append([leaf])
            weak_lists.append([weak])
            trees.append(_LEAF)
            continue
        leaves, tree = tree_util.tree_flatten(a)
        converted = [_in_leaf(l) for l in leaves]
        leaf_lists.append([c[0] for c in converted])
        weak_lists.append([c[1] for c in converted])
        trees.append(tree)
    return leaf_lists, weak_lists, trees


def _concrete(leaf_lists):
    """Whether a call runs on concrete arrays: no traced leaf and no trace open. Inside a
    trace, concrete leaves become constants of it instead (so a function closing over traced
    values of the enclosing trace still works)."""
    if _drx.in_trace():
        for ls in leaf_lists:
            for i, l in enumerate(ls):
                if isinstance(l, _drx.Array):  # a copy: the program outlives the argument
                    ls[i] = _drx.constant(l.copy())
        return False
    return not any(isinstance(l, _drx.Value) for ls in leaf_lists for l in ls)


class _Eager:
    """A transformation's calls on concrete arrays: through its own jit, compiled once per
    signature (as JAX runs a transformed function outside jit)."""

    def __init__(self):
        self._jitted = None

    def __call__(self, transformed, args):
        if self._jitted is None:
            self._jitted = jit(transformed)
        return self._jitted(*args)


def _out_leaf(x):
    """A result leaf of a traced Python function as a Value of the trace, with its weak flag."""
    if isinstance(x, Tracer):
        return x._value, x._weak
    return as_value(x), is_python_scalar(x)


def _wrap_out(x, weak=False):
    """A result leaf for Python: a Tracer inside a trace, a read-only NumPy array outside."""
    if isinstance(x, _drx.Value):
        return Tracer(x, weak)
    return x.numpy() if isinstance(x, _drx.Array) else x


class _Traceable:
    """fun as a C++ Fn over flattened arguments; records its output structure when traced."""

    def __init__(self, fun, trees, weak_lists):
        self.fun, self.trees, self.weak_lists = fun, trees, weak_lists
        self.out_tree, self.out_weak = None, None
        self.fn = _drx.function(self._flat)

    def _flat(self, arg_lists):
        args = []
        for tree, weaks, leaves in zip(self.trees, self.weak_lists, arg_lists):
            wrapped = [Tracer(v, w) if isinstance(v, _drx.Value) else v
                       for v, w in zip(leaves, weaks)]
            args.append(tree_util.tree_unflatten(tree, wrapped))
        out = self.fun(*args)
        leaves, self.out_tree = tree_util.tree_flatten(out)
        pairs = [_out_leaf(l) for l in leaves]
        self.out_weak = [p[1] for p in pairs]
        return [p[0] for p in pairs]

    def rebuild(self, leaves):
        weak = self.out_weak or [False] * len(leaves)
        return tree_util.tree_unflatten(
            self.out_tree, [_wrap_out(l, w) for l, w in zip(leaves, weak)])


def _signature(leaf_lists):
    return tuple((l.shape, l.dtype) for ls in leaf_lists for l in ls)


# ---- jit ---------------------------------------------------------------------------------
class _Jitted:
    def __init__(self, fun, static_argnums, mesh):
        self._fun = fun
        self._static = tuple(sorted(static_argnums))
        self._mesh = mesh
        self._entries = {}  # by tree_util's key
        self._fast = {}  # by (static arguments, flatten_call's key)
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__: it may be a _Jitted

    def __call__(self, *args):
        if self._static:
            for i in self._static:
                if i >= len(args):
                    raise Error(f"jit: static_argnums names argument {i}, but only {len(args)} "
                                "were given")
            static = tuple(args[i] for i in self._static)
            try:
                hash(static)
            except TypeError:
                raise Error("jit: static arguments must be hashable") from None
            dynamic = tuple(a for i, a in enumerate(args) if i not in self._static)
        else:
            static, dynamic = (), args
        # The common call (arrays and numbers in built-in containers, outside a trace) is
        # flattened and keyed in C++; anything else takes tree_util's path.
        flat = None if _drx.in_trace() else _drx.flatten_call(dynamic)
        if flat is not None:
            leaf_lists, key = flat
            entry = self._fast.get((static, key))
            if entry is None:
                entry = self._entry(static, dynamic, len(args))[:2]
                self._fast[(static, key)] = entry
        else:
            entry = self._entry(static, dynamic, len(args))
            leaf_lists = entry[2]
        traceable, cache = entry[0], entry[1]
        return traceable.rebuild(cache(leaf_lists))

    def _entry(self, static, dynamic, nargs):
        """(traceable, cache, leaf lists of this call) for a call, through tree_util."""
        leaf_lists, weak_lists, trees = _flatten_args(dynamic)
        _concrete(leaf_lists)  # inside a trace: constants, so the call inlines
        key = (static, tuple(trees), tuple(tuple(w) for w in weak_lists),
               _signature(leaf_lists))
        entry = self._entries.get(key)
        if entry is None:
            def with_static(*dyn):
                full, it = [], iter(dyn)
                for i in range(nargs):
                    full.append(static[self._static.index(i)] if i in self._static else next(it))
                return self._fun(*full)
            traceable = _Traceable(with_static, trees, weak_lists)
            mesh = self._mesh._cpp_arg() if self._mesh is not None else None
            entry = (traceable, _drx.JitCache(traceable.fn, mesh))
            self._entries[key] = entry
        return entry + (leaf_lists,)

    @property
    def trace_count(self):
        """Traces of the Python function so far (one per new signature)."""
        return sum(cache.trace_count for _, cache in self._entries.values())


def jit(fun=None, *, static_argnums=(), mesh=None):
    """Compiles fun: traced once per signature (tree structure, shapes, dtypes, weak types and
    static arguments), run as compiled code on arrays, inlined when called inside a trace."""
    if fun is None:
        return lambda f: jit(f, static_argnums=static_argnums, mesh=mesh)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return _Jitted(fun, static_argnums, mesh)


# ---- grad ----------------------------------------------------------------------------------
def _argnums_tuple(argnums, nargs, what):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise Error(f"{what}: argnums {a} is out of range for {nargs} positional arguments")
    return tuple(a % nargs for a in nums), single


def _grad_impl(fun, argnums, has_aux, with_value, allow_int):
    what = "value_and_grad" if with_value else "grad"
    eager = _Eager()

    def transformed(*args):
        if not _drx.in_trace():  # on arrays: compiled, by the eager jit's own flattening
            return eager(transformed, args)
        leaf_lists, weak_lists, trees = _flatten_args(args)
        _concrete(leaf_lists)
        nums, single = _argnums_tuple(argnums, len(args), what)
        if has_aux:
            return _grad_with_aux(fun, args, nums, single, with_value, what)
        t = _Traceable(fun, trees, weak_lists)
        result = _drx.grad(t.fn, list(nums), with_value, allow_int)(leaf_lists)
        grads_lists = result[1] if with_value else result
        grads = tuple(
            tree_util.tree_unflatten(trees[a], [Tracer(g) for g in gl])
            for a, gl in zip(nums, grads_lists))
        g = grads[0] if single else grads
        return (Tracer(result[0]), g) if with_value else g

    return functools.wraps(fun, updated=())(transformed)


def _grad_with_aux(fun, args, nums, single, with_value, what):
    """grad with has_aux=True: the vjp of (loss, aux) with a zero cotangent for aux."""
    loss_and_aux = vjp(fun, *args, has_aux=True)
    out, pullback, aux = loss_and_aux
    if not isinstance(out, Tracer) or out.ndim != 0 or out._value.dtype not in (
            "f16", "bf16", "f32", "f64"):
        raise Error(f"{what}: with has_aux=True the function must return (a floating-point "
                    f"scalar, aux), got {out!r} as the first element")
    cts = pullback(Tracer(_drx.scalar_like(out._value, 1.0)))
    grads = tuple(cts[a] for a in nums)
    g = grads[0] if single else grads
    return ((out, aux), g) if with_value else (g, aux)


def grad(fun, argnums=0, has_aux=False, allow_int=False):
    """The gradient of fun (which returns a floating-point scalar) with respect to the
    positional arguments argnums, with the structure of those arguments (as jax.grad)."""
    return _grad_impl(fun, argnums, has_aux, False, allow_int)


def value_and_grad(fun, argnums=0, has_aux=False, allow_int=False):
    """(fun(*args), grad(fun)(*args)) in one pass (as jax.value_and_grad)."""
    return _grad_impl(fun, argnums, has_aux, True, allow_int)


# ---- jvp, vjp, vmap ------------------------------------------------------------------------
def jvp(fun, primals, tangents):
    """(fun(*primals), the directional derivative along tangents), as jax.jvp."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise Error(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    p_lists, p_weak, p_trees = _flatten_args(primals)
    t_lists, _, t_trees = _flatten_args(tangents)
    if p_trees != t_trees:
        raise Error(f"jvp: the tangents' structure {t_trees} differs from the primals' {p_trees}")
    if _concrete(p_lists + t_lists):
        n = len(primals)
        return jit(lambda *a: jvp(fun, a[:n], a[n:]))(*primals, *tangents)
    t = _Traceable(fun, p_trees, p_weak)
    out, out_t = _drx.jvp(t.fn, p_lists, t_lists)
    return t.rebuild(out), t.rebuild(out_t)


def vjp(fun, *primals, has_aux=False):
    """(fun(*primals), pullback) where pullback(cotangent) gives one cotangent per primal.
    With has_aux, fun returns (out, aux) and vjp returns (out, pullback, aux). Inside a trace
    only: called on arrays, the pullback would outlive the trace it belongs to."""
    leaf_lists, weak_lists, trees = _flatten_args(primals)
    if _concrete(leaf_lists):
        raise Error("vjp: call it inside a traced function (drx.jit), since its pullback is "
                    "a traced function; or use drx.grad")
    def checked(*args):
        out = fun(*args)
        if has_aux and not (isinstance(out, tuple) and len(out) == 2):
            raise Error("vjp: with has_aux=True the function must return a pair (out, aux)")
        return out

    t = _Traceable(checked, trees, weak_lists)
    outputs, pullback_flat = _drx.vjp(t.fn, leaf_lists)
    full = t.rebuild(outputs)
    out, aux = full if has_aux else (full, None)
    out_leaves, out_tree = tree_util.tree_flatten(out)
    aux_leaves = tree_util.tree_leaves(aux) if has_aux else []

    def cotangent_value(ct, o):
        """A cotangent leaf as a Value of its output's dtype (a Python number is weak)."""
        if isinstance(ct, Tracer) and not ct._weak:
            return ct._value
        v = _drx.scalar_like(o._value, float(ct)) if is_python_scalar(ct) else as_value(ct)
        return v if v.dtype == o._value.dtype else _drx.astype(v, o._value.dtype)

    def pullback(cotangent):
        ct_leaves, ct_tree = tree_util.tree_flatten(cotangent)
        if ct_tree != out_tree:
            raise Error(f"vjp pullback: the cotangent's structure {ct_tree} differs from the "
                        f"output's {out_tree}")
        values = [cotangent_value(c, o) for c, o in zip(ct_leaves, out_leaves)]
        # aux gets zero cotangents: it is not differentiated.
        values += [_drx.zeros_like(a._value) for a in aux_leaves]
        cts = pullback_flat(values)
        return tuple(tree_util.tree_unflatten(tree, [Tracer(c) for c in tree_util.tree_leaves(ct)])
                     for tree, ct in zip(trees, cts))

    return (out, pullback, aux) if has_aux else (out, pullback)


def _leaf_axes(in_axes, args):
    """One axis (or None) per leaf of args, from in_axes as JAX reads it: an int or None for
    every leaf, or a tuple/list with an entry per positional argument, each an int, None or a
    pytree prefix of that argument."""
    if in_axes is None or isinstance(in_axes, int):
        return [in_axes] * sum(len(tree_util.tree_leaves(a)) for a in args)
    if not isinstance(in_axes, (tuple, list)) or len(in_axes) != len(args):
        raise Error(f"vmap: in_axes must be an int, None, or a tuple with one entry per "
                    f"positional argument ({len(args)}), got {in_axes!r}")
    axes = []
    for i, (entry, arg) in enumerate(zip(in_axes, args)):
        prefix_leaves, prefix = tree_util.tree_flatten(entry, is_leaf=lambda x: x is None)
        for a in prefix_leaves:
            if a is not None and not isinstance(a, int):
                raise Error(f"vmap: in_axes entries must be ints or None, got {a!r} for "
                            f"argument {i}")
        try:
            subtrees = prefix.flatten_up_to(arg)
        except ValueError as e:
            raise Error(f"vmap: in_axes[{i}] is not a prefix of argument {i}'s structure: {e}") \
                from None
        for a, sub in zip(prefix_leaves, subtrees):
            axes.extend([a] * len(tree_util.tree_leaves(sub)))
    return axes


def vmap(fun, in_axes=0, out_axes=0):
    """fun mapped over an axis of its arguments (as jax.vmap). in_axes: an int or None (not
    mapped) for every leaf, or a tuple with one entry per positional argument, each an int,
    None or a pytree prefix of the argument; out_axes: an int or None for every output leaf,
    or a sequence with one entry per output leaf."""
    eager = _Eager()

    def transformed(*args):
        if not _drx.in_trace():  # on arrays: compiled, by the eager jit's own flattening
            return eager(transformed, args)
        leaf_lists, weak_lists, trees = _flatten_args(args)
        _concrete(leaf_lists)
        axes = _leaf_axes(in_axes, args)
        # Each leaf crosses as an argument of its own, with its own axis.
        leaf = tree_util.tree_structure(0)
        flat_leaves = [l for ls in leaf_lists for l in ls]
        flat_weak = [[w] for ws in weak_lists for w in ws]

        def on_leaves(*leaves):
            it = iter(leaves)
            rebuilt = [tree_util.tree_unflatten(tree, [next(it) for _ in range(tree.num_leaves)])
                       for tree in trees]
            return fun(*rebuilt)

        t = _Traceable(on_leaves, [leaf] * len(flat_leaves), flat_weak)
        outs = [out_axes] if isinstance(out_axes, (int, type(None))) else list(out_axes)
        result = _drx.vmap(t.fn, axes, outs)([[l] for l in flat_leaves])
        return t.rebuild(result)

    return functools.wraps(fun, updated=())(transformed)


def make_program(fun, static_argnums=()):
    """A function returning the program fun traces to on given example arguments, printed as
    drx's IR (as jax.make_jaxpr)."""
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)

    def make(*args):
        static = {i: args[i] for i in static_argnums}
        dynamic = [a for i, a in enumerate(args) if i not in static]

        def with_static(*dyn):
            it = iter(dyn)
            return fun(*[static[i] if i in static else next(it) for i in range(len(args))])

        leaf_lists, weak_lists, trees = _flatten_args(dynamic)
        t = _Traceable(with_static, trees, weak_lists)
        return _drx.program_text(t.fn, leaf_lists)

    return make


# ---- DrJAX: placements ----------------------------------------------------------------
def program(fun=None, *, placements, in_placements=None):
    """DrJAX's decorator: fun runs with the placements declared (name -> size); arguments
    whose leading axis is a placement's size are placed there. Call it under drx.jit."""
    if fun is None:
        return lambda f: program(f, placements=placements, in_placements=in_placements)
    items = list(placements.items())
    eager = _Eager()

    def transformed(*args):
        if not _drx.in_trace():  # on arrays: compiled, by the eager jit's own flattening
            return eager(transformed, args)
        leaf_lists, weak_lists, trees = _flatten_args(args)
        _concrete(leaf_lists)
        t = _Traceable(fun, trees, weak_lists)
        placed = _drx.program(items, t.fn, list(in_placements or []))
        return t.rebuild(placed(leaf_lists))

    return functools.wraps(fun, updated=())(transformed)


def _tree_apply(op, x):
    return tree_util.tree_map(lambda l: Tracer(op(as_value(l))), x)


def _request_mesh(mesh, op):
    """DrJAX's mesh= on broadcast and map_fn: the enclosing drx.jit compiles for this mesh
    (placements named after its axes are split across its devices), as if given to jit."""
    if mesh is None:
        return
    if not isinstance(mesh, Mesh):
        raise Error(f"{op}: mesh must be a drx.Mesh, got {type(mesh).__name__}")
    _drx.request_mesh(mesh._cpp_arg(), op)


def broadcast(x, placement=None, *, mesh=None):
    """x (a pytree) copied to every client of the placement: one leading axis added. With
    nested placements, name the one (``broadcast(w, "groups")``), as in C++. ``mesh``: the
    enclosing drx.jit runs the program on this mesh (an error if jit names another)."""
    _request_mesh(mesh, "broadcast")
    return tree_util.tree_map(
        lambda l: Tracer(_drx.broadcast(as_value(l), placement)), x)


def map_fn(fn, arg, *, mesh=None):
    """fn applied to each client's slice of arg (DrJAX's convention: a tuple, namedtuples
    included, is unpacked into fn's arguments; anything else is passed as one argument).
    ``mesh``: as for broadcast."""
    _request_mesh(mesh, "map_fn")
    args = tuple(arg) if isinstance(arg, tuple) else (arg,)
    leaf_lists, weak_lists, trees = _flatten_args(args)
    if _concrete(leaf_lists):
        raise Error("map_fn: must be called inside a drx.program traced by drx.jit")
    t = _Traceable(fn, trees, weak_lists)
    return t.rebuild(_drx.map_fn(t.fn, leaf_lists))


def reduce_sum(x):
    """The sum over clients of x (a pytree placed at a placement)."""
    return _tree_apply(_drx.reduce_sum, x)


def reduce_mean(x):
    """The mean over clients of x."""
    return _tree_apply(_drx.reduce_mean, x)


def reduce_max(x):
    """The largest value over clients of x."""
    return _tree_apply(_drx.reduce_max, x)


def reduce_min(x):
    """The smallest value over clients of x."""
    return _tree_apply(_drx.reduce_min, x)


def reduce_weighted_mean(x, w):
    """sum_i w_i x_i / sum_i w_i over clients, for x a pytree and w one weight per client."""
    wv = as_value(w)
    return tree_util.tree_map(lambda l: Tracer(_drx.reduce_weighted_mean(as_value(l), wv)), x)


def placement_softmax(x):
    """Over the clients of x's placement, per element: exp(x_i) / sum_j exp(x_j) (learned
    aggregation weights); stays placed."""
    return _tree_apply(_drx.placement_softmax, x)


def placement_normalize(w):
    """Over the clients of w's placement: w_i / sum_j w_j; stays placed."""
    return _tree_apply(_drx.placement_normalize, w)


def place(x, placement):
    """x (leading axis of the placement's size) retyped as placed at placement; the empty
    placement makes a placed value unplaced again. No data moves."""
    return tree_util.tree_map(lambda l: Tracer(_drx.place(as_value(l), placement)), x)


def client_index():
    """Inside a map_fn body: the index of the client it runs for (an i32 scalar)."""
    return Tracer(_drx.client_index())


class Mesh:
    """Devices along named axes, e.g. Mesh({"clients": 4}): placements named after an axis
    are split across its devices. drx.dist's ``world.mesh(...)`` gives one whose axis spans
    the MPI processes; its ``axes`` count every process's devices."""

    def __init__(self, axes):
        self.axes = dict(axes)
        self._cpp = None  # a _drx.Mesh that spans processes (drx.dist), else None

    @classmethod
    def _wrap(cls, cpp):
        """A drx.Mesh around a _drx.Mesh (drx.dist's, with its process group)."""
        mesh = cls.__new__(cls)
        mesh.axes = dict(cpp.global_axes)
        mesh._cpp = cpp
        return mesh

    def _cpp_arg(self):
        """The mesh as the bindings take it: the C++ Mesh, else the (axis, size) pairs."""
        return self._cpp if self._cpp is not None else list(self.axes.items())

    def __repr__(self):
        if self._cpp is not None:
            return f"Mesh({self._cpp})"  # e.g. Mesh({clients: 2 x 3 processes})
        return f"Mesh({self.axes!r})"
