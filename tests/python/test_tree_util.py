"""Tests for python/drx/tree_util.py against hand-written expected values.

The expected values encode jax.tree_util's documented behaviour (sorted dict
keys, None as an empty node, namedtuple/OrderedDict/defaultdict handling), so
they stand on their own without JAX installed.
"""

import collections
import dataclasses
import importlib.util
import pathlib
import re
import sys

import pytest

_PATH = (pathlib.Path(__file__).resolve().parents[2]
         / "python" / "drx" / "tree_util.py")


def _load():
    # Loaded by path: drx/__init__.py pulls in C++ extensions that may not be
    # built, and tree_util must not depend on them anyway.
    spec = importlib.util.spec_from_file_location("drx_tree_util", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tu = _load()

Point = collections.namedtuple("Point", ["x", "y"])
Other = collections.namedtuple("Other", ["x", "y"])


@dataclasses.dataclass
class Pair:
    first: object
    second: object


@dataclasses.dataclass(frozen=True)
class Config:
    weight: object
    name: str = dataclasses.field(default="w", metadata={"static": True})
    cached: int = dataclasses.field(default=0, init=False)

    def __post_init__(self):
        object.__setattr__(self, "cached", 7)


class Box:
    """A custom container registered below: two children and a tag."""

    def __init__(self, a, b, tag):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return (type(other) is Box and (self.a, self.b, self.tag)
                == (other.a, other.b, other.tag))

    def __repr__(self):
        return "Box(%r, %r, %r)" % (self.a, self.b, self.tag)


tu.register_pytree_node(Box, lambda box: ((box.a, box.b), box.tag),
                        lambda tag, children: Box(children[0], children[1],
                                                  tag))


class Opaque:
    pass


# --- flatten order --------------------------------------------------------

def test_leaf_values_are_their_own_leaves():
    obj = Opaque()
    for value in (1, 2.5, "s", b"b", obj, True):
        leaves, treedef = tu.tree_flatten(value)
        assert leaves == [value]
        assert repr(treedef) == "PyTreeDef(*)"
        assert treedef.num_leaves == 1


def test_nested_dict_list_tuple_order():
    tree = {"b": [1, (2, 3)], "a": 4, "c": {"z": 5, "y": (6,)}}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [4, 1, 2, 3, 6, 5]
    assert repr(treedef) == (
        "PyTreeDef({'a': *, 'b': [*, (*, *)], 'c': {'y': (*,), 'z': *}})")
    assert treedef.num_leaves == 6
    assert treedef.num_nodes == 11


def test_dict_sorted_regardless_of_insertion_order():
    assert tu.tree_leaves({2: "two", 1: "one", 3: "three"}) == [
        "one", "two", "three"]
    assert tu.tree_structure({"b": 0, "a": 0}) == tu.tree_structure(
        {"a": 0, "b": 0})


def test_unsortable_dict_keys_raise():
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten({1: "a", "b": 2})


def test_none_is_an_empty_node():
    assert tu.tree_leaves(None) == []
    assert tu.tree_leaves([1, None, (None, 2)]) == [1, 2]
    leaves, treedef = tu.tree_flatten({"a": None, "b": 3})
    assert leaves == [3]
    assert repr(treedef) == "PyTreeDef({'a': None, 'b': *})"
    assert treedef.num_leaves == 1
    assert tu.tree_unflatten(treedef, [9]) == {"a": None, "b": 9}
    assert tu.tree_structure(None) != tu.tree_structure(0)


def test_namedtuple_order_and_repr():
    leaves, treedef = tu.tree_flatten(Point(x=[1, 2], y=3))
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(namedtuple[Point], "\
        "[[*, *], *]))"


def test_dataclass_fields_in_declaration_order():
    leaves, treedef = tu.tree_flatten(Pair(second=[2, 3], first={"k": 1}))
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(Pair[()], [{'k': *}, "\
        "[*, *]]))"


def test_dataclass_static_and_init_false_fields():
    leaves, treedef = tu.tree_flatten(Config(weight=[1.0, 2.0], name="n"))
    assert leaves == [1.0, 2.0]
    assert repr(treedef) == "PyTreeDef(CustomNode(Config[('n',)], [[*, *]]))"
    assert treedef != tu.tree_structure(Config(weight=[1.0, 2.0], name="m"))


def test_ordered_dict_keeps_insertion_order():
    tree = collections.OrderedDict([("b", 1), ("a", 2), ("c", [3])])
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert repr(treedef) == (
        "PyTreeDef(CustomNode(OrderedDict[('b', 'a', 'c')], [*, *, [*]]))")


def test_defaultdict_sorted_keys():
    tree = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [2, 1]
    assert repr(treedef) == (
        "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], "
        "[*, *]))")


