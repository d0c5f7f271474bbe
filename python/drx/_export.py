"""StableHLO in and out, and the MapReduce form of a DrJAX program.

    text = drx.to_stablehlo(fedavg_round, w0, xs, ys, mesh=drx.Mesh({"clients": 4}))
    f2 = drx.from_stablehlo(text)         # compiled on arrays, inlined in a trace (drx.grad(f2))
    form = drx.mapreduce_form(fedavg_round, w0, xs, ys)
    form.run(w0, xs, ys)                  # bitwise drx.jit(fedavg_round)(w0, xs, ys)
    plan = form.write_plan("plan")        # what `drx split` writes; `drx aggregate` reads it
    form = drx.read_mapreduce_plan(plan)

A Python driver runs a plan's parts wherever it likes: ``form.run_part(stage, "client_work",
values, client=i)`` is one client's work (compiled as the map_fn body it was cut from, so its
bits are those the whole program computes for that client), ``form.aggregate(stage, outputs)``
folds the clients' outputs in drx's canonical order, and ``form.drive(server_inputs,
run_clients)`` is the whole driver with the clients' work handed to ``run_clients``. These are
the C++ drx/export/mapreduce_*.h: the names of a form's inputs and outputs are the argument
names and tree paths of the traced function ("params/w", "xs", "loss"), as mapreduce_names.h
makes them.
"""

import collections
import dataclasses
import inspect
import os
import re
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from . import _drx
from . import tree_util
from ._api import Mesh, _flatten_args, _in_leaf, _Jitted, _Traceable
from ._tracer import Error, Tracer, as_value, dtype_name, is_python_scalar, numpy_dtype

__all__ = ["MapReduceForm", "StableHloFunction", "from_stablehlo", "mapreduce_form",
           "read_mapreduce_plan", "to_stablehlo"]


# ---- tracing a Python function to a program ------------------------------------------------
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _program_name(fun):
    """The traced program's name: the function's, as JAX names its modules jit_<name>."""
    name = getattr(fun, "__name__", "")
    return name if isinstance(name, str) and _IDENTIFIER.match(name) else "main"


def _static_tuple(static_argnums):
    return (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)


class _Traced:
    """A function traced on example arguments: its program and the trees around it."""

    def __init__(self, fun, args, static_argnums, op):
        static_argnums = _static_tuple(static_argnums)
        for i in static_argnums:
            if not -len(args) <= i < len(args):
                raise Error(f"{op}: static_argnums names argument {i}, but {len(args)} were given")
        self.nargs = len(args)
        self.static = {i % len(args): args[i] for i in static_argnums}
        dynamic = [a for i, a in enumerate(args) if i not in self.static]

        def with_static(*dyn):
            it = iter(dyn)
            return fun(*[self.static[i] if i in self.static else next(it)
                         for i in range(self.nargs)])

        leaf_lists, weak_lists, self.trees = _flatten_args(dynamic)
        self.traceable = _Traceable(with_static, self.trees, weak_lists)
        self.program = _drx.export_trace(self.traceable._flat, leaf_lists, _program_name(fun), op)
        self.out_tree = self.traceable.out_tree

    def dynamic_args(self, args, op):
        """The dynamic arguments of a call with the traced signature (static ones checked)."""
        if len(args) != self.nargs:
            raise Error(f"{op}: {len(args)} arguments given, the function was traced with "
                        f"{self.nargs}")
        for i, v in self.static.items():
            if not (args[i] is v or args[i] == v):
                raise Error(f"{op}: static argument {i} is {args[i]!r}, the function was "
                            f"traced with {v!r}")
        return [a for i, a in enumerate(args) if i not in self.static]


# ---- StableHLO out -------------------------------------------------------------------------
def to_stablehlo(fun, *args, mesh=None, static_argnums=(), generic=False, gspmd=False,
                 single_reduce=False, module_name="", allow_idle_devices=False):
    """fun traced on the example arguments (only their types count, as jax.jit(f).lower) and
    written as a StableHLO module (drx::to_stablehlo): a public @main of the arguments' leaves
    returning the result's leaves, in tree_util order.

    mesh: a drx.Mesh whose axes name placements of the program (drx.jit(f, mesh=...)'s when
    fun is such a jit and none is given): arguments, results and the values DrJAX constrains
    carry their shardings (Shardy, or GSPMD strings with gspmd=True). generic: MLIR's generic
    op form throughout (what mlir-opt parses without the StableHLO dialect). single_reduce: a
    reduction over a placement as one stablehlo.reduce instead of drx's canonical tree.
    module_name: default jit_<fun's name>. allow_idle_devices: a mesh axis larger than its
    placement is otherwise an error."""
    if mesh is None and isinstance(fun, _Jitted):
        mesh = fun._mesh
    if mesh is not None and not isinstance(mesh, Mesh):
        raise Error(f"to_stablehlo: mesh must be a drx.Mesh, got {type(mesh).__name__}")
    traced = _Traced(fun, args, static_argnums, "to_stablehlo")
    return _drx.export_to_stablehlo(traced.program, mesh._cpp_arg() if mesh is not None else None, bool(generic), bool(gspmd),
                                    bool(single_reduce), str(module_name),
                                    bool(allow_idle_devices))


