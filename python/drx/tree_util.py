"""Pytree utilities compatible with ``jax.tree_util``.

A pytree is a nested structure of containers ("nodes") whose non-container
members are "leaves".  This module reproduces the behaviour of
``jax.tree_util`` in pure Python so code written against JAX's pytree API
works unchanged with drx, and so that flatten order (which decides how leaves
line up with compiled-function arguments) matches JAX exactly.

Built-in node kinds, as in JAX:

* ``tuple``, ``list``: children in sequence order.
* ``dict``: children in *sorted key* order; unflattening yields a dict whose
  keys are in sorted order.  Keys must be mutually comparable.
* namedtuples (any ``tuple`` subclass with ``_fields``): rebuilt as the same
  class.
* ``None``: a node with no children, so ``tree_leaves(None) == []``.
* ``collections.OrderedDict``: children in insertion order.
* ``collections.defaultdict``: sorted keys, rebuilt with the same
  ``default_factory``.
* types registered with :func:`register_pytree_node` or
  :func:`register_dataclass`.

One deliberate difference from JAX: instances of ``dataclasses.dataclass``
types are nodes even when never registered, as if
``register_dataclass(cls)`` had been called (fields marked
``field(metadata={"static": True})`` become auxiliary data, the other
``init=True`` fields become children).  JAX treats unregistered dataclasses as
leaves.

Everything else (numbers, strings, arrays, arbitrary objects, and subclasses
of the built-in containers other than namedtuples) is a leaf, because node
types are looked up by exact type, as in JAX.
"""

import collections
import dataclasses
import threading

__all__ = [
    "PyTreeDef",
    "all_leaves",
    "register_dataclass",
    "register_pytree_node",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
]

_LEAF = "leaf"
_NONE = "none"
_TUPLE = "tuple"
_LIST = "list"
_DICT = "dict"
_NAMEDTUPLE = "namedtuple"
_CUSTOM = "custom"


class _Registration:
    __slots__ = ("kind", "type", "flatten", "unflatten")

    def __init__(self, kind, nodetype, flatten=None, unflatten=None):
        self.kind = kind
        self.type = nodetype
        self.flatten = flatten
        self.unflatten = unflatten


# Keyed by exact type, like JAX's registry, so that e.g. a list subclass is a
# leaf rather than silently losing its subclass on unflatten.
_registry = {}
_registry_lock = threading.Lock()

# Registrations synthesised for unregistered dataclasses.  Kept apart from
# _registry so that an explicit registration of such a class is still allowed.
_implicit_dataclasses = {}


def _sorted_keys(mapping):
    try:
        return tuple(sorted(mapping))
    except TypeError as err:
        # Same exception type and wording as JAX, so callers catching
        # ValueError around tree operations behave the same.
        raise ValueError(
            "Comparator raised exception while sorting pytree dictionary keys."
        ) from err


def _data_equal(a, b):
    # Identity first, as PyObject_RichCompareBool does in JAX's C++.
    return a is b or bool(a == b)


class _Node:
    """One node of a treedef; immutable once built."""

    __slots__ = (
        "kind", "type", "data", "reg", "children",
        "num_leaves", "num_nodes", "_hash",
    )

    def __init__(self, kind, nodetype=None, data=None, reg=None, children=()):
        self.kind = kind
        self.type = nodetype
        self.data = data
        self.reg = reg
        self.children = children
        if kind == _LEAF:
            self.num_leaves = 1
            self.num_nodes = 1
        else:
            self.num_leaves = sum(c.num_leaves for c in children)
            self.num_nodes = 1 + sum(c.num_nodes for c in children)
        self._hash = None

    def equals(self, other):
        if self is other:
            return True
        if (self.kind != other.kind or self.type is not other.type
                or len(self.children) != len(other.children)
                or self.num_nodes != other.num_nodes):
            return False
        if self.kind in (_DICT, _CUSTOM) and not _data_equal(self.data,
                                                             other.data):
            return False
        return all(a.equals(b) for a, b in zip(self.children, other.children))

    def hash(self):
        if self._hash is None:
            # Custom aux data may be unhashable (lists, arrays), so only its
            # type takes part; equal nodes still hash equally.
            extra = self.data if self.kind == _DICT else None
            self._hash = hash((self.kind, self.type, extra,
                               tuple(c.hash() for c in self.children)))
        return self._hash

    def to_str(self):
        kids = [c.to_str() for c in self.children]
        joined = ", ".join(kids)
        if self.kind == _LEAF:
            return "*"
        if self.kind == _NONE:
            return "None"
        if self.kind == _TUPLE:
            return "(" + joined + ("," if len(kids) == 1 else "") + ")"
        if self.kind == _LIST:
            return "[" + joined + "]"
        if self.kind == _DICT:
            items = ", ".join(
                "%r: %s" % (k, s) for k, s in zip(self.data, kids))
            return "{" + items + "}"
        if self.kind == _NAMEDTUPLE:
            return "CustomNode(namedtuple[%s], [%s])" % (
                self.type.__name__, joined)
        return "CustomNode(%s[%s], [%s])" % (
            self.type.__name__, self.data, joined)

    def build(self, children):
        """Rebuilds a Python value of this node from rebuilt children."""
        kind = self.kind
        if kind == _NONE:
            return None
        if kind == _TUPLE:
            return tuple(children)
        if kind == _LIST:
            return list(children)
        if kind == _DICT:
            return dict(zip(self.data, children))
        if kind == _NAMEDTUPLE:
            return self.type(*children)
        return self.reg.unflatten(self.data, tuple(children))