def test_container_subclasses_are_leaves():
    class MyList(list):
        pass

    class MyDict(dict):
        pass

    class MyTuple(tuple):
        pass

    for value in (MyList([1, 2]), MyDict(a=1), MyTuple((1, 2))):
        assert tu.tree_leaves(value) == [value]


def test_mixed_everything():
    tree = [
        Point(1, None),
        collections.OrderedDict([("z", 2), ("y", Pair(3, 4))]),
        {"k": collections.defaultdict(int, {"q": 5, "p": (6, 7)})},
        Box(8, [9], "t"),
    ]
    assert tu.tree_leaves(tree) == [1, 2, 3, 4, 6, 7, 5, 8, 9]


# --- unflatten round trips --------------------------------------------------

def _round_trip(tree):
    leaves, treedef = tu.tree_flatten(tree)
    return tu.tree_unflatten(treedef, leaves)


def test_round_trip_builtin_containers():
    tree = {"b": [1, (2, None)], "a": ()}
    out = _round_trip(tree)
    assert out == tree
    assert type(out["b"][1]) is tuple
    assert type(out["b"]) is list
    assert list(out) == ["a", "b"]


def test_unflatten_dict_has_sorted_keys():
    out = _round_trip({"c": 1, "a": 2, "b": 3})
    assert list(out.keys()) == ["a", "b", "c"]


def test_round_trip_namedtuple_class():
    out = _round_trip(Point(1, Point(2, 3)))
    assert type(out) is Point and type(out.y) is Point
    assert out == Point(1, Point(2, 3))


def test_round_trip_dataclass_class():
    out = _round_trip(Pair([1], Pair(2, 3)))
    assert type(out) is Pair and type(out.second) is Pair
    assert out == Pair([1], Pair(2, 3))
    frozen = _round_trip(Config(weight=4, name="n"))
    assert type(frozen) is Config
    assert (frozen.weight, frozen.name, frozen.cached) == (4, "n", 7)


def test_round_trip_ordered_dict_order():
    tree = collections.OrderedDict([("b", 1), ("a", 2)])
    out = _round_trip(tree)
    assert type(out) is collections.OrderedDict
    assert list(out.items()) == [("b", 1), ("a", 2)]


def test_round_trip_defaultdict_factory():
    out = _round_trip(collections.defaultdict(list, {"b": 1, "a": 2}))
    assert type(out) is collections.defaultdict
    assert out.default_factory is list
    assert list(out.items()) == [("a", 2), ("b", 1)]
    assert out["missing"] == []


def test_unflatten_with_new_leaves_and_iterables():
    treedef = tu.tree_structure({"x": [0, 0], "y": Point(0, 0)})
    out = tu.tree_unflatten(treedef, iter(["a", "b", "c", "d"]))
    assert out == {"x": ["a", "b"], "y": Point("c", "d")}
    assert treedef.unflatten(range(4)) == {"x": [0, 1], "y": Point(2, 3)}


def test_wrong_leaf_count():
    treedef = tu.tree_structure([1, (2, 3)])
    with pytest.raises(ValueError, match=r"Too few leaves.*expected 3, got 2"):
        tu.tree_unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match=r"Too many leaves.*expected 3, got 4"):
        tu.tree_unflatten(treedef, [1, 2, 3, 4])


def test_unflatten_rejects_non_treedef():
    with pytest.raises(TypeError):
        tu.tree_unflatten([1, 2], [1, 2])


# --- is_leaf --------------------------------------------------------------

