"""StableHLO in and out, and the MapReduce form, from Python (python/drx/_export.py).

References independent of the code under test: Debian's mlir-opt-19 parses the generic form;
JAX's own self-checking modules (../shared/stablehlo-testdata) carry their expected values,
decoded here from the module text with NumPy; drx.jit's results, bitwise, for the round trip
and for the MapReduce form run in process, from a plan read back, and driven part by part.
"""
import ast
import collections
import os
import re
import shutil
import subprocess
import threading

import numpy as np
import pytest

import drx

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "..", "..", "shared", "stablehlo-testdata", "modules")


def bits(x):
    a = np.asarray(x)
    return a.dtype.str, a.shape, a.tobytes()


def assert_bitwise(got, want):
    g, w = drx.tree_util.tree_leaves(got), drx.tree_util.tree_leaves(want)
    assert drx.tree_util.tree_structure(got) == drx.tree_util.tree_structure(want)
    for a, b in zip(g, w):
        assert bits(a) == bits(b), (a, b)


# ---- programs ------------------------------------------------------------------------------
CLIENTS = 4


def loss(p, x, y):
    h = drx.numpy.tanh(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] - y) ** 2).mean()


def client_update(p, x, y):
    g = drx.grad(loss)(p, x, y)
    return drx.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)


@drx.program(placements={"clients": CLIENTS})
def fedavg_round(params, xs, ys):
    ps = drx.map_fn(client_update, (drx.broadcast(params), xs, ys))
    return drx.reduce_mean(ps)


@drx.program(placements={"clients": CLIENTS})
def two_stage_round(params, xs, ys, ns):
    """Stage 0: FedAvg's new params; stage 1: each client's loss at them (weighted by its
    example count) and its drift from them (its stage-0 params: client state)."""
    ps = drx.map_fn(client_update, (drx.broadcast(params), xs, ys))
    new = drx.reduce_mean(ps)
    losses = drx.map_fn(loss, (drx.broadcast(new), xs, ys))

    def drift(p_i, q):
        return sum(((a - b) ** 2).sum() for a, b in zip(drx.tree_util.tree_leaves(p_i),
                                                          drx.tree_util.tree_leaves(q)))

    drifts = drx.map_fn(drift, (ps, drx.broadcast(new)))
    return {"params": new, "loss": drx.reduce_weighted_mean(losses, ns),
            "drift": drx.reduce_max(drifts)}


def example_data(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(size=(3, 5)), "b1": rng.normal(size=5), "w2": rng.normal(size=5)}
    params = {k: v.astype(dtype) for k, v in params.items()}
    xs = rng.normal(size=(CLIENTS, 6, 3)).astype(dtype)
    ys = rng.normal(size=(CLIENTS, 6)).astype(dtype)
    ns = np.array([6.0, 2.0, 5.0, 1.0], dtype)
    return params, xs, ys, ns


def flat(*args):
    return drx.tree_util.tree_leaves(args)


# ---- to_stablehlo / from_stablehlo ---------------------------------------------------------
def test_round_trip_is_bitwise_that_of_jit():
    params, xs, ys, ns = example_data()
    cases = [
        (loss, (params, xs[0], ys[0])),
        (lambda x, y: {"s": (x * y + 1.0).sum(), "d": x - y, "m": x.max()},
         (xs[0], xs[1])),
        (lambda a, b: (a // b, a % b, a < b), (np.arange(12, dtype=np.int32) - 5,
                                               np.arange(1, 13, dtype=np.int32))),
        (fedavg_round, (params, xs, ys)),
        (two_stage_round, (params, xs, ys, ns)),
    ]
    for f, args in cases:
        want = drx.jit(f)(*args)
        for options in ({}, {"generic": True}, {"gspmd": True}):
            text = drx.to_stablehlo(f, *args, **options)
            got = drx.from_stablehlo(text)(*args)
            got = got if isinstance(got, tuple) else (got,)
            assert_bitwise(list(got), drx.tree_util.tree_leaves(want))
    # With a mesh: the same bits, the shardings only annotate.
    text = drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"clients": 2}))
    assert_bitwise(list(drx.from_stablehlo(text)(params, xs, ys)),
                   drx.tree_util.tree_leaves(drx.jit(fedavg_round)(params, xs, ys)))