_LEAF_NODE = _Node(_LEAF)


def _dataclass_registration(cls):
    reg = _implicit_dataclasses.get(cls)
    if reg is None:
        data_fields, meta_fields = _infer_dataclass_fields(cls)
        reg = _make_dataclass_registration(cls, data_fields, meta_fields)
        _implicit_dataclasses[cls] = reg
    return reg


def _lookup(x):
    """Returns the registration describing ``x``, or None for a leaf."""
    t = type(x)
    reg = _registry.get(t)
    if reg is not None:
        return reg
    # Namedtuples are recognised heuristically (no common base class), the
    # same test JAX uses.
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return _NAMEDTUPLE_REG
    if dataclasses.is_dataclass(t):
        return _dataclass_registration(t)
    return None


# Shared marker; the namedtuple class itself is stored per node.
_NAMEDTUPLE_REG = _Registration(_NAMEDTUPLE, None)


def _custom_flatten(reg, x):
    out = reg.flatten(x)
    try:
        children, aux = out
    except (TypeError, ValueError):
        raise ValueError(
            "PyTree flatten function for %r should return a pair "
            "(children, aux_data); got %r." % (reg.type, out)) from None
    return list(children), aux


def _flatten(x, is_leaf, leaves):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF_NODE
    reg = _lookup(x)
    if reg is None:
        leaves.append(x)
        return _LEAF_NODE
    kind = reg.kind
    if kind == _NONE:
        return _Node(_NONE, type(None))
    if kind == _TUPLE or kind == _LIST:
        return _Node(kind, type(x),
                     children=tuple(_flatten(c, is_leaf, leaves) for c in x))
    if kind == _DICT:
        keys = _sorted_keys(x)
        return _Node(_DICT, dict, data=keys,
                     children=tuple(_flatten(x[k], is_leaf, leaves)
                                    for k in keys))
    if kind == _NAMEDTUPLE:
        return _Node(_NAMEDTUPLE, type(x),
                     children=tuple(_flatten(c, is_leaf, leaves) for c in x))
    children, aux = _custom_flatten(reg, x)
    return _Node(_CUSTOM, reg.type, data=aux, reg=reg,
                 children=tuple(_flatten(c, is_leaf, leaves)
                                for c in children))


def _flatten_up_to(node, x, out):
    """Appends the subtrees of ``x`` that sit where ``node`` has leaves."""
    kind = node.kind
    if kind == _LEAF:
        out.append(x)
        return
    if kind == _NONE:
        if x is not None:
            raise ValueError("Expected None, got %r." % (x,))
        return
    if kind == _TUPLE or kind == _LIST:
        if type(x) is not node.type:
            raise ValueError("Expected %s, got %r." % (kind, x))
        if len(x) != len(node.children):
            raise ValueError("%s arity mismatch: %d != %d; %s: %r." % (
                kind.capitalize(), len(x), len(node.children), kind, x))
        items = x
    elif kind == _DICT:
        if type(x) is not dict:
            raise ValueError("Expected dict, got %r." % (x,))
        keys = _sorted_keys(x)
        if keys != node.data:
            raise ValueError(
                "Dict key mismatch; expected keys: %r; dict: %r." % (
                    list(node.data), x))
        items = [x[k] for k in keys]
    elif kind == _NAMEDTUPLE:
        if not (isinstance(x, tuple) and hasattr(x, "_fields")):
            raise ValueError("Expected named tuple, got %r." % (x,))
        if len(x) != len(node.children):
            raise ValueError(
                "Named tuple arity mismatch: %d != %d; tuple: %r." % (
                    len(x), len(node.children), x))
        if type(x) is not node.type:
            raise ValueError(
                "Named tuple type mismatch: expected type: %r, tuple: %r." % (
                    node.type, x))
        items = x
    else:
        if type(x) is not node.type:
            raise ValueError(
                "Custom node type mismatch: expected type: %r, value: %r." % (
                    node.type, x))
        items, aux = _custom_flatten(node.reg, x)
        if not _data_equal(node.data, aux):
            raise ValueError(
                "Mismatch custom node data: %r != %r; value: %r." % (
                    node.data, aux, x))
        if len(items) != len(node.children):
            raise ValueError(
                "Custom type arity mismatch: %d != %d; value: %r." % (
                    len(items), len(node.children), x))
    for child, item in zip(node.children, items):
        _flatten_up_to(child, item, out)