# ---- StableHLO in --------------------------------------------------------------------------
def _leaf_for(leaf, want, traced):
    """An argument leaf as the program takes it: a Value inside a trace, else an Array.
    Python numbers (and weakly typed traced values) take the input's dtype."""
    if traced:
        if isinstance(leaf, Tracer):
            v = leaf._value
            return _drx.astype(v, want) if leaf._weak and want and v.dtype != want else v
        if is_python_scalar(leaf) and want:
            v = _drx.constant(_drx.asarray(np.asarray(leaf, dtype=numpy_dtype(want))))
            return _drx.astype(v, want) if v.dtype != want else v
        return as_value(leaf)
    if is_python_scalar(leaf) and want:
        return _drx.asarray(np.asarray(leaf, dtype=numpy_dtype(want)))
    return _in_leaf(leaf)[0]


def _call_program(fn, in_types, args):
    """fn (an export_ProgramFunction) on the leaves of args: compiled on arrays, inlined
    inside a trace. One result comes back as it is, several as a tuple."""
    leaves = tree_util.tree_leaves(args)
    traced = _drx.in_trace() or any(isinstance(l, Tracer) for l in leaves)
    converted = [_leaf_for(l, in_types[k][0] if k < len(in_types) else None, traced)
                 for k, l in enumerate(leaves)]
    out = [Tracer(o) if isinstance(o, _drx.Value) else o for o in fn(converted)]
    return out[0] if len(out) == 1 else tuple(out)


class StableHloFunction:
    """A StableHLO module's function as a drx function (drx.from_stablehlo). Called on arrays
    (the leaves of its arguments, in tree_util order, one per argument of the function) it
    runs compiled; called inside a trace it inlines, so drx.grad, drx.vmap and drx.jit see
    through it. One result is returned as it is, several as a tuple. ``program`` is the
    imported drx program (``str(f.program)`` prints it); ``in_types``/``out_types`` its
    arguments' and results' (dtype, shape)."""

    def __init__(self, program, what="from_stablehlo"):
        self.program = program
        self._fn = _drx.export_ProgramFunction(program, False, what)
        self._in = program.in_types
        self.in_types = [(d, s) for d, s, _ in self._in]
        self.out_types = [(d, s) for d, s, _ in program.out_types]

    def __call__(self, *args):
        return _call_program(self._fn, self._in, args)

    def __repr__(self):
        ins = ", ".join(_type_str(d, s) for d, s in self.in_types)
        outs = ", ".join(_type_str(d, s) for d, s in self.out_types)
        return f"StableHloFunction(({ins}) -> ({outs}))"


def from_stablehlo(text, entry="main"):
    """A StableHLO module (as JAX or drx.to_stablehlo print it, pretty or generic form) as a
    callable (drx::from_stablehlo): its function ``entry`` (@main by default), results only
    (the check.* ops of a self-checking module are dropped). drx.Error names the op and line
    of anything drx cannot import."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if not isinstance(text, str):
        raise Error(f"from_stablehlo: expected the module's text, got {type(text).__name__}")
    return StableHloFunction(_drx.export_from_stablehlo(text, entry))


# ---- the MapReduce form: names -------------------------------------------------------------
_SEGMENT = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*\Z")
_RESERVED = re.compile(r"(client_index|[vc][0-9]+)\Z")


def _usable_name(name):
    return isinstance(name, str) and bool(_SEGMENT.match(name)) and not _RESERVED.match(name)


def _dataclass_fields(cls, count):
    if not dataclasses.is_dataclass(cls):
        return None
    names = [f.name for f in dataclasses.fields(cls)
             if f.init and not f.metadata.get("static", False)]
    return names if len(names) == count else None


def _segments(node):
    """The path segment of each child of a treedef node: dict keys, namedtuple and dataclass
    fields, else the child's index (as drx::tree_leaf_names names a dict's and a list's)."""
    n = len(node.children)
    keys = None
    if node.kind == tree_util._DICT:
        keys = node.data
    elif node.kind == tree_util._NAMEDTUPLE:
        keys = node.type._fields
    elif node.kind == tree_util._CUSTOM:
        if node.type is collections.OrderedDict:
            keys = node.data
        elif node.type is collections.defaultdict:
            keys = node.data[1]
        else:
            keys = _dataclass_fields(node.type, n)
    if keys is None or len(keys) != n:
        keys = range(n)
    return [str(k) for k in keys]