def test_is_leaf_stops_descent():
    tree = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves, treedef = tu.tree_flatten(
        tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': [*, *]})"
    assert tu.tree_unflatten(treedef, leaves) == tree


def test_is_leaf_can_keep_none():
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


def test_is_leaf_sees_the_root():
    assert tu.tree_leaves([1, 2], is_leaf=lambda x: isinstance(x, list)) == [
        [1, 2]]


def test_tree_map_is_leaf():
    out = tu.tree_map(len, {"a": [1, 2], "b": [[3]]},
                      is_leaf=lambda x: isinstance(x, list))
    assert out == {"a": 2, "b": 1}


# --- tree_map -------------------------------------------------------------

def test_tree_map_single_tree_preserves_structure():
    tree = {"b": Point(1, [2]), "a": None, "c": Pair(3, (4,))}
    out = tu.tree_map(lambda v: v * 10, tree)
    assert out == {"a": None, "b": Point(10, [20]), "c": Pair(30, (40,))}
    assert type(out["b"]) is Point


def test_tree_map_several_trees():
    a = {"x": [1, 2], "y": (3,)}
    b = {"y": (30,), "x": [10, 20]}
    c = {"x": [100, 200], "y": (300,)}
    assert tu.tree_map(lambda p, q, r: p + q + r, a, b, c) == {
        "x": [111, 222], "y": (333,)}


def test_tree_map_rest_may_be_deeper_at_leaves():
    out = tu.tree_map(lambda p, q: (p, q), [1, 2], [(5, 6), {"k": 7}])
    assert out == [(1, (5, 6)), (2, {"k": 7})]


def test_tree_map_does_not_call_f_for_none():
    calls = []
    out = tu.tree_map(lambda v: calls.append(v) or v, [None, 1])
    assert out == [None, 1]
    assert calls == [1]


@pytest.mark.parametrize("first, other, detail", [
    ([1, 2], [1, 2, 3], r"List arity mismatch: 3 != 2"),
    ((1, 2), [1, 2], r"Expected tuple"),
    ({"a": 1}, {"b": 1}, r"Dict key mismatch"),
    (Point(1, 2), Other(1, 2), r"Named tuple type mismatch"),
    (Point(1, 2), (1, 2), r"Expected named tuple"),
    ([None], [3], r"Expected None, got 3"),
    (Box(1, 2, "t"), Box(1, 2, "u"), r"Mismatch custom node data"),
    (Pair(1, 2), Box(1, 2, "t"), r"Custom node type mismatch"),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=2, a=1),
     r"Mismatch custom node data"),
])
def test_tree_map_structure_mismatch(first, other, detail):
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda *xs: xs, first, other)
    message = str(info.value)
    assert re.search(detail, message)
    assert repr(tu.tree_structure(first)) in message
    assert repr(tu.tree_structure(other)) in message


def test_flatten_up_to():
    treedef = tu.tree_structure({"a": 0, "b": [0, 0]})
    assert treedef.flatten_up_to({"b": [(1, 2), None], "a": [3]}) == [
        [3], (1, 2), None]


# --- custom registration --------------------------------------------------

def test_register_pytree_node_custom_class():
    tree = Box([1, 2], {"k": 3}, tag="t")
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(Box[t], [[*, *], {'k': *}]))"
    out = tu.tree_unflatten(treedef, [4, 5, 6])
    assert out == Box([4, 5], {"k": 6}, "t")
    assert tu.tree_map(lambda v: -v, Box(1, 2, "q")) == Box(-1, -2, "q")
    assert tu.tree_structure(Box(1, 2, "t")) != tu.tree_structure(
        Box(1, 2, "u"))


def test_custom_unflatten_receives_aux_and_children_tuple():
    seen = []

    class Thing:
        def __init__(self, items):
            self.items = items

    def unflatten(aux, children):
        seen.append((aux, children))
        return Thing(list(children))

    tu.register_pytree_node(Thing, lambda t: (t.items, len(t.items)),
                            unflatten)
    out = tu.tree_map(str, Thing([1, 2]))
    assert seen == [(2, ("1", "2"))]
    assert out.items == ["1", "2"]


def test_registered_subclass_is_leaf():
    class SubBox(Box):
        pass

    sub = SubBox(1, 2, "t")
    assert tu.tree_leaves(sub) == [sub]


def test_duplicate_registration_raises():
    class Once:
        pass

    tu.register_pytree_node(Once, lambda o: ((), None), lambda a, c: Once())
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_pytree_node(Once, lambda o: ((), None),
                                lambda a, c: Once())
    for builtin in (tuple, list, dict, type(None), collections.OrderedDict,
                    collections.defaultdict, Box):
        with pytest.raises(ValueError, match="Duplicate"):
            tu.register_pytree_node(builtin, lambda o: ((), None),
                                    lambda a, c: None)


def test_bad_flatten_result_raises():
    class Bad:
        pass

    tu.register_pytree_node(Bad, lambda o: "not a pair", lambda a, c: Bad())
    with pytest.raises(ValueError, match="should return a pair"):
        tu.tree_flatten(Bad())


def test_register_dataclass_explicit_fields():
    @dataclasses.dataclass
    class Layer:
        w: object
        b: object
        act: str

    assert tu.register_dataclass(Layer, data_fields=["b", "w"],
                                 meta_fields=["act"]) is Layer
    leaves, treedef = tu.tree_flatten(Layer(w=1, b=2, act="relu"))
    assert leaves == [2, 1]
    assert repr(treedef) == "PyTreeDef(CustomNode(Layer[('relu',)], [*, *]))"
    assert tu.tree_unflatten(treedef, [20, 10]) == Layer(10, 20, "relu")
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_dataclass(Layer, data_fields=["b", "w"],
                              meta_fields=["act"])


def test_register_dataclass_validates_fields():
    @dataclasses.dataclass
    class Two:
        p: object
        q: object

    with pytest.raises(ValueError, match="exactly once"):
        tu.register_dataclass(Two, data_fields=["p"], meta_fields=[])
    with pytest.raises(TypeError):
        tu.register_dataclass(Box)


