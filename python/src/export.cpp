// StableHLO in and out, and the MapReduce form, bound for python/drx/_export.py.
//
// Programs and forms cross as boxes of their own (export_Program, export_MapReduceForm) that
// share ownership: a part's program keeps its form alive, and an aggregator its form. A
// Program becomes a Python callable as export_ProgramFunction: on Arrays it runs compiled
// (compiled once, on first use; the GIL released while it runs), on traced Values it inlines
// into the current trace, so the transformations see through it.
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/export/mapreduce_driver.h"
#include "drx/export/mapreduce_form.h"
#include "drx/export/mapreduce_plan.h"
#include "drx/export/stablehlo.h"
#include "drx/stablehlo/import.h"
#include "python/src/bindings.h"

namespace drx::python {
namespace {

struct ProgramBox {
  std::shared_ptr<const Program> program;
  std::optional<Mesh> requested_mesh;  // asked for while tracing (DrJAX's mesh=)
  const Program& get() const { return *program; }
};

struct FormBox {
  std::shared_ptr<const MapReduceForm> form;
  const MapReduceForm& get() const { return *form; }
};

py::tuple type_to_py(const Type& t) {
  py::tuple shape(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) shape[i] = py::int_(t.shape[i]);
  return py::make_tuple(std::string(dtype_name(t.dtype)), shape, t.placement);
}

py::list types_to_py(const std::vector<Type>& types) {
  py::list out;
  for (const Type& t : types) out.append(type_to_py(t));
  return out;
}

py::list arrays_to_numpy(const std::vector<Array>& arrays, const std::vector<Array>& inputs) {
  py::list out;
  for (const Array& a : arrays) out.append(array_to_numpy(copy_unless_owned(a, inputs)));
  return out;
}

std::vector<Array> arrays_from_py(py::handle seq, const char* what) {
  std::vector<Array> out;
  for (py::handle h : seq) {
    if (!py::isinstance<Array>(h))
      throw Error(std::string(what) + ": expected an array, got " +
                  py::str(py::type::of(h)).cast<std::string>());
    out.push_back(h.cast<Array>());
  }
  return out;
}

std::string count_of(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// A Program as a function of its inputs' leaves.
class ProgramFunction {
 public:
  ProgramFunction(ProgramBox program, bool map_body, std::string what)
      : program_(std::move(program)), map_body_(map_body), what_(std::move(what)) {}

  py::list call(py::handle leaves_in) {
    const Program& p = program_.get();
    const Tree leaves = py_to_leaves(leaves_in, what_.c_str());
    if (leaves.size() != p.inputs.size())
      throw Error(what_ + ": " + count_of(leaves.size(), "argument") + " given, the program @" +
                  p.name + " takes " + std::to_string(p.inputs.size()));
    bool traced = current_trace() != nullptr;
    for (const Tree& l : leaves.children()) traced = traced || l.kind() == Tree::Kind::value;
    return traced ? inline_call(leaves) : compiled_call(leaves);
  }

  const ProgramBox& program() const { return program_; }

 private:
  std::string mismatch(size_t k, DType dtype, const Shape& shape) const {
    const Type& want = program_.get().type_of(program_.get().inputs[k]);
    if (dtype == want.dtype && shape == want.shape) return "";
    return what_ + ": argument " + std::to_string(k) + " is " + std::string(dtype_name(dtype)) +
           shape_str(shape) + ", the program @" + program_.get().name + " takes " +
           Type(want.dtype, want.shape).str();
  }

  py::list inline_call(const Tree& leaves) {
    std::vector<Value> args;
    for (size_t k = 0; k < leaves.size(); ++k) {
      const Tree& l = leaves.children()[k];
      // A constant outlives the call: never the caller's memory.
      const Value v = l.kind() == Tree::Kind::value
                          ? l.value()
                          : constant(copy_unless_owned(l.array(), {l.array()}));
      if (std::string why = mismatch(k, v.dtype(), v.shape()); !why.empty()) throw Error(why);
      args.push_back(v);
    }
    py::list out;
    for (const Value& v : inline_program(program_.get(), args)) out.append(py::cast(v));
    return out;
  }

  py::list compiled_call(const Tree& leaves) {
    const Program& p = program_.get();
    std::vector<Array> args;
    for (size_t k = 0; k < leaves.size(); ++k) {
      Array a = leaves.children()[k].array();
      // Debian's NumPy has no bfloat16: a bf16 input takes float32, rounded once.
      if (a.dtype() == DType::f32 && p.type_of(p.inputs[k]).dtype == DType::bf16)
        a = convert_array(a, DType::bf16);
      if (std::string why = mismatch(k, a.dtype(), a.shape()); !why.empty()) throw Error(why);
      args.push_back(std::move(a));
    }
    std::vector<Array> out;
    {
      py::gil_scoped_release release;
      std::call_once(compiled_once_, [&] {
        CompileOptions options;
        options.map_body = map_body_;
        compiled_ = compile(p, options);
      });
      out = compiled_.run(args);
    }
    return arrays_to_numpy(out, args);
  }

  ProgramBox program_;
  bool map_body_;
  std::string what_;
  std::once_flag compiled_once_;
  Executable compiled_;
};

// StageAggregator over a form it keeps alive.
class Aggregator {
 public:
  Aggregator(FormBox form, size_t stage) : form_(std::move(form)), agg_(form_.get(), stage) {}
  const std::vector<std::string>& reads() const { return agg_.reads(); }
  void add(int64_t client, py::handle values) {
    agg_.add(client, arrays_from_py(values, "aggregate"));
  }
  void add_outputs(int64_t client, py::handle outputs) {
    agg_.add_outputs(client, arrays_from_py(outputs, "aggregate"));
  }
  int64_t clients_added() const { return agg_.clients_added(); }
  py::list finish() const { return arrays_to_numpy(agg_.finish(), {}); }

 private:
  FormBox form_;
  StageAggregator agg_;
};

// A part of a form: (its program, sharing the form's ownership; inputs; outputs).
py::tuple part_to_py(const FormBox& f, const Part& part) {
  return py::make_tuple(
      ProgramBox{std::shared_ptr<const Program>(f.form, &part.program), std::nullopt}, part.inputs,
      part.outputs);
}

py::dict stage_to_py(const FormBox& f, size_t index) {
  const MapReduceForm& form = f.get();
  if (index >= form.stages.size())
    throw Error("mapreduce form: stage " + std::to_string(index) + " of a form with " +
                count_of(form.stages.size(), "stage"));
  const Stage& s = form.stages[index];
  py::dict d;
  d["server_prepare"] = part_to_py(f, s.server_prepare);
  d["client_work"] = part_to_py(f, s.client_work);
  d["server_update"] = part_to_py(f, s.server_update);
  d["broadcast"] = s.broadcast;
  d["client_data"] = s.client_data;
  d["state_in"] = s.state_in;
  d["state_out"] = s.state_out;
  py::list aggregations;
  for (const AggregationSpec& a : s.aggregations)
    aggregations.append(py::make_tuple(a.client_value, std::string(aggregation_name(a.kind)),
                                       a.weight, a.server_value));
  d["aggregations"] = aggregations;
  return d;
}

}  // namespace

void bind_export(py::module_& m) {
  py::class_<ProgramBox>(m, "export_Program", "A drx program (drx::Program), immutable.")
      .def_property_readonly("name", [](const ProgramBox& p) { return p.get().name; })
      .def_property_readonly("text", [](const ProgramBox& p) { return to_string(p.get()); })
      .def_property_readonly("in_types",
                             [](const ProgramBox& p) { return types_to_py(p.get().input_types()); })
      .def_property_readonly(
          "out_types", [](const ProgramBox& p) { return types_to_py(p.get().output_types()); })
      .def_property_readonly("placements", [](const ProgramBox& p) { return p.get().placements; })
      .def("__str__", [](const ProgramBox& p) { return to_string(p.get()); });

  m.def(
      "export_trace",
      [](py::function f, py::object examples, const std::string& name, const std::string& op) {
        // Inside a trace, the values f captures would become inputs of the program.
        if (current_trace())
          throw Error(op +
                      ": called inside a trace; it traces a whole program (call it outside "
                      "any traced function)");
        std::vector<Tree> in;
        for (py::handle a : examples) in.push_back(py_to_leaves(a, op.c_str()));
        detail::MeshRequestScope requests;
        Program p = detail::trace_examples(tree_fn(std::move(f)), in, name);
        return ProgramBox{std::make_shared<const Program>(std::move(p)), requests.requested()};
      },
      py::arg("f"), py::arg("examples"), py::arg("name") = "main", py::arg("op") = "export",
      "The program f (over lists of argument leaves) traces to on these example leaves.");
  m.def(
      "export_parse_program",
      [](const std::string& text) {
        return ProgramBox{std::make_shared<const Program>(parse_program(text)), std::nullopt};
      },
      py::arg("text"), "A program from drx's program text.");

  m.def(
      "export_to_stablehlo",
      [](const ProgramBox& p, std::optional<MeshArg> mesh, bool generic, bool gspmd,
         bool single_reduce, const std::string& module_name, bool allow_idle_devices) {
        StableHloOptions o;
        o.generic = generic;
        o.gspmd = gspmd;
        o.single_reduce = single_reduce;
        o.module_name = module_name;
        o.allow_idle_devices = allow_idle_devices;
        // A mesh the program asked for (broadcast or map_fn's mesh=) stands in for none.
        const Mesh m = mesh ? mesh_from_arg(*mesh) : p.requested_mesh.value_or(Mesh());
        if (mesh && p.requested_mesh && !(m == *p.requested_mesh))
          throw Error("to_stablehlo: mesh " + m.str() + " differs from the mesh " +
                      p.requested_mesh->str() +
                      " the program asks for (mesh= of broadcast or map_fn)");
        py::gil_scoped_release release;
        return to_stablehlo(p.get(), m.global(), o);  // a process mesh: all its devices
      },
      py::arg("program"), py::arg("mesh") = py::none(), py::arg("generic") = false,
      py::arg("gspmd") = false, py::arg("single_reduce") = false, py::arg("module_name") = "",
      py::arg("allow_idle_devices") = false,
      "drx::to_stablehlo: the program as a StableHLO module.");
  m.def(
      "export_from_stablehlo",
      [](const std::string& text, const std::string& entry) {
        Program p;
        {
          py::gil_scoped_release release;
          p = entry == "main" ? from_stablehlo(text)
                              : stablehlo::results_program(
                                    stablehlo::import_module(stablehlo::parse_mlir(text), entry));
        }
        return ProgramBox{std::make_shared<const Program>(std::move(p)), std::nullopt};
      },
      py::arg("text"), py::arg("entry") = "main",
      "drx::from_stablehlo: a StableHLO module's function `entry` (its results; checks dropped).");

  py::class_<ProgramFunction, std::shared_ptr<ProgramFunction>>(
      m, "export_ProgramFunction",
      "A program as a function of its inputs' leaves: compiled on arrays, inlined on traced "
      "values.")
      .def(py::init<ProgramBox, bool, std::string>(), py::arg("program"),
           py::arg("map_body") = false, py::arg("what") = "program")
      .def("__call__", &ProgramFunction::call, py::arg("leaves"),
           "The results' leaves: NumPy arrays, or traced Values inside a trace.")
      .def_property_readonly("program", &ProgramFunction::program);

  // ---- the MapReduce form ----------------------------------------------------------------
  py::class_<FormBox>(m, "export_MapReduceForm", "A program's MapReduce form (immutable).")
      .def_property_readonly("placement", [](const FormBox& f) { return f.get().placement; })
      .def_property_readonly("clients", [](const FormBox& f) { return f.get().clients; })
      .def_property_readonly("inputs", [](const FormBox& f) { return f.get().inputs; })
      .def_property_readonly("outputs", [](const FormBox& f) { return f.get().outputs; })
      .def_property_readonly("client_data", [](const FormBox& f) { return f.get().client_data; })
      .def_property_readonly("types",
                             [](const FormBox& f) {
                               py::dict d;
                               for (const auto& [name, t] : f.get().types)
                                 d[py::str(name)] = type_to_py(t);
                               return d;
                             })
      .def_property_readonly("num_stages", [](const FormBox& f) { return f.get().stages.size(); })
      .def("stage", &stage_to_py, py::arg("index"),
           "Stage `index` as a dict: server_prepare, client_work, server_update (each "
           "(program, inputs, outputs)), broadcast, client_data, state_in, state_out, "
           "aggregations ((client_value, kind, weight, server_value) each).")
      .def("server_input_names", [](const FormBox& f) { return server_input_names(f.get()); });

  m.def(
      "export_mapreduce_form",
      [](const ProgramBox& p, std::optional<std::vector<std::string>> inputs,
         std::optional<std::vector<std::string>> outputs) {
        MapReduceForm form;
        {
          py::gil_scoped_release release;
          if (inputs || outputs)
            form = mapreduce_form(p.get(), FormNames{inputs.value_or(std::vector<std::string>{}),
                                                     outputs.value_or(std::vector<std::string>{})});
          else
            form = mapreduce_form(p.get());
        }
        return FormBox{std::make_shared<const MapReduceForm>(std::move(form))};
      },
      py::arg("program"), py::arg("input_names") = py::none(), py::arg("output_names") = py::none(),
      "drx::mapreduce_form, with the program's inputs and outputs named when names are given.");
  m.def(
      "export_run_mapreduce_form",
      [](const FormBox& f, py::handle inputs) {
        const std::vector<Array> in = arrays_from_py(inputs, "run_mapreduce_form");
        std::vector<Array> out;
        {
          py::gil_scoped_release release;
          out = run_mapreduce_form(f.get(), in);
        }
        return arrays_to_numpy(out, in);
      },
      py::arg("form"), py::arg("inputs"),
      "drx::run_mapreduce_form: the form's parts run in this process, clients in isolation.");
  m.def(
      "export_write_mapreduce_plan",
      [](const FormBox& f, const std::string& dir, bool stablehlo) {
        MapReducePlanOptions o;
        o.stablehlo = stablehlo;
        py::gil_scoped_release release;
        write_mapreduce_plan(f.get(), dir, o);
      },
      py::arg("form"), py::arg("dir"), py::arg("stablehlo") = false,
      "drx::write_mapreduce_plan: plan.json and the part files in dir.");
  m.def(
      "export_read_mapreduce_plan",
      [](const std::string& path) {
        MapReduceForm form;
        {
          py::gil_scoped_release release;
          form = read_mapreduce_plan(path);
        }
        return FormBox{std::make_shared<const MapReduceForm>(std::move(form))};
      },
      py::arg("path"), "drx::read_mapreduce_plan: the form of plan.json at path.");

  py::class_<Aggregator>(m, "export_StageAggregator",
                         "drx::StageAggregator: one stage's client outputs folded in client order "
                         "in the canonical tree.")
      .def(py::init<FormBox, size_t>(), py::arg("form"), py::arg("stage"))
      .def_property_readonly("reads", &Aggregator::reads)
      .def_property_readonly("clients_added", &Aggregator::clients_added)
      .def("add", &Aggregator::add, py::arg("client"), py::arg("values"),
           "Client `client`'s values of `reads`, in that order (clients 0, 1, 2, ...).")
      .def("add_outputs", &Aggregator::add_outputs, py::arg("client"), py::arg("outputs"),
           "Client `client`'s whole client_work outputs.")
      .def("finish", &Aggregator::finish, "The aggregates, in the stage's aggregations order.");
}

}  // namespace drx::python