def _mlir_opt():
    return shutil.which("mlir-opt-19") or shutil.which("mlir-opt")


def test_generic_form_parses_with_mlir_opt(tmp_path):
    tool = _mlir_opt()
    if tool is None:
        print("NOTICE: mlir-opt-19 is not installed (scripts/setup.sh installs it); skipped")
        pytest.skip("mlir-opt-19 is not installed")
    params, xs, ys, ns = example_data()
    texts = {
        "loss": drx.to_stablehlo(loss, params, xs[0], ys[0], generic=True),
        "fedavg": drx.to_stablehlo(fedavg_round, params, xs, ys, generic=True,
                                   mesh=drx.Mesh({"clients": 4})),
        "two_stage_gspmd": drx.to_stablehlo(two_stage_round, params, xs, ys, ns, generic=True,
                                            gspmd=True, mesh=drx.Mesh({"clients": 2})),
        "single_reduce": drx.to_stablehlo(fedavg_round, params, xs, ys, generic=True,
                                          single_reduce=True),
        "scan": drx.to_stablehlo(lambda x: drx.lax.scan(lambda c, r: (c + r, c * r), 0.0 * x[0],
                                                        x), xs[0], generic=True),
    }
    for name, text in texts.items():
        path = tmp_path / f"{name}.mlir"
        path.write_text(text)
        r = subprocess.run([tool, "--allow-unregistered-dialect", str(path)],
                           capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr[:2000], text[:2000])
        assert "func.func" in r.stdout
    # The pretty form is JAX's, which mlir-opt does not parse without the dialect.
    assert "stablehlo.add %" in drx.to_stablehlo(lambda a: a + a, xs[0])


def test_shardings_and_module_options():
    params, xs, ys, _ = example_data()
    plain = drx.to_stablehlo(fedavg_round, params, xs, ys)
    assert "sdy." not in plain and "mhlo.sharding" not in plain
    assert plain.startswith("module @jit_fedavg_round ")
    sdy = drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"clients": 4}))
    assert 'sdy.mesh @mesh = <["clients"=4]>' in sdy
    # xs and ys (argument 4, 5 after the params' three leaves) split on the clients axis.
    assert re.search(r'%arg3: tensor<4x6x3xf64> \{sdy.sharding = #sdy.sharding<@mesh, '
                     r'\[\{"clients"\}, \{\}, \{\}\]>\}', sdy), sdy[:1500]
    assert "sdy.sharding_constraint" in sdy
    assert "mhlo.num_partitions = 4" in sdy
    gspmd = drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"clients": 2}),
                             gspmd=True)
    assert "mhlo.sharding" in gspmd and "sdy." not in gspmd
    # A jit's own mesh is used when none is given.
    jitted = drx.jit(fedavg_round, mesh=drx.Mesh({"clients": 2}))
    assert 'sdy.mesh @mesh = <["clients"=2]>' in drx.to_stablehlo(jitted, params, xs, ys)
    named = drx.to_stablehlo(loss, params, xs[0], ys[0], module_name="my_loss")
    assert named.startswith("module @my_loss ")
    single = drx.to_stablehlo(fedavg_round, params, xs, ys, single_reduce=True)
    assert single != plain
    # Static arguments are baked in.
    text = drx.to_stablehlo(lambda x, k: x * k, xs[0], 3.0, static_argnums=1)
    assert np.array_equal(drx.from_stablehlo(text)(xs[0]), xs[0] * 3.0)