# --- treedefs -------------------------------------------------------------

def test_treedef_equality_ignores_leaf_values():
    assert tu.tree_structure([1, {"a": "x"}]) == tu.tree_structure(
        [object(), {"a": 2.5}])
    assert tu.tree_structure(Point(1, 2)) == tu.tree_structure(Point(3, 4))
    assert tu.tree_structure(Pair(1, 2)) == tu.tree_structure(Pair(3, 4))


@pytest.mark.parametrize("a, b", [
    ([1, 2], (1, 2)),
    ([1, 2], [1, 2, 3]),
    ({"a": 1}, {"b": 1}),
    (Point(1, 2), Other(1, 2)),
    (Point(1, 2), (1, 2)),
    (None, ()),
    ([None], [1]),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=1, a=2)),
    (collections.defaultdict(list, a=1), collections.defaultdict(int, a=1)),
    (collections.OrderedDict(a=1), {"a": 1}),
    ([[1], 2], [1, [2]]),
])
def test_treedef_inequality(a, b):
    ta, tb = tu.tree_structure(a), tu.tree_structure(b)
    assert ta != tb
    assert not ta == tb


def test_treedef_hashing():
    t1 = tu.tree_structure({"a": [1, 2], "b": Point(3, None)})
    t2 = tu.tree_structure({"b": Point("x", None), "a": ["y", "z"]})
    t3 = tu.tree_structure({"a": [1, 2], "b": Point(3, 4)})
    assert t1 == t2 and hash(t1) == hash(t2)
    table = {t1: "first"}
    assert table[t2] == "first"
    assert t3 not in table
    assert len({t1, t2, t3}) == 2
    # Unhashable aux data must not make the treedef unhashable.
    box = tu.tree_structure(Box(1, 2, ["unhashable"]))
    assert hash(box) == hash(tu.tree_structure(Box(3, 4, ["unhashable"])))


def test_treedef_not_equal_to_other_types():
    treedef = tu.tree_structure([1])
    assert treedef != [1]
    assert treedef != "PyTreeDef([*])"


def test_treedef_repr_forms():
    assert repr(tu.tree_structure(None)) == "PyTreeDef(None)"
    assert repr(tu.tree_structure(())) == "PyTreeDef(())"
    assert repr(tu.tree_structure((1,))) == "PyTreeDef((*,))"
    assert repr(tu.tree_structure([])) == "PyTreeDef([])"
    assert repr(tu.tree_structure({})) == "PyTreeDef({})"
    assert repr(tu.tree_structure({1: 0, 2: [None]})) == (
        "PyTreeDef({1: *, 2: [None]})")


def test_treedef_children_and_leaf_predicates():
    treedef = tu.tree_structure({"a": [1, 2], "b": 3})
    children = treedef.children()
    assert [repr(c) for c in children] == ["PyTreeDef([*, *])", "PyTreeDef(*)"]
    assert tu.treedef_children(treedef) == children
    assert tu.treedef_is_leaf(children[1])
    assert not tu.treedef_is_leaf(children[0])
    # As in JAX, childless nodes count as leaves for treedef_is_leaf only.
    assert tu.treedef_is_leaf(tu.tree_structure(None))
    assert not tu.treedef_is_strict_leaf(tu.tree_structure(None))
    assert tu.treedef_is_strict_leaf(children[1])
    assert tu.tree_structure(5).children() == []


def test_treedef_cannot_be_built_directly():
    with pytest.raises(TypeError):
        tu.PyTreeDef([1])


def test_all_leaves():
    assert tu.all_leaves([1, "a", Opaque()])
    assert not tu.all_leaves([1, None])
    assert not tu.all_leaves([1, [2]])
    assert not tu.all_leaves([Pair(1, 2)])
    assert tu.all_leaves([1, [2]], is_leaf=lambda x: isinstance(x, list))


# --- numpy arrays as leaves -----------------------------------------------

def test_numpy_arrays_are_leaves():
    np = pytest.importorskip("numpy")
    a, b = np.arange(3), np.ones((2, 2))
    leaves, treedef = tu.tree_flatten({"w": a, "b": [b]})
    assert len(leaves) == 2
    assert leaves[0] is b and leaves[1] is a
    out = tu.tree_map(lambda x, y: x + y, {"w": a, "b": [b]},
                      {"w": a, "b": [b]})
    np.testing.assert_array_equal(out["w"], a * 2)
    np.testing.assert_array_equal(out["b"][0], b * 2)


def test_module_has_no_drx_imports():
    source = _PATH.read_text()
    assert "import drx" not in source
    assert "from drx" not in source
    assert "from ." not in source
