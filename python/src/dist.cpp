// drx.dist: drx/dist (programs across MPI processes) for Python, and drx::Mesh as a Python
// object, which a mesh spanning processes must stay (its process group has no Python form).
//
// Built with DRX_PYTHON_MPI (CMake's DRX_MPI, the module linking drx_dist), `_drx.dist_init`
// starts MPI and returns the World; built without it, the same names exist and dist_init
// raises drx.Error saying drx was built without MPI, so `import drx.dist` always works.
#include <pybind11/stl.h>

#include "drx/core/process_group.h"
#include "python/src/bindings.h"
#ifdef DRX_PYTHON_MPI
#include "drx/dist/dist.h"
#else
#include "drx/dist/launch.h"
#endif

namespace drx::python {

Mesh mesh_from_arg(const MeshArg& mesh) {
  if (const Mesh* m = std::get_if<Mesh>(&mesh)) return *m;
  return Mesh(std::get<std::vector<Mesh::Axis>>(mesh));
}

namespace {

void bind_mesh(py::module_& m) {
  py::class_<Mesh>(m, "Mesh",
                   "drx::Mesh: devices along named axes, one of which may span processes "
                   "(drx.dist). The drx.Mesh of drx.dist wraps one.")
      .def(py::init<std::vector<Mesh::Axis>>(), py::arg("axes"))
      .def_property_readonly("axes", &Mesh::axes,
                             "(axis, size) pairs; a process axis' size is per process.")
      .def_property_readonly(
          "global_axes", [](const Mesh& mesh) { return mesh.global().axes(); },
          "(axis, size) pairs over every process's devices.")
      .def_property_readonly(
          "process_axis",
          [](const Mesh& mesh) -> std::optional<std::string> {
            for (const Mesh::Axis& a : mesh.axes())
              if (mesh.processes(a.first)) return a.first;
            return std::nullopt;
          },
          "The axis that spans processes, or None.")
      .def_property_readonly(
          "processes",
          [](const Mesh& mesh) {
            const ProcessGroup* g = mesh.process_group();
            return g ? g->size() : 1;
          },
          "The processes the mesh spans (1 for a mesh of this process).")
      .def("__str__", &Mesh::str)
      .def("__repr__", [](const Mesh& mesh) { return "_drx.Mesh(" + mesh.str() + ")"; })
      .def(
          "__eq__", [](const Mesh& a, const Mesh& b) { return a == b; }, py::is_operator())
      .def("__hash__", [](const Mesh& mesh) { return py::hash(py::str(mesh.key())); });
}

#ifdef DRX_PYTHON_MPI

// An array argument, viewed in place where NumPy's layout allows.
Array rows_arg(const py::buffer& b) { return array_from_buffer(b, false); }

void bind_world(py::module_& m) {
  using dist::World;
  // The World lives as long as the process (drx::dist keeps it): Python never deletes it.
  py::class_<World, std::unique_ptr<World, py::nodelete>>(
      m, "World", "drx::dist::World: this process among the MPI job's.")
      .def_property_readonly("rank", &World::rank)
      .def_property_readonly("size", &World::size)
      .def_property_readonly("is_root", &World::is_root)
      .def(
          "mesh",
          [](const World& w, const std::string& axis, int devices_per_process) {
            return w.mesh(axis, devices_per_process);
          },
          py::arg("axis"), py::arg("devices_per_process"))
      .def(
          "mesh_of_axes",
          [](const World& w, std::vector<Mesh::Axis> axes, const std::string& process_axis) {
            return w.mesh(std::move(axes), process_axis);
          },
          py::arg("axes"), py::arg("process_axis"))
      .def("clients", &World::clients, py::arg("clients"))
      .def(
          "broadcast",
          [](const World& w, const py::bytes& bytes, const std::string& what) {
            std::string in = bytes, out;
            {
              py::gil_scoped_release release;
              out = w.broadcast(in, what);
            }
            return py::bytes(out);
          },
          py::arg("bytes"), py::arg("what"))
      .def(
          "gather",
          [](const World& w, const py::bytes& bytes, const std::string& what) {
            std::string in = bytes;
            std::vector<std::string> got;
            {
              py::gil_scoped_release release;
              got = w.gather(in, what);
            }
            py::list out;
            for (const std::string& s : got) out.append(py::bytes(s));
            return out;
          },
          py::arg("bytes"), py::arg("what"))
      .def("min", &World::min, py::arg("value"), py::arg("what"),
           py::call_guard<py::gil_scoped_release>())
      .def("barrier", &World::barrier, py::arg("what"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("bytes_sent", &World::bytes_sent)
      .def_property_readonly("seconds_communicating", &World::seconds_communicating)
      .def_property("timeout_s", &World::timeout_s, &World::set_timeout_s);

  m.attr("dist_built") = true;
  m.def(
      "dist_init",
      [](double timeout_s) -> World& {
        dist::Options options;
        options.timeout_s = timeout_s;
        return dist::init(options);
      },
      py::arg("timeout_s"), py::return_value_policy::reference,
      "drx::dist::init: starts MPI on the first call; later calls return the same World.");
  m.def(
      "dist_initialized",
      []() {
        try {
          (void)dist::world();
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      "Whether drx::dist::init has run in this process.");
  m.def(
      "dist_place_rows",
      [](const py::buffer& local, int64_t clients, const World& w) {
        return array_to_numpy(dist::place_rows(rows_arg(local), clients, w));
      },
      py::arg("local"), py::arg("clients"), py::arg("world"));
  m.def(
      "dist_local_rows",
      [](const py::buffer& global, const World& w) {
        return array_to_numpy(dist::local_rows(rows_arg(global), w));
      },
      py::arg("global_"), py::arg("world"));
  m.def(
      "dist_keep_rows",
      [](const py::buffer& global, std::pair<int64_t, int64_t> rows) {
        return array_to_numpy(dist::keep_rows(rows_arg(global), rows));
      },
      py::arg("global_"), py::arg("rows"));
  m.def(
      "dist_gather_rows",
      [](const py::buffer& global, const World& w, const std::string& what) {
        const Array in = rows_arg(global);
        Array out;
        {
          py::gil_scoped_release release;
          out = dist::gather_rows(in, w, what);
        }
        // Off rank 0 the argument comes back: as a copy, never the caller's memory.
        return array_to_numpy(copy_unless_owned(out, {in}));
      },
      py::arg("global_"), py::arg("world"), py::arg("what"));
  m.def(
      "dist_abort_job",
      [](int exit_code) {
        py::gil_scoped_release release;
        dist::abort_job(exit_code);
      },
      py::arg("exit_code"));
}

#else  // built without MPI: the names, and an init that says why it cannot start

[[noreturn]] void built_without_mpi(const std::string& what) {
  std::string message = "drx.dist." + what +
                        ": drx was built without MPI (-DDRX_MPI=OFF); rebuild it with "
                        "-DDRX_MPI=ON (libopenmpi-dev installed) to run across processes";
  if (dist::launched_by_mpirun())
    message += " (mpirun started this process, so each rank would run the whole program alone)";
  throw Error(message);
}

void bind_world(py::module_& m) {
  m.attr("dist_built") = false;
  m.def(
      "dist_init", [](double) { built_without_mpi("init"); }, py::arg("timeout_s"),
      "Raises drx.Error: drx was built without MPI.");
  m.def(
      "dist_initialized", []() { return false; }, "Always False: drx was built without MPI.");
  m.def(
      "dist_abort_job", [](int) { built_without_mpi("abort_job"); }, py::arg("exit_code"));
  // The rows' functions, named alike (drx.dist asks for a World first, which init refuses).
  for (const char* name : {"place_rows", "local_rows", "keep_rows", "gather_rows"})
    m.def(("dist_" + std::string(name)).c_str(),
          [name](const py::args&) { built_without_mpi(name); });
}

#endif

}  // namespace

void bind_dist(py::module_& m) {
  bind_mesh(m);
  bind_world(m);
}

}  // namespace drx::python