def test_export_errors_are_the_cpp_messages():
    params, xs, ys, _ = example_data()
    with pytest.raises(drx.Error) as e:
        drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"cleints": 2}))
    assert str(e.value) == (
        "to_stablehlo: mesh {cleints: 2} names no placement of the program @fedavg_round "
        "(its placements: clients (4)); a mesh axis splits the placement of its name. Did you "
        "mean 'clients' for mesh axis 'cleints'?")
    with pytest.raises(drx.Error, match=r"^to_stablehlo: mesh \{clients: 2\} names no "
                                        r"placement of the program @loss \(it has no"):
        drx.to_stablehlo(loss, params, xs[0], ys[0], mesh=drx.Mesh({"clients": 2}))
    with pytest.raises(drx.Error, match=r"^to_stablehlo: mesh axis 'clients' has 8 devices but "
                                        r"placement 'clients' has 4 values"):
        drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"clients": 8}))
    idle = drx.to_stablehlo(fedavg_round, params, xs, ys, mesh=drx.Mesh({"clients": 8}),
                            allow_idle_devices=True)
    assert '<["clients"=8]>' in idle
    with pytest.raises(drx.Error, match="mesh must be a drx.Mesh"):
        drx.to_stablehlo(fedavg_round, params, xs, ys, mesh={"clients": 2})
    with pytest.raises(drx.Error, match="to_stablehlo: called inside a trace"):
        drx.jit(lambda x: drx.to_stablehlo(loss, params, x, ys[0]))(xs[0])
    # Import errors name the op and its line.
    with pytest.raises(drx.Error, match="line 3"):
        drx.from_stablehlo("module {\n func.func public @main(%a: tensor<2xf32>) -> "
                           "tensor<2xf32> {\n %0 = stablehlo.frobnicate %a : tensor<2xf32>\n"
                           " return %0 : tensor<2xf32>\n }\n}\n")
    # Calls check their arguments against the module's.
    f = drx.from_stablehlo(drx.to_stablehlo(lambda a, b: a * b, xs[0], xs[0]))
    with pytest.raises(drx.Error, match=r"1 argument given, the program @main takes 2"):
        f(xs[0])
    with pytest.raises(drx.Error, match=r"argument 1 is f32\[6,3\], the program @main takes "
                                        r"f64\[6,3\]"):
        f(xs[0], xs[0].astype(np.float32))


def test_imported_function_composes_with_transformations():
    params, xs, ys, _ = example_data()
    f = drx.from_stablehlo(drx.to_stablehlo(loss, params, xs[0], ys[0]))
    assert f.in_types[0] == ("f64", (5,)) and f.out_types == [("f64", ())]
    # Leaves in tree_util order (b1, w1, w2): a params dict flattens to exactly those.
    assert bits(f(params, xs[0], ys[0])) == bits(drx.jit(loss)(params, xs[0], ys[0]))
    g_imported = drx.grad(f)(params, xs[0], ys[0])  # argument 0: the params dict
    g_direct = drx.grad(loss)(params, xs[0], ys[0])
    assert sorted(g_imported) == sorted(params)
    for k in params:
        np.testing.assert_allclose(g_imported[k], g_direct[k], rtol=1e-13, atol=1e-15)
    gw = drx.jit(drx.grad(lambda p: f(p, xs[0], ys[0])))(params)
    for k in params:
        np.testing.assert_allclose(gw[k], g_direct[k], rtol=1e-13, atol=1e-15)
    # vmap over the clients, jit around it, and Python numbers taking the argument's dtype.
    per_client = drx.vmap(lambda x, y: f(params, x, y))(xs, ys)
    want = np.array([drx.jit(loss)(params, xs[i], ys[i]) for i in range(CLIENTS)])
    np.testing.assert_allclose(per_client, want, rtol=1e-13)
    scale = drx.from_stablehlo(drx.to_stablehlo(lambda x, s: x * s, np.ones(3, np.float32),
                                                np.float32(2)))
    out = scale(np.ones(3, np.float32), 2)
    assert out.dtype == np.float32 and np.array_equal(out, [2, 2, 2])
    assert drx.jit(lambda x: scale(x, 3.0))(np.ones(3, np.float32)).dtype == np.float32
    # An imported function exports again (traced through, as any drx function).
    again = drx.from_stablehlo(drx.to_stablehlo(f, params, xs[0], ys[0]))
    assert bits(again(params, xs[0], ys[0])) == bits(f(params, xs[0], ys[0]))


# ---- JAX's own modules ----------------------------------------------------------------------
_NP_ELEMENT = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i1": np.bool_,
               "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
               "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64}


