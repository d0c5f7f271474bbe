"""drx across processes and hosts (drx/dist over MPI): every process (an MPI rank) runs the same
program, a mesh axis spans the processes, and each passes only its own clients' rows.

    import drx, drx.dist

    world = drx.dist.init()                         # MPI, once per process
    mesh = world.mesh("clients", devices_per_process=1)
    step = drx.jit(fedavg_round, mesh=mesh)
    first, end = world.clients(cohort)              # this rank's clients
    xs = drx.dist.place_rows(my_rows(first, end), cohort, world)
    w1 = step(w0, xs)                               # unplaced results: the same on every rank

launched as ``mpirun -np P python3 script.py``. Results are bitwise those of one process:
reductions over the placement combine the ranks' partial reductions in drx's canonical tree.
A placed result holds this rank's rows only (``local_rows``; ``gather_rows`` collects them on
rank 0). Every rank must call a mesh's programs in the same order, from one thread. A collective
that hears nothing from a rank for ``timeout_s`` seconds names it and ends the job.

Built without MPI (``-DDRX_MPI=OFF``, as the wheel is), ``import drx.dist`` works and ``init()``
raises drx.Error saying so. Outside mpirun, ``init()`` gives a world of one process.
"""
import numpy as np

from . import _drx
from ._api import Mesh
from ._tracer import Error

#: Whether this drx was built with MPI (``init()`` raises drx.Error when not).
built_with_mpi = bool(_drx.dist_built)

_world = None  # the World of init()


class World:
    """This process among the MPI job's (``drx.dist.init()`` returns it)."""

    def __init__(self, cpp):
        self._w = cpp

    @property
    def rank(self):
        """This process's rank, 0 to size - 1."""
        return self._w.rank

    @property
    def size(self):
        """The job's processes."""
        return self._w.size

    @property
    def is_root(self):
        """Whether this is rank 0."""
        return self._w.is_root

    def mesh(self, axis="clients", devices_per_process=1, *, axes=None):
        """A drx.Mesh whose axis ``axis`` spans every process, ``devices_per_process`` device
        threads in each, for ``drx.jit(f, mesh=...)`` (or DrJAX's ``mesh=``). With ``axes`` (a
        dict of per-process sizes), a mesh of several axes of which ``axis`` spans the
        processes."""
        if axes is None:
            cpp = self._w.mesh(axis, int(devices_per_process))
        else:
            cpp = self._w.mesh_of_axes([(str(k), int(v)) for k, v in dict(axes).items()], axis)
        return Mesh._wrap(cpp)

    def clients(self, clients):
        """This process's clients of a placement of ``clients``: (first, end), the range
        clients*rank//size to clients*(rank+1)//size."""
        return tuple(self._w.clients(int(clients)))

    def broadcast(self, data, what="broadcast"):
        """Rank 0's ``data`` (bytes) on every process; what the others pass is ignored.
        ``what`` names the transfer in errors."""
        return self._w.broadcast(bytes(data), what)

    def gather(self, data, what="gather"):
        """On rank 0, every process's ``data`` (bytes) in rank order; elsewhere None."""
        got = self._w.gather(bytes(data), what)
        return got if self._w.is_root else None

    def min(self, value, what="min"):
        """The least of every process's ``value`` (an int)."""
        return self._w.min(int(value), what)

    def barrier(self, what="barrier"):
        """Returns once every process has called it."""
        self._w.barrier(what)

    @property
    def bytes_sent(self):
        """Bytes this process has sent to others so far."""
        return self._w.bytes_sent

    @property
    def seconds_communicating(self):
        """Seconds this process has spent in exchanges (waiting for the others included)."""
        return self._w.seconds_communicating

    @property
    def timeout_s(self):
        """Seconds a collective waits for another process before naming it and ending the
        job (settable)."""
        return self._w.timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds):
        self._w.timeout_s = float(seconds)

    def __repr__(self):
        return f"drx.dist.World(rank={self.rank}, size={self.size})"


def init(timeout_s=None):
    """Starts MPI on the first call and returns the World; later calls return the same World
    (set ``world.timeout_s`` to change the timeout then). ``timeout_s`` (default 30): seconds a
    collective waits for another process before naming it and ending the job. Raises drx.Error
    when drx was built without MPI."""
    global _world
    if _world is None:
        _world = World(_drx.dist_init(30.0 if timeout_s is None else float(timeout_s)))
    return _world


def world():
    """The World of init(); raises drx.Error before it."""
    if _world is None:
        raise Error("drx.dist: call drx.dist.init() first")
    return _world


def _cpp_world(w):
    if w is None:
        return world()._w
    if not isinstance(w, World):
        raise Error(f"drx.dist: expected a drx.dist.World, got {type(w).__name__}")
    return w._w


def place_rows(local, clients, world=None):
    """A placed argument of ``clients`` rows from this process's rows (``local``, whose leading
    axis is ``world.clients(clients)``'s length): the other processes' rows are 0 (pages never
    written). ``world``: default init()'s."""
    w = _cpp_world(world)
    return _drx.dist_place_rows(np.asarray(local), int(clients), w)


def local_rows(global_, world=None):
    """This process's rows of a placed array (a result of a program on a process mesh)."""
    w = _cpp_world(world)
    return _drx.dist_local_rows(np.asarray(global_), w)


def keep_rows(global_, rows):
    """``global_`` with only the rows [first, end) of ``rows`` kept and every other row 0 (pass
    ``world.clients(len(global_))``): what a process holds of a placed value."""
    first, end = rows
    return _drx.dist_keep_rows(np.asarray(global_), (int(first), int(end)))


def gather_rows(global_, world=None, what="gather_rows"):
    """On rank 0, a placed array whose rows are every process's own rows of its ``global_``;
    the other processes get (a copy of) ``global_`` back. Every process must call it."""
    w = _cpp_world(world)
    return _drx.dist_gather_rows(np.asarray(global_), w, what)


def abort_job(exit_code=1):
    """Ends every process of the job with ``exit_code`` (MPI_Abort), for an error only this
    process met (the others would wait for it until their timeout)."""
    _drx.dist_abort_job(int(exit_code))


__all__ = ["World", "abort_job", "built_with_mpi", "gather_rows", "init", "keep_rows",
           "local_rows", "place_rows", "world"]