def _unflatten(node, it):
    if node.kind == _LEAF:
        return next(it)
    return node.build([_unflatten(c, it) for c in node.children])


class PyTreeDef:
    """Opaque description of a pytree's structure (everything but leaves).

    Mirrors ``jaxlib``'s ``PyTreeDef``: two treedefs are equal when they have
    the same node kinds, node types, arities, dict keys and custom aux data
    (compared with ``==``); they are hashable, and their ``repr`` uses JAX's
    notation, e.g. ``PyTreeDef({'a': *, 'b': [*, *]})``.  Create them with
    :func:`tree_flatten` or :func:`tree_structure`, not directly.
    """

    __slots__ = ("_root",)

    def __init__(self, root):
        if not isinstance(root, _Node):
            raise TypeError("PyTreeDef cannot be constructed directly; use "
                            "tree_structure() or tree_flatten().")
        self._root = root

    @property
    def num_leaves(self):
        """Number of leaves in the structure."""
        return self._root.num_leaves

    @property
    def num_nodes(self):
        """Number of nodes, leaves included (a leaf alone has one node)."""
        return self._root.num_nodes

    def children(self):
        """Treedefs of the root's immediate children (empty for a leaf)."""
        return [PyTreeDef(c) for c in self._root.children]

    def unflatten(self, leaves):
        """Same as ``tree_unflatten(self, leaves)``."""
        leaves = list(leaves)
        expected = self._root.num_leaves
        if len(leaves) < expected:
            raise ValueError(
                "Too few leaves for PyTreeDef; expected %d, got %d." % (
                    expected, len(leaves)))
        if len(leaves) > expected:
            raise ValueError(
                "Too many leaves for PyTreeDef; expected %d, got %d." % (
                    expected, len(leaves)))
        return _unflatten(self._root, iter(leaves))

    def flatten_up_to(self, tree):
        """Flattens ``tree`` only as deep as this structure goes.

        ``tree`` must have this structure as a prefix: its subtrees found at
        this treedef's leaf positions are returned whole, in leaf order.
        Raises ``ValueError`` describing the first mismatch, as JAX does.
        """
        out = []
        _flatten_up_to(self._root, tree, out)
        return out

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self._root.equals(other._root)

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return self._root.hash()

    def __repr__(self):
        return "PyTreeDef(%s)" % self._root.to_str()


def tree_flatten(tree, is_leaf=None):
    """Flattens a pytree into ``(leaves, treedef)``, like JAX.

    Leaves come out depth first, left to right, with dict children in sorted
    key order.  ``is_leaf(x)``, if given, is called on every subtree
    (``None`` included) before it is examined; a true result makes ``x`` a
    leaf.
    """
    leaves = []
    root = _flatten(tree, is_leaf, leaves)
    return leaves, PyTreeDef(root)


def tree_unflatten(treedef, leaves):
    """Rebuilds a pytree from ``treedef`` and an iterable of leaves.

    Raises ``ValueError`` when the number of leaves differs from
    ``treedef.num_leaves``.
    """
    if not isinstance(treedef, PyTreeDef):
        raise TypeError("tree_unflatten expects a PyTreeDef as first "
                        "argument, got %r." % (treedef,))
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    """Returns the leaves of ``tree`` in ``tree_flatten`` order."""
    leaves = []
    _flatten(tree, is_leaf, leaves)
    return leaves


def tree_structure(tree, is_leaf=None):
    """Returns the ``PyTreeDef`` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None):
    """Applies ``f`` leafwise over one or more pytrees, like JAX.

    ``f`` receives one argument per tree.  Every tree in ``rest`` must have
    the structure of ``tree`` (JAX also accepts a ``rest`` tree with deeper
    subtrees where ``tree`` has leaves: those subtrees are passed to ``f``
    whole).  ``is_leaf`` applies to ``tree`` only.  A mismatch raises
    ``ValueError`` naming both structures.
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    columns = [leaves]
    for index, other in enumerate(rest, start=1):
        try:
            columns.append(treedef.flatten_up_to(other))
        except ValueError as err:
            raise ValueError(
                "tree_map: tree %d does not match the structure of the first "
                "tree: %s Expected structure %r, got %r." % (
                    index, err, treedef, tree_structure(other))) from None
    return treedef.unflatten(f(*xs) for xs in zip(*columns))