def _leaf_names(treedef, prefix):
    """The names of a tree's leaves in tree_util order: prefix, then a segment per level
    ("params/dense0/w", "xs/0"); a lone leaf is prefix itself."""
    out = []

    def walk(node, at):
        if node.kind == tree_util._LEAF:
            out.append(at)
            return
        for seg, child in zip(_segments(node), node.children):
            walk(child, seg if not at else at + "/" + seg)

    walk(treedef._root, prefix)
    return out


def _is_dict_root(treedef):
    node = treedef._root
    return node.kind == tree_util._DICT or (
        node.kind == tree_util._CUSTOM
        and node.type in (collections.OrderedDict, collections.defaultdict))


def _default_arg_names(fun, nargs, static):
    """The function's positional parameter names for its dynamic arguments, where each is a
    usable name; otherwise None (the arguments are then arg0, arg1, ...)."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = []
    for i in range(nargs):
        if i >= len(params) or params[i].kind not in positional:
            return None
        if i not in static:
            names.append(params[i].name)
    if not all(_usable_name(n) for n in names) or len(set(names)) != len(names):
        return None
    return names


# ---- the MapReduce form: values ------------------------------------------------------------
def _as_numpy(x, what):
    """A value as a NumPy array: arrays as they are, Python numbers as drx reads them (bool,
    int64, float64, as their weak type in a trace)."""
    if isinstance(x, Tracer):
        raise Error(f"{what}: expected an array, got a traced value (call it outside any trace)")
    if isinstance(x, _drx.Array):
        return x.numpy()
    if is_python_scalar(x):
        return np.asarray(x, dtype=np.bool_ if isinstance(x, bool) else
                          np.int64 if isinstance(x, int) else np.float64)
    if type(x) is not np.ndarray and hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass
    return np.asarray(x)


def _to_array(x, what):
    a = _as_numpy(x, what)
    try:
        return _drx.asarray(a, False)
    except (TypeError, ValueError) as e:
        raise Error(f"{what}: a value of type {type(x).__name__} is not an array: {e}") from None


def _type_str(dtype, shape):
    """As drx prints types: f32[6,3]."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


def _check_type(name, value, want, what):
    """drx.Error unless value (a NumPy array) is of the form's type for name (a float32 array
    stands for bf16, which NumPy lacks)."""
    dtype, shape = want[0], tuple(want[1])
    try:
        have = dtype_name(value.dtype)
    except Error:
        have = str(value.dtype)
    if (have != dtype and not (dtype == "bf16" and have == "f32")) or value.shape != shape:
        raise Error(f"{what}: the value '{name}' is {_type_str(have, value.shape)}, expected "
                    f"{_type_str(dtype, shape)}")


Aggregation = namedtuple("Aggregation", "client_value kind weight server_value")
Aggregation.__doc__ = ("How a client output is folded over the clients into a server value: "
                       "kind is sum, mean, weighted_mean (by the client output weight), max "
                       "or min, in drx's canonical tree over client indices.")