def decode_dense(literal, tensor_type):
    """A dense<...> constant of tensor<AxBxT> as a NumPy array, decoded here from the text:
    a hex blob (little-endian elements), a splat, or nested lists."""
    parts = tensor_type.split("x")
    shape, element = tuple(int(d) for d in parts[:-1]), np.dtype(_NP_ELEMENT[parts[-1]])
    if literal == "":  # no elements
        return np.zeros(shape, element)
    if literal.startswith('"0x'):
        raw = bytes.fromhex(literal[3:-1])
        if len(raw) == element.itemsize and np.prod(shape, dtype=int) != 1:  # a splat
            return np.full(shape, np.frombuffer(raw, element.newbyteorder("<"))[0])
        return np.frombuffer(raw, element.newbyteorder("<")).astype(element).reshape(shape)
    if literal.startswith("0x"):  # one element's bits (NaN, inf), splat
        value = np.frombuffer(int(literal, 16).to_bytes(element.itemsize, "little"), element)[0]
        return np.full(shape, value)
    text = literal.replace("true", "True").replace("false", "False")
    value = ast.literal_eval(text)
    return np.full(shape, value, element) if not isinstance(value, list) else \
        np.array(value, element).reshape(shape)


def expected_values(text):
    """@expected's returned constants, and the check kind @main applies."""
    body = text[text.index("func.func private @expected"):]
    body = body[:body.index("\n  }\n")]
    constants = {}
    for m in re.finditer(r"(%[\w]+) = stablehlo.constant dense<(.*?)> : tensor<([^>]*)>", body):
        constants[m.group(1)] = decode_dense(m.group(2), m.group(3))
    returned = re.search(r"return ([^:]*):", body).group(1).split(",")
    kind = re.search(r"@check\.(expect_\w+)", text).group(1)
    return [constants[r.strip()] for r in returned], kind


JAX_MODULES = [
    "add_float32_20_20_float32_20_20", "tanh_float32_20_20", "logistic_float64_20_20",
    "dot_general_float32_4_3_float64_3_6", "argmax_float32_18_12",
    "gather_float32_10_10_10_int32_2_2", "concatenate_int32_2_3_int32_2_3",
    "reduce_max_float32_2_3", "pad_float32_2_3_float32", "rem_int32_2_int32_2",
]


def test_jax_modules_import_run_and_match_their_expected_values():
    if not os.path.isdir(TESTDATA):
        print(f"NOTICE: no StableHLO test modules at {TESTDATA} (../shared is absent); skipped")
        pytest.skip("../shared/stablehlo-testdata is absent")
    for name in JAX_MODULES:
        with open(os.path.join(TESTDATA, name + ".mlir")) as f:
            text = f.read()
        expected, kind = expected_values(text)
        got = drx.from_stablehlo(text)()
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(expected), name
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape, (name, g.dtype, e.dtype)
            if kind == "expect_eq" or e.dtype.kind not in "f":
                assert np.array_equal(g, e, equal_nan=e.dtype.kind == "f"), name
            else:  # the checks' tolerance: a few ulp, or a relative 2^-20 / 2^-44
                rtol = 2.0 ** -20 if e.dtype == np.float32 else 2.0 ** -44
                np.testing.assert_allclose(g, e, rtol=rtol,
                                           atol=4 * np.finfo(e.dtype).tiny, err_msg=name)
        # Another function of the module: @expected itself, imported by drx.
        again = drx.from_stablehlo(text, entry="expected")()
        again = list(again) if isinstance(again, tuple) else [again]
        for a, e in zip(again, expected):
            assert bits(a) == bits(e), name


