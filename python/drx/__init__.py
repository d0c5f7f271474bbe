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
from . import lax, tree_util
from ._api import (Mesh, broadcast, client_index, grad, jit, jvp, make_program, map_fn,
                   program, reduce_max, reduce_mean, reduce_min, reduce_sum,
                   reduce_weighted_mean, value_and_grad, vjp, vmap)
from ._tracer import ConcretizationError, Error, Tracer

# OpenBLAS's thread count is the process's: NumPy shares the library, so drx leaves it alone
# unless asked. With control on, drx keeps OpenBLAS on one thread and splits products on its
# own threads, and its bits no longer depend on OpenBLAS's thread count.
set_blas_thread_control = _drx.set_blas_thread_control

__all__ = [
    "ConcretizationError", "Error", "Mesh", "Tracer", "broadcast", "lax", "client_index", "grad",
    "jit", "jvp", "make_program", "map_fn", "program", "reduce_max", "reduce_mean",
    "reduce_min", "reduce_sum", "reduce_weighted_mean", "set_blas_thread_control", "tree_util", "value_and_grad", "vjp",
    "vmap",
]
