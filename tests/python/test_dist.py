"""drx.dist outside mpirun (tests/python/mpi_fedavg.py runs it under mpirun: ctest mpi.python.*).
Built without MPI, init() raises drx.Error saying so; built with it, a process that mpirun did
not start is a world of one process. MPI starts in a child process of its own, never in the
pytest process (whose forks must not inherit it)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

drx = pytest.importorskip("drx")
import drx.dist  # noqa: E402

needs_mpi = pytest.mark.skipif(not drx.dist.built_with_mpi, reason="drx was built without MPI")


def run_child(code):
    """Runs `code` in a fresh interpreter without mpirun's environment; returns its stdout."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI_", "PMIX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_module_imports_whatever_the_build():
    assert drx.dist is sys.modules["drx.dist"]
    assert "dist" in drx.__all__
    assert isinstance(drx.dist.built_with_mpi, bool)
    assert drx.dist.built_with_mpi == drx._drx.dist_built
    for name in drx.dist.__all__:
        assert getattr(drx.dist, name) is not None, name


def test_world_before_init_is_an_error():
    if drx._drx.dist_initialized():
        pytest.skip("MPI was started in this process")
    with pytest.raises(drx.Error, match=r"call drx\.dist\.init\(\) first"):
        drx.dist.world()
    with pytest.raises(drx.Error, match=r"call drx\.dist\.init\(\) first"):
        drx.dist.place_rows(np.zeros((1, 2)), 1)


@pytest.mark.skipif(drx.dist.built_with_mpi, reason="drx was built with MPI")
def test_init_without_mpi_says_drx_was_built_without_it():
    with pytest.raises(drx.Error, match=r"built without MPI \(-DDRX_MPI=OFF\)"):
        drx.dist.init()
    with pytest.raises(drx.Error, match=r"built without MPI"):
        drx.dist.init()  # and again: nothing was half started
    assert not drx._drx.dist_initialized()
    with pytest.raises(drx.Error, match=r"keep_rows: drx was built without MPI"):
        drx.dist.keep_rows(np.zeros((3, 2)), (0, 1))


def test_a_mesh_of_axes_is_as_it_was():
    mesh = drx.Mesh({"clients": 2})
    assert mesh.axes == {"clients": 2}
    assert repr(mesh) == "Mesh({'clients': 2})"
    assert mesh._cpp is None

    @drx.program(placements={"clients": 4})
    def total(xs):
        return drx.reduce_sum(drx.map_fn(lambda x: x * 2.0, xs))

    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    want = drx.jit(total)(xs)
    assert drx.jit(total, mesh=mesh)(xs).tobytes() == want.tobytes()
    with pytest.raises(drx.Error):
        drx.jit(total, mesh=drx.Mesh({"clients": 0}))(xs)  # the C++ Mesh's check, at the call


def test_a_cpp_mesh_of_this_process_only():
    m = drx._drx.Mesh([("clients", 3)])
    assert m.axes == [("clients", 3)] and m.global_axes == [("clients", 3)]
    assert m.process_axis is None and m.processes == 1
    assert str(m) == "{clients: 3}"
    assert m == drx._drx.Mesh([("clients", 3)]) and m != drx._drx.Mesh([("clients", 2)])
    wrapped = drx.Mesh._wrap(m)
    assert wrapped.axes == {"clients": 3}

    @drx.program(placements={"clients": 3})
    def mean(xs):
        return drx.reduce_mean(drx.map_fn(lambda x: x + 1.0, xs))

    xs = np.linspace(0, 1, 6, dtype=np.float32).reshape(3, 2)
    assert drx.jit(mean, mesh=wrapped)(xs).tobytes() == drx.jit(mean)(xs).tobytes()


@needs_mpi
def test_init_outside_mpirun_is_a_world_of_one_process():
    out = run_child("""
        import numpy as np
        import drx, drx.dist

        w = drx.dist.init(timeout_s=60)
        assert drx.dist.init() is w and drx.dist.world() is w
        assert (w.rank, w.size, w.is_root) == (0, 1, True), w
        assert w.timeout_s == 60
        w.timeout_s = 45
        assert w.timeout_s == 45
        assert w.clients(5) == (0, 5)

        mesh = w.mesh("clients", devices_per_process=2)
        assert mesh.axes == {"clients": 2}, mesh.axes
        assert repr(mesh) == "Mesh({clients: 2 x 1 processes})", repr(mesh)
        assert mesh._cpp.process_axis == "clients" and mesh._cpp.processes == 1
        two = w.mesh("clients", axes={"clients": 2, "model": 1})
        assert two.axes == {"clients": 2, "model": 1}, two.axes

        @drx.program(placements={"clients": 5})
        def step(w0, xs):
            ws = drx.map_fn(lambda w, x: w - 0.5 * (x * w).sum() * x, (drx.broadcast(w0), xs))
            return drx.reduce_mean(ws), ws

        rng = np.random.default_rng(0)
        w0, xs = rng.normal(size=3), rng.normal(size=(5, 3))
        want_mean, want_ws = drx.jit(step)(w0, xs)
        placed = drx.dist.place_rows(xs, 5, w)
        got_mean, got_ws = drx.jit(step, mesh=mesh)(w0, placed)
        assert got_mean.tobytes() == want_mean.tobytes()
        assert drx.dist.local_rows(got_ws, w).tobytes() == want_ws.tobytes()
        assert drx.dist.gather_rows(got_ws, w, "ws").tobytes() == want_ws.tobytes()
        kept = drx.dist.keep_rows(xs, (1, 3))
        assert (kept[1:3] == xs[1:3]).all() and not kept[0].any() and not kept[3:].any()

        assert w.broadcast(b"abc") == b"abc"
        assert w.gather(b"x") == [b"x"]
        assert w.min(7) == 7
        w.barrier()

        for bad, match in [
                (lambda: drx.dist.place_rows(xs[:2], 5, w), "expected 5 rows"),
                (lambda: drx.dist.local_rows(np.float32(1), w), "leading"),
                (lambda: drx.dist.keep_rows(xs, (2, 9)), "rows"),
                (lambda: drx.dist.place_rows(xs, 5, "world"), "drx.dist.World"),
                (lambda: w.mesh("clients", 0), "0 devices"),
                (lambda: w.clients(-1), "-1 clients")]:
            try:
                bad()
            except drx.Error as e:
                assert match in str(e), (match, str(e))
            else:
                raise AssertionError(match)
        print("ok")
    """)
    assert out.strip().endswith("ok"), out


@needs_mpi
def test_a_timeout_that_is_not_positive_is_refused():
    out = run_child("""
        import drx, drx.dist
        try:
            drx.dist.init(timeout_s=0)
        except drx.Error as e:
            assert "timeout_s must be a positive" in str(e), str(e)
        else:
            raise AssertionError("no error")
        assert not drx._drx.dist_initialized()
        print("ok")
    """)
    assert out.strip() == "ok", out