# ---- the MapReduce form --------------------------------------------------------------------
def test_form_names_and_structure():
    params, xs, ys, ns = example_data()
    form = drx.mapreduce_form(two_stage_round, params, xs, ys, ns)
    assert isinstance(form, drx.MapReduceForm)
    assert (form.placement, form.clients) == ("clients", CLIENTS)
    assert form.inputs == ["params/b1", "params/w1", "params/w2", "xs", "ys", "ns"]
    assert form.outputs == ["drift", "loss", "params/b1", "params/w1", "params/w2"]
    assert sorted(form.client_data) == ["ns", "xs", "ys"]
    assert form.client_data["xs"] == 3
    assert form.server_inputs == ["params/b1", "params/w1", "params/w2"]
    assert form.types["xs"] == ("f64", (6, 3)) and form.types["params/w1"] == ("f64", (3, 5))
    assert len(form.stages) == 2
    s0, s1 = form.stages
    assert set(s0.broadcast) == {"params/b1", "params/w1", "params/w2"}
    assert s0.state_out and s1.state_in == s0.state_out  # the clients' stage-0 params
    # The weighted mean's denominator (sum of ns) is ready in stage 0, its numerator in 1.
    assert [a.kind for a in s0.aggregations] == ["mean", "mean", "mean", "sum"]
    assert sorted(a.kind for a in s1.aggregations) == ["max", "sum"]
    assert s0.aggregations[0].server_value == "params/b1"
    assert s0.aggregations[0].client_value in s0.client_work.outputs
    assert s0.client_work.program.name == "stage0_client_work"
    assert "program @stage0_client_work" in s0.client_work.text
    assert "func.func public @main" in s0.client_work.stablehlo()
    # Argument names given; a dict result's leaves are its paths.
    f2 = drx.mapreduce_form(fedavg_round, params, xs, ys, arg_names=["p", "x", "y"])
    assert f2.inputs == ["p/b1", "p/w1", "p/w2", "x", "y"]
    assert f2.outputs == ["b1", "w1", "w2"]

    @drx.program(placements={"clients": CLIENTS})
    def tuple_round(w, xs):
        return drx.reduce_sum(drx.map_fn(lambda a, x: a * x.sum(), (drx.broadcast(w), xs))), \
            drx.reduce_max(drx.map_fn(lambda x: x.max(), xs))

    f3 = drx.mapreduce_form(tuple_round, np.ones(2), xs[:, :, :2])
    assert f3.inputs == ["w", "xs"] and f3.outputs == ["out/0", "out/1"]
    # Parameter names that are not usable names fall back to arg<i>.
    f4 = drx.mapreduce_form(lambda v1, x: tuple_round(v1, x), np.ones(2), xs[:, :, :2])
    assert f4.inputs == ["arg0", "arg1"]
    Pair = collections.namedtuple("Pair", "left right")
    f5 = drx.mapreduce_form(lambda pr, x: tuple_round(pr.left + pr.right, x),
                            Pair(np.ones(2), np.ones(2)), xs[:, :, :2])
    assert f5.inputs == ["pr/left", "pr/right", "x"]


def test_form_runs_bitwise_as_jit_in_process_from_a_plan_and_part_by_part(tmp_path):
    params, xs, ys, ns = example_data()
    want = drx.jit(two_stage_round)(params, xs, ys, ns)
    form = drx.mapreduce_form(two_stage_round, params, xs, ys, ns)
    assert_bitwise(form.run(params, xs, ys, ns), want)
    # Other data of the same types: the form is the program's, not the examples'.
    other = example_data(seed=7)
    assert_bitwise(form.run(*other), drx.jit(two_stage_round)(*other))

    plan = form.write_plan(tmp_path / "plan", stablehlo=True)
    assert os.path.basename(plan) == "plan.json"
    files = set(os.listdir(tmp_path / "plan"))
    assert {"stage0.client_work.drx", "stage1.client_work.mlir", "stage1.server_update.inputs"} \
        <= files
    read = drx.read_mapreduce_plan(tmp_path / "plan")
    assert read.inputs == form.inputs and read.outputs == form.outputs
    assert read.types == form.types
    out = read.run(*flat(params, xs, ys, ns))
    assert_bitwise(out, [want[k] for k in ("drift", "loss")] +
                   [want["params"][k] for k in ("b1", "w1", "w2")])

    # The driver in Python: client work part by part (client state kept here), aggregated
    # in the canonical order.
    for f in (form, read):
        state = {}

        def run_clients(stage, broadcast):
            for i in range(f.clients):
                values = dict(broadcast)
                values.update(f.client_values(i, *([params, xs, ys, ns] if f is form
                                                   else flat(params, xs, ys, ns))))
                values.update(state.get(i, {}))
                outs = f.run_part(stage.index, "client_work", values, client=i)
                state[i] = {n: outs[n] for n in stage.state_out}
                yield outs if i % 2 else [outs[n] for n in stage.client_work.outputs]

        server = f.server_values(*([params, xs, ys, ns] if f is form
                                   else flat(params, xs, ys, ns)))
        driven = f.drive(server, run_clients)
        assert_bitwise(driven, want if f is form else out)