def treedef_is_leaf(treedef):
    """True when ``treedef`` has a single node, as in JAX.

    Like JAX this includes childless nodes: ``tree_structure(None)`` and
    ``tree_structure(())`` count as leaves here.  See
    :func:`treedef_is_strict_leaf`.
    """
    return treedef.num_nodes == 1


def treedef_is_strict_leaf(treedef):
    """True only for the structure of a single leaf."""
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def treedef_children(treedef):
    """Treedefs of the root's immediate children, as ``jax`` returns."""
    return treedef.children()


def all_leaves(iterable, is_leaf=None):
    """True when every element of ``iterable`` is a leaf, as in JAX.

    ``None`` and empty containers are nodes, so they are not leaves.
    """
    for x in iterable:
        if is_leaf is not None and is_leaf(x):
            continue
        if _lookup(x) is not None:
            return False
    return True


def _register(reg):
    with _registry_lock:
        if reg.type in _registry:
            raise ValueError(
                "Duplicate custom PyTreeDef type registration for %r."
                % (reg.type,))
        _registry[reg.type] = reg


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Makes ``nodetype`` a pytree node type, with JAX's signature.

    ``flatten_func(x)`` returns ``(children, aux_data)``: an iterable of
    children and hashable-or-comparable static data.
    ``unflatten_func(aux_data, children)`` rebuilds the value; ``children``
    is a tuple.  Only instances of exactly ``nodetype`` are affected
    (subclasses stay leaves).  Registering a type twice raises
    ``ValueError``.
    """
    if not isinstance(nodetype, type):
        raise TypeError("nodetype must be a type, got %r." % (nodetype,))
    if not callable(flatten_func) or not callable(unflatten_func):
        raise TypeError("flatten_func and unflatten_func must be callable.")
    _register(_Registration(_CUSTOM, nodetype, flatten_func, unflatten_func))


def _infer_dataclass_fields(cls):
    data_fields, meta_fields = [], []
    for f in dataclasses.fields(cls):
        # Fields with init=False cannot be passed to the constructor, so they
        # are recomputed by the class (default or __post_init__) on rebuild.
        if not f.init:
            continue
        if f.metadata.get("static", False):
            meta_fields.append(f.name)
        else:
            data_fields.append(f.name)
    return tuple(data_fields), tuple(meta_fields)


def _make_dataclass_registration(cls, data_fields, meta_fields):
    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(aux, children):
        kwargs = dict(zip(meta_fields, aux))
        kwargs.update(zip(data_fields, children))
        return cls(**kwargs)

    return _Registration(_CUSTOM, cls, flatten, unflatten)


def register_dataclass(nodetype, data_fields=None, meta_fields=None):
    """Registers a dataclass as a pytree node, like ``jax.tree_util``'s.

    ``data_fields`` become children (in the given order) and
    ``meta_fields`` become aux data compared in treedef equality.  When both
    are omitted they are inferred: fields with ``metadata={"static": True}``
    are meta fields, the other ``init=True`` fields are data fields, in
    declaration order.  This is also what happens implicitly for
    unregistered dataclasses in this module.  Returns ``nodetype`` so it can
    be used as a decorator.
    """
    if not (isinstance(nodetype, type) and dataclasses.is_dataclass(nodetype)):
        raise TypeError("register_dataclass expects a dataclass type, got %r."
                        % (nodetype,))
    if data_fields is None and meta_fields is None:
        data_fields, meta_fields = _infer_dataclass_fields(nodetype)
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass needs both data_fields and "
                        "meta_fields, or neither.")
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
    given = set(data_fields) | set(meta_fields)
    if (given != init_fields
            or len(given) != len(data_fields) + len(meta_fields)):
        raise ValueError(
            "data_fields and meta_fields must together name each init=True "
            "field of %s exactly once; got data_fields=%r, meta_fields=%r, "
            "init fields %r." % (nodetype.__name__, data_fields, meta_fields,
                                 sorted(init_fields)))
    _register(_make_dataclass_registration(nodetype, data_fields,
                                           meta_fields))
    return nodetype


def _register_builtins():
    for kind, t in ((_NONE, type(None)), (_TUPLE, tuple), (_LIST, list),
                    (_DICT, dict)):
        _register(_Registration(kind, t))

    # JAX registers these two in Python with exactly these flatten rules.
    def flatten_ordered(x):
        return list(x.values()), tuple(x.keys())

    def unflatten_ordered(keys, values):
        return collections.OrderedDict(zip(keys, values))

    def flatten_default(x):
        keys = _sorted_keys(x)
        return [x[k] for k in keys], (x.default_factory, keys)

    def unflatten_default(aux, values):
        factory, keys = aux
        return collections.defaultdict(factory, zip(keys, values))

    register_pytree_node(collections.OrderedDict, flatten_ordered,
                         unflatten_ordered)
    register_pytree_node(collections.defaultdict, flatten_default,
                         unflatten_default)


_register_builtins()
