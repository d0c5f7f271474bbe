// The `_drx` extension module: drx's C++ core, bound for the pure-Python package `drx`
// (python/drx), which adds pytrees, tracers with Python's operators and the public API.
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"

PYBIND11_MODULE(_drx, m) {
  namespace py = pybind11;
  m.doc() = "drx's C++ core (use the `drx` package)";
  // Every drx::Error a user can cause becomes drx.Error, a ValueError with drx's message.
  static py::exception<drx::Error> error(m, "Error", PyExc_ValueError);
  drx::python::drx_error_type = error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const drx::Error& e) {
      error(e.what());
    }
  });
  // A jit call waiting for another thread's trace of the same signature lets go of the GIL,
  // which that thread needs to run the Python function it traces.
  drx::set_jit_wait_hook([](const std::function<void()>& wait) {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      wait();
    } else {
      wait();
    }
  });
  drx::python::bind_arrays(m);
  drx::python::bind_values(m);
  drx::python::bind_dist(m);  // before the bindings taking a _drx.Mesh
  drx::python::bind_transforms(m);
  drx::python::bind_flatten(m);
  drx::python::bind_random(m);
  drx::python::bind_privacy(m);
  drx::python::bind_optim(m);
  drx::python::bind_nn(m);
  drx::python::bind_export(m);
}
