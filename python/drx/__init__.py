"""drx: DrJAX's MapReduce primitives in a differentiable, compiled array language.

    import drx

    @drx.program(placements={"clients": 8})
    def fedavg_round(w, xs, ys):
        ws = drx.map_fn(client_update, (drx.broadcast(w), xs, ys))
        return drx.reduce_mean(ws)

    w1 = drx.jit(fedavg_round)(w0, xs, ys)

NumPy arrays and Python numbers go in; read-only NumPy arrays come out. drx behaves as JAX
with jax_enable_x64: float64 stays float64, Python numbers are weakly typed. bf16 results
come back as float32 (Debian's NumPy has no bfloat16).
"""

from . import _drx
from . import dist, lax, nn, numpy, optim, privacy, random, tree_util
from ._api import (Mesh, broadcast, client_index, grad, jit, jvp, make_program, map_fn, place,
                   placement_normalize, placement_softmax, program, reduce_max, reduce_mean,
                   reduce_min, reduce_sum, reduce_weighted_mean, value_and_grad, vjp, vmap)
from ._tracer import ConcretizationError, Error, Tracer
from ._export import *  # noqa: F401,F403 (to_stablehlo, from_stablehlo, mapreduce_form ...)
from . import _export

# OpenBLAS's thread count is the process's: NumPy shares the library, so drx leaves it alone
# unless asked. With control on, drx keeps OpenBLAS on one thread and splits products on its
# own threads, and its bits no longer depend on OpenBLAS's thread count.
set_blas_thread_control = _drx.set_blas_thread_control
num_threads, set_num_threads = _drx.num_threads, _drx.set_num_threads

__all__ = [
    "ConcretizationError", "Error", "Mesh", "Tracer", "broadcast", "client_index", "dist",
    "grad", "jit", "jvp", "lax", "make_program", "map_fn", "nn", "num_threads", "numpy", "optim",
    "place", "placement_normalize", "placement_softmax", "privacy", "program", "random",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_sum", "reduce_weighted_mean",
    "set_blas_thread_control", "set_num_threads", "tree_util", "value_and_grad", "vjp", "vmap",
] + _export.__all__