DRX_TOOL = os.path.join(HERE, "..", "..", "build", "drx")


def test_plan_parts_agree_with_the_drx_tool(tmp_path):
    """Python's plan, values on disk and aggregation against `drx run` and `drx aggregate`."""
    if not os.access(DRX_TOOL, os.X_OK):
        print(f"NOTICE: no drx tool at {DRX_TOOL}; skipped")
        pytest.skip("the drx tool is not built")
    params, xs, ys, ns = example_data()
    form = drx.mapreduce_form(two_stage_round, params, xs, ys, ns)
    plan = form.write_plan(tmp_path / "plan")
    stage = form.stages[0]
    server = form.server_values(params, xs, ys, ns)
    outputs = []
    for i in range(CLIENTS):
        values = {**server, **form.client_values(i, params, xs, ys, ns)}
        folder = tmp_path / "in" / str(i)
        form.save_values(folder, {n: values[n] for n in stage.client_work.inputs})
        out = form.run_part(0, "client_work", values, client=i)
        outputs.append(out)
        form.save_values(tmp_path / "outs" / str(i), out)
        # One client's work through `drx run`, from the files Python wrote.
        cmd = [DRX_TOOL, "run", os.path.join(tmp_path, "plan", "stage0.client_work.drx")]
        for n in stage.client_work.inputs:
            cmd += ["--arg", form.value_file(folder, n)]
        for n in stage.client_work.outputs:
            cmd += ["--out", form.value_file(tmp_path / "run" / str(i), n)]
            os.makedirs(os.path.dirname(form.value_file(tmp_path / "run" / str(i), n)),
                        exist_ok=True)
        subprocess.run(cmd, check=True, capture_output=True)
        tool = form.load_values(tmp_path / "run" / str(i), stage.client_work.outputs)
        assert_bitwise(tool, out)
    subprocess.run([DRX_TOOL, "aggregate", plan, "--stage", "0", "--clients",
                    str(tmp_path / "outs"), "--out", str(tmp_path / "agg")],
                   check=True, capture_output=True)
    names = [a.server_value for a in stage.aggregations]
    assert_bitwise(form.load_values(tmp_path / "agg", names), form.aggregate(0, outputs))


def test_client_index_reaches_each_clients_work():
    xs = example_data()[1]

    @drx.program(placements={"clients": CLIENTS})
    def indexed(w, xs):
        return drx.reduce_sum(drx.map_fn(
            lambda a, x: a * x.sum() * drx.client_index().astype("float64"),
            (drx.broadcast(w), xs)))

    w = np.array([1.0, -2.0])
    form = drx.mapreduce_form(indexed, w, xs)
    work = form.stages[0].client_work
    assert "client_index" in work.inputs
    want = drx.jit(indexed)(w, xs)
    assert bits(form.run(w, xs)) == bits(want)
    outs = [form.run_part(0, "client_work", {"w": w, **form.client_values(i, w, xs)}, client=i)
            for i in range(CLIENTS)]
    assert bits(form.aggregate(0, outs)["out"]) == bits(want)
    with pytest.raises(drx.Error, match="reads client_index: pass client=I"):
        form.run_part(0, "client_work", {"w": w, **form.client_values(0, w, xs)})