class Part:
    """A standalone program of a stage (server_prepare, client_work or server_update) whose
    inputs and outputs are named values. ``part.run(values, client=None)`` runs it on a
    mapping from names to arrays (extra names are ignored) and returns its outputs by name;
    client work runs compiled as the map_fn body it was cut from (as `drx run` does)."""

    def __init__(self, form, stage, kind, program, inputs, outputs):
        self._form, self.stage, self.kind = form, stage, kind
        self.program, self.inputs, self.outputs = program, list(inputs), list(outputs)
        self._fn = None

    @property
    def name(self):
        """stageN.<kind>, the base name of its files in a plan."""
        return f"stage{self.stage}.{self.kind}"

    @property
    def text(self):
        """The part's program as drx's IR (the plan's .drx file)."""
        return self.program.text

    def stablehlo(self, generic=False, gspmd=False, single_reduce=False, module_name=""):
        """The part's program as a StableHLO module (to_stablehlo's options; no mesh: a part
        runs on one client or the server)."""
        return _drx.export_to_stablehlo(self.program, None, bool(generic), bool(gspmd),
                                        bool(single_reduce), str(module_name), False)

    def run(self, values, client=None):
        what = f"run_part {self.name}"
        if not isinstance(values, Mapping):
            raise Error(f"{what}: values must be a mapping from names to arrays, got "
                        f"{type(values).__name__}")
        args = []
        for name in self.inputs:
            if name == "client_index" and name not in values:
                if client is None:
                    raise Error(f"{what}: the client work reads client_index: pass client=I")
                value = np.asarray(client, dtype=np.int32)
            elif name in values:
                value = _as_numpy(values[name], what)
            else:
                raise Error(f"{what}: no value for its input '{name}'")
            if name in self._form.types:
                _check_type(name, value, self._form.types[name], what)
            args.append(_drx.asarray(value, False))
        if self._fn is None:
            self._fn = _drx.export_ProgramFunction(self.program, self.kind == "client_work",
                                                   what)
        return dict(zip(self.outputs, self._fn(args)))

    def __repr__(self):
        return f"Part({self.name}: {self.inputs} -> {self.outputs})"


class Stage:
    """One round of server-client communication: server_prepare, the broadcast of server
    values, each client's client_work on its data (client_data), the broadcast values and
    its state kept from earlier stages (state_in; it keeps state_out), the aggregations of
    the clients' outputs into server values, then server_update."""

    def __init__(self, form, index, d):
        self.index = index
        for kind in ("server_prepare", "client_work", "server_update"):
            setattr(self, kind, Part(form, index, kind, *d[kind]))
        self.broadcast, self.client_data = list(d["broadcast"]), list(d["client_data"])
        self.state_in, self.state_out = list(d["state_in"]), list(d["state_out"])
        self.aggregations = [Aggregation(*a) for a in d["aggregations"]]

    def __repr__(self):
        return (f"Stage({self.index}: broadcast {self.broadcast}, client_data "
                f"{self.client_data}, aggregations "
                f"{[(a.kind, a.client_value, a.server_value) for a in self.aggregations]})")


class StageAggregator:
    """A stage's client outputs folded into its aggregates in drx's canonical tree over client
    indices (drx::StageAggregator), streaming: clients must come in order 0, 1, 2, ...
    ``add(client, outputs)`` takes the client's outputs as a mapping by name (only ``reads``
    are read) or as the list of its client_work outputs in order; ``finish()`` returns the
    aggregates by server value name."""

    def __init__(self, form, stage):
        self._form, self._stage = form, form.stages[stage]
        self._agg = _drx.export_StageAggregator(form._box, stage)
        self.reads = list(self._agg.reads)

    @property
    def clients_added(self):
        return self._agg.clients_added

    def add(self, client, outputs):
        what = f"aggregate stage {self._stage.index}"
        if isinstance(outputs, Mapping):
            values = []
            for name in self.reads:
                if name not in outputs:
                    raise Error(f"{what}: client {client}'s outputs have no '{name}'")
                value = _as_numpy(outputs[name], what)
                _check_type(name, value, self._form.types[name], what)
                values.append(_drx.asarray(value))
            self._agg.add(int(client), values)
        else:
            self._agg.add_outputs(int(client), [_drx.asarray(_as_numpy(v, what))
                                                for v in outputs])

    def finish(self):
        names = [a.server_value for a in self._stage.aggregations]
        return dict(zip(names, self._agg.finish()))