def test_aggregation_and_part_errors():
    params, xs, ys, ns = example_data()
    form = drx.mapreduce_form(fedavg_round, params, xs, ys)
    stage = form.stages[0]
    outs = [form.run_part(0, "client_work",
                          {**form.server_values(params, xs, ys),
                           **form.client_values(i, params, xs, ys)}, client=i)
            for i in range(CLIENTS)]
    agg = form.aggregator(0)
    with pytest.raises(drx.Error, match=r"^aggregate: stage 0: client 1's outputs came when "
                                        r"client 0's were expected"):
        agg.add(1, outs[1])
    for i in range(CLIENTS - 1):
        agg.add(i, outs[i])
    with pytest.raises(drx.Error, match=r"^aggregate: stage 0: the outputs of 3 clients were "
                                        r"aggregated, expected all 4"):
        agg.finish()
    agg.add(CLIENTS - 1, outs[-1])
    aggregates = agg.finish()
    assert sorted(aggregates) == sorted(a.server_value for a in stage.aggregations)
    assert_bitwise(form.aggregate(0, outs), aggregates)
    with pytest.raises(drx.Error, match=r"no value for its input 'xs'"):
        form.run_part(0, "client_work", form.server_values(params, xs, ys), client=0)
    with pytest.raises(drx.Error, match=r"^run_part stage0.client_work: the value 'xs' is f32\[6,3\], "
                                        r"expected f64\[6,3\]$"):
        form.run_part(0, "client_work", {**form.server_values(params, xs, ys),
                                         "xs": xs[0].astype(np.float32), "ys": ys[0]})
    with pytest.raises(drx.Error, match="part 'clients' is not"):
        form.run_part(0, "clients", {})
    with pytest.raises(drx.Error, match=r"the arguments' structure"):
        form.run(params["w1"], xs, ys)


def test_programs_without_a_mapreduce_form_raise_the_cpp_message():
    params, xs, ys, _ = example_data()

    def plain(p, x, y):
        return loss(p, x, y)

    with pytest.raises(drx.Error) as e:
        drx.mapreduce_form(plain, params, xs[0], ys[0])
    assert str(e.value) == ("mapreduce_form: program @plain places no values, so there is no "
                            "client work to split out")

    @drx.program(placements={"clients": CLIENTS})
    def placed_output(w, xs):
        return drx.map_fn(lambda a, x: a * x.sum(), (drx.broadcast(w), xs))

    with pytest.raises(drx.Error, match=r"^mapreduce_form: output 0 \(f64\[4,2\]@clients\) is "
                                        r"placed; program outputs are server values"):
        drx.mapreduce_form(placed_output, np.ones(2), xs[:, :, :2])

    @drx.program(placements={"clients": CLIENTS})
    def loop_rounds(w, xs):
        def body(i, w):
            return drx.reduce_mean(drx.map_fn(lambda a, x: a * x.mean(), (drx.broadcast(w), xs)))
        return drx.lax.fori_loop(0, 3, body, w)

    with pytest.raises(drx.Error, match=r"^mapreduce_form: .* talks to the clients inside its "
                                        r"body"):
        drx.mapreduce_form(loop_rounds, np.ones(2), xs)
    # Names the C++ side refuses.
    with pytest.raises(drx.Error, match=r"^mapreduce_form: 'c1' .*reserved|^mapreduce_form: "
                                        r"the name 'c1' is reserved"):
        drx.mapreduce_form(fedavg_round, params, xs, ys, arg_names=["p", "c1", "y"])
    with pytest.raises(drx.Error, match="2 argument names for 3 arguments"):
        drx.mapreduce_form(fedavg_round, params, xs, ys, arg_names=["p", "x"])
    with pytest.raises(drx.Error, match=r"^read_mapreduce_plan: cannot open '/nonexistent/nowhere'"):
        drx.read_mapreduce_plan("/nonexistent/nowhere")


def test_imported_function_from_threads():
    params, xs, ys, _ = example_data()
    f = drx.from_stablehlo(drx.to_stablehlo(loss, params, xs[0], ys[0]))
    want = [bits(drx.jit(loss)(params, xs[i], ys[i])) for i in range(CLIENTS)]
    got, errors = [None] * CLIENTS, []

    def work(i):
        try:
            for _ in range(20):
                got[i] = bits(f(params, xs[i], ys[i]))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want