class MapReduceForm:
    """A DrJAX program split into stages a batch system or federated runtime can run where the
    data live (drx::MapReduceForm; TFF's MapReduceForm for any number of rounds).

    placement, clients: the split placement and its size. inputs, outputs: the program's
    named inputs and outputs (argument names and tree paths). client_data: the names of the
    clients' data, each to the index of the program input whose row i client i holds.
    types: every name's (dtype, shape), client values per client. stages: the Stages.
    server_inputs: the inputs the server holds (those not client data)."""

    def __init__(self, box, traced=None):
        self._box, self._traced = box, traced
        self.placement, self.clients = box.placement, box.clients
        self.inputs, self.outputs = list(box.inputs), list(box.outputs)
        self.client_data = dict(box.client_data)
        self.types = {n: (d, tuple(s)) for n, (d, s, _) in box.types.items()}
        self.server_inputs = list(box.server_input_names())
        self.stages = [Stage(self, i, box.stage(i)) for i in range(box.num_stages)]

    # -- the program's arguments ------------------------------------------------------------
    def _leaves(self, args, what):
        """The program inputs' values (NumPy arrays) in inputs order, from the traced
        function's arguments, or (a form read from a plan) one array per input."""
        if self._traced is not None:
            dynamic = self._traced.dynamic_args(args, what)
            leaves, trees = [], []
            for a in dynamic:
                ls, tree = tree_util.tree_flatten(a)
                leaves += ls
                trees.append(tree)
            if trees != list(self._traced.trees):
                raise Error(f"{what}: the arguments' structure {trees} differs from the one "
                            f"traced, {list(self._traced.trees)}")
        else:
            leaves = list(args)
        if len(leaves) != len(self.inputs):
            raise Error(f"{what}: {len(leaves)} input values given, the form has "
                        f"{len(self.inputs)} inputs ({', '.join(self.inputs)})")
        return [_as_numpy(l, what) for l in leaves]

    def _rebuild(self, outs):
        if self._traced is not None and self._traced.out_tree is not None:
            return tree_util.tree_unflatten(self._traced.out_tree, outs)
        return list(outs)

    def server_values(self, *args):
        """The server's inputs by name, from the program's arguments."""
        leaves = self._leaves(args, "server_values")
        return {n: v for n, v in zip(self.inputs, leaves) if n not in self.client_data}

    def client_values(self, client, *args):
        """Client ``client``'s data by name (its rows of the placed inputs), from the
        program's arguments."""
        if not 0 <= client < self.clients:
            raise Error(f"client_values: client {client}, but the form has clients 0.."
                        f"{self.clients - 1}")
        leaves = self._leaves(args, "client_values")
        return {n: np.array(leaves[k][client]) for n, k in self.client_data.items()}

    # -- running ----------------------------------------------------------------------------
    def run(self, *args):
        """The form run in this process (drx::run_mapreduce_form): each server part once,
        each stage's client work once per client in isolation, aggregated in the canonical
        order; bitwise drx.jit(fn)(*args). A form from mapreduce_form takes fn's arguments and
        returns fn's result tree; one read from a plan takes one array per input and returns
        the outputs' list."""
        leaves = self._leaves(args, "MapReduceForm.run")
        outs = _drx.export_run_mapreduce_form(self._box,
                                              [_drx.asarray(l, False) for l in leaves])
        return self._rebuild(outs)

    def run_part(self, stage, part, values, client=None):
        """Runs stages[stage]'s part ("server_prepare", "client_work" or "server_update") on
        values (a mapping by name; extra names are ignored); returns its outputs by name.
        client: the client index a client work reads as client_index."""
        if not 0 <= stage < len(self.stages):
            raise Error(f"run_part: stage {stage}, but the form has stages 0.."
                        f"{len(self.stages) - 1}")
        if part not in ("server_prepare", "client_work", "server_update"):
            raise Error(f"run_part: part '{part}' is not server_prepare, client_work or "
                        "server_update")
        return getattr(self.stages[stage], part).run(values, client)

    def aggregator(self, stage):
        """A StageAggregator for stages[stage]."""
        if not 0 <= stage < len(self.stages):
            raise Error(f"aggregator: stage {stage}, but the form has stages 0.."
                        f"{len(self.stages) - 1}")
        return StageAggregator(self, stage)

    def aggregate(self, stage, client_outputs):
        """stages[stage]'s aggregates by name, from every client's outputs in client order
        (each a mapping by name or the list of its client_work outputs)."""
        agg = self.aggregator(stage)
        for i, outputs in enumerate(client_outputs):
            agg.add(i, outputs)
        return agg.finish()

    def drive(self, server_inputs, run_clients):
        """The form's driver (drx::run_mapreduce) with the clients' work wherever
        run_clients puts it: for each stage, server_prepare, then run_clients(stage,
        broadcast) (broadcast: the values every client receives, by name) returns the clients'
        client_work outputs in client order (each a mapping by name or a list), aggregated
        here in the canonical order, then server_update. A client's state (stage.state_out,
        read back as a later stage's state_in) is run_clients' to keep. server_inputs: a
        mapping holding each of server_inputs. Returns the outputs as run does."""
        what = "drive"
        if not isinstance(server_inputs, Mapping):
            raise Error(f"{what}: server_inputs must be a mapping from names to arrays")
        server = {}
        for name in self.server_inputs:
            if name not in server_inputs:
                raise Error(f"{what}: no value for the server input '{name}'")
            server[name] = _as_numpy(server_inputs[name], what)
            _check_type(name, server[name], self.types[name], what)
        for stage in self.stages:
            server.update(stage.server_prepare.run(server))
            broadcast = {n: server[n] for n in stage.broadcast}
            agg = StageAggregator(self, stage.index)
            for i, outputs in enumerate(run_clients(stage, broadcast)):
                agg.add(i, outputs)
            server.update(agg.finish())
            server.update(stage.server_update.run(server))
        return self._rebuild([server[n] for n in self.outputs])

    # -- files --------------------------------------------------------------------------------
    def write_plan(self, dir, stablehlo=False):
        """Writes the plan into dir (drx::write_mapreduce_plan: plan.json, one program file
        per part, stageN.<part>.drx, and its inputs' and outputs' names, .inputs/.outputs;
        with stablehlo, each client work also as stageN.client_work.mlir), each file
        atomically. Returns plan.json's path."""
        dir = os.fspath(dir)
        _drx.export_write_mapreduce_plan(self._box, dir, bool(stablehlo))
        return os.path.join(dir, "plan.json")

    @staticmethod
    def value_file(folder, name):
        """The file of the value name in folder, as plans and `drx aggregate` lay them out:
        NAME.npy, a '/' in NAME a subfolder."""
        return os.path.join(os.fspath(folder), *name.split("/")) + ".npy"

    def save_values(self, folder, values):
        """Writes each value (a mapping by name) to value_file(folder, name), checked against
        the form's types where it names them, each file replaced atomically."""
        for name, v in values.items():
            a = _as_numpy(v, "save_values")
            if name in self.types:
                _check_type(name, a, self.types[name], "save_values")
            path = self.value_file(folder, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                np.save(f, a, allow_pickle=False)
            os.replace(tmp, path)

    def load_values(self, folder, names):
        """The values names from their files in folder, by name, checked against the form's
        types."""
        out = {}
        for name in names:
            path = self.value_file(folder, name)
            if not os.path.exists(path):
                raise Error(f"load_values: no file {path} for the value '{name}'")
            a = np.load(path, allow_pickle=False)
            if name in self.types:
                _check_type(name, a, self.types[name], f"load_values {path}")
            out[name] = a
        return out

    def __repr__(self):
        return (f"MapReduceForm({self.clients} clients at '{self.placement}', "
                f"{len(self.stages)} stage{'s' if len(self.stages) != 1 else ''}; inputs "
                f"{self.inputs}, outputs {self.outputs})")


def mapreduce_form(fun, *args, arg_names=None, static_argnums=()):
    """The MapReduce form of a DrJAX program (drx::mapreduce_form), traced on the example
    arguments (only their types count). Its inputs are named after fun's parameters (or
    arg_names, one per argument traced; arg0, arg1, ... when the parameters' names are not
    usable) and their tree paths ("params/w"); its outputs after the result's paths when it is
    a dict ("loss", "params/w"), else under "out" ("out", "out/0"). drx.Error (the C++
    message) for a program without a MapReduce form."""
    traced = _Traced(fun, args, static_argnums, "mapreduce_form")
    ndyn = len(traced.trees)
    if arg_names is None:
        arg_names = _default_arg_names(fun, len(args), traced.static)
        if arg_names is None:
            arg_names = [f"arg{i}" for i in range(ndyn)]
    else:
        arg_names = list(arg_names)
        if len(arg_names) != ndyn:
            raise Error(f"mapreduce_form: {len(arg_names)} argument names for {ndyn} arguments")
    inputs = []
    for name, tree in zip(arg_names, traced.trees):
        inputs += _leaf_names(tree, name)
    out_tree = traced.out_tree
    outputs = _leaf_names(out_tree, "" if _is_dict_root(out_tree) else "out")
    box = _drx.export_mapreduce_form(traced.program, inputs, outputs)
    return MapReduceForm(box, traced)


def read_mapreduce_plan(path):
    """The form of a plan written by MapReduceForm.write_plan or `drx split`
    (drx::read_mapreduce_plan): path is plan.json or the folder holding it. Its run takes one
    array per input (in inputs order) and returns the outputs' list."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "plan.json")
    return MapReduceForm(_drx.export_read_mapreduce_plan(path))
