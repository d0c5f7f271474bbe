// Transformations, jit and DrJAX's placements for Python functions.
//
// The Python package flattens each positional argument (a pytree) into a list of leaves; a
// function crosses into C++ as an Fn whose TreeFn takes one Tree per positional argument (the
// list of its leaves) and returns the list of its result's leaves. Python keeps the tree
// structures and rebuilds them around each call.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <sstream>

#include "drx/core/program_text.h"
#include "drx/exec/blas_threads.h"
#include "drx/trace/program_of.h"
#include "python/src/bindings.h"

namespace drx::python {

PyObject* drx_error_type = nullptr;

py::object leaf_to_py(const Tree& leaf) {
  if (leaf.kind() == Tree::Kind::value) return py::cast(leaf.value());
  return py::cast(leaf.array());
}

Tree py_to_leaf(py::handle h, const char* what) {
  if (py::isinstance<Value>(h)) return Tree(h.cast<Value>());
  if (py::isinstance<Array>(h)) return Tree(h.cast<Array>());
  throw Error(std::string(what) + ": expected a traced array or an array as a leaf, got " +
              py::str(py::type::of(h)).cast<std::string>());
}

py::list leaves_to_py(const Tree& list) {
  py::list out;
  for (const Tree& leaf : tree_leaves(list)) out.append(leaf_to_py(leaf));
  return out;
}

Tree py_to_leaves(py::handle seq, const char* what) {
  std::vector<Tree> leaves;
  for (py::handle h : seq) leaves.push_back(py_to_leaf(h, what));
  return Tree::list(std::move(leaves));
}

namespace {

// One Tree (a list of leaves) per positional argument.
std::vector<Tree> args_from_py(py::handle args, const char* what) {
  std::vector<Tree> out;
  for (py::handle a : args) out.push_back(py_to_leaves(a, what));
  return out;
}

// A Python object held across threads and calls: every copy and the last release take the GIL.
struct Held {
  explicit Held(py::object o)
      : obj(new py::object(std::move(o)), [](py::object* p) {
          py::gil_scoped_acquire gil;
          delete p;
        }) {}
  std::shared_ptr<py::object> obj;
};

Axes axes_from_py(py::handle h) {
  Axes out;
  for (py::handle a : h)
    out.push_back(a.is_none() ? std::nullopt : std::optional<int64_t>(a.cast<int64_t>()));
  return out;
}

}  // namespace

py::object Fn::call(py::object args) const {
  const std::vector<Tree> in = args_from_py(args, "drx function call");
  Tree out;
  {
    // Traced Python code takes the GIL back (tree_fn); compiled code runs without it.
    py::gil_scoped_release release;
    out = fn(in);
  }
  return tree_to_nested(out, false);
}

TreeFn tree_fn(py::function f) {
  Held held(std::move(f));
  return [held](const std::vector<Tree>& args) -> Tree {
    py::gil_scoped_acquire gil;
    py::list in;
    for (const Tree& a : args) in.append(a.is_leaf() ? leaf_to_py(a) : py::object(leaves_to_py(a)));
    py::object out;
    try {
      out = (*held.obj)(in);
    } catch (py::error_already_set& e) {
      if (e.type().ptr() == drx_error_type) throw Error(py::str(e.value()).cast<std::string>());
      throw;
    }
    return py_to_leaves(out, "the result of a traced function");
  };
}

void bind_transforms(py::module_& m) {
  py::class_<Fn>(m, "Fn", "A function over lists of leaves, as drx's transformations take it.")
      .def("__call__", &Fn::call, py::arg("args"));
  m.def(
      "function", [](py::function f) { return Fn{tree_fn(std::move(f))}; }, py::arg("f"),
      "Wraps f(list of argument leaf lists) -> list of result leaves.");

  m.def(
      "grad",
      [](const Fn& f, std::vector<int> argnums, bool with_value, bool allow_int) {
        GradSpec spec;
        spec.argnums = std::move(argnums);
        spec.with_value = with_value;
        spec.as_list = true;
        spec.options.allow_int = allow_int;
        return Fn{grad_fn(f.fn, spec)};
      },
      py::arg("f"), py::arg("argnums"), py::arg("with_value"), py::arg("allow_int") = false);
  m.def(
      "vmap",
      [](const Fn& f, py::object in_axes, py::object out_axes) {
        return Fn{vmap_fn(f.fn, axes_from_py(in_axes), axes_from_py(out_axes))};
      },
      py::arg("f"), py::arg("in_axes"), py::arg("out_axes"));
  m.def(
      "jvp",
      [](const Fn& f, py::object primals, py::object tangents) {
        return tree_to_nested(
            jvp_call(f.fn, args_from_py(primals, "drx.jvp"), args_from_py(tangents, "drx.jvp")),
            false);
      },
      py::arg("f"), py::arg("primals"), py::arg("tangents"));
  m.def(
      "vjp",
      [](const Fn& f, py::object primals) {
        VjpResult r = vjp_call(f.fn, args_from_py(primals, "drx.vjp"));
        auto pullback = r.pullback;
        py::cpp_function pb([pullback](py::object cotangent) {
          std::vector<Tree> cts = pullback(py_to_leaves(cotangent, "a vjp pullback"));
          py::list out;
          for (const Tree& c : cts) out.append(tree_to_nested(c, false));
          return out;
        });
        return py::make_tuple(tree_to_nested(r.outputs, false), pb);
      },
      py::arg("f"), py::arg("primals"));

  py::class_<JitCache, std::shared_ptr<JitCache>>(m, "JitCache",
                                                  "One traced and compiled program per signature.")
      .def(py::init([](const Fn& f, std::optional<MeshArg> mesh) {
             JitOptions options;
             if (mesh) options.mesh = mesh_from_arg(*mesh);
             return std::make_shared<JitCache>(f.fn, options);
           }),
           py::arg("f"), py::arg("mesh") = py::none())
      .def(
          "__call__",
          [](JitCache& c, py::object args) {
            const std::vector<Tree> in = args_from_py(args, "drx.jit");
            Tree out;
            {
              py::gil_scoped_release release;  // as in Fn::call
              out = c.call(in);
            }
            // Results as NumPy arrays here: one Python call less per leaf.
            py::list leaves;
            for (const Tree& leaf : tree_leaves(unalias(out, Tree::list(in))))
              leaves.append(leaf.kind() == Tree::Kind::array ? array_to_numpy(leaf.array())
                                                             : leaf_to_py(leaf));
            return leaves;
          },
          py::arg("args"), "The result's leaves: NumPy arrays, or traced Values inside a trace.")
      .def_property_readonly("trace_count", &JitCache::trace_count)
      .def_property_readonly("cache_size", &JitCache::cache_size)
      .def("last_program", [](const JitCache& c) { return to_string(c.last_program()); });

  m.def(
      "program_text",
      [](const Fn& f, py::object examples) {
        return to_string(
            detail::trace_examples(f.fn, args_from_py(examples, "drx.make_program"), "main"));
      },
      py::arg("f"), py::arg("examples"), "The program f traces to on these example leaves.");

  // DrJAX's placements.
  m.def(
      "program",
      [](const std::vector<std::pair<std::string, int64_t>>& placements, const Fn& f,
         std::vector<std::string> in_placements) {
        return Fn{program_fn(placements, f.fn, std::move(in_placements))};
      },
      py::arg("placements"), py::arg("f"), py::arg("in_placements"));
  m.def(
      "map_fn",
      [](const Fn& f, py::object args) {
        return tree_to_nested(map_fn_trees(f.fn, args_from_py(args, "drx.map_fn")), false);
      },
      py::arg("f"), py::arg("args"));
  m.def(
      "broadcast",
      [](const Value& x, std::optional<std::string> placement) {
        return placement ? broadcast(x, *placement) : broadcast(x);
      },
      py::arg("x"), py::arg("placement") = py::none());
  m.def("reduce_sum", static_cast<Value (*)(const Value&)>(&reduce_sum), py::arg("x"));
  m.def("reduce_mean", static_cast<Value (*)(const Value&)>(&reduce_mean), py::arg("x"));
  m.def("reduce_max", static_cast<Value (*)(const Value&)>(&reduce_max), py::arg("x"));
  m.def("reduce_min", static_cast<Value (*)(const Value&)>(&reduce_min), py::arg("x"));
  m.def("reduce_weighted_mean",
        static_cast<Value (*)(const Value&, const Value&)>(&reduce_weighted_mean), py::arg("x"),
        py::arg("w"));
  // lax's loops. The body crosses as one TreeFn over (carry leaves, x leaves) returning the
  // new carry's leaves followed by y's.
  m.def(
      "scan",
      [](py::function body, py::object init, py::object xs, int64_t length, bool reverse,
         bool remat, int64_t checkpoint_every) {
        const Tree init_leaves = py_to_leaves(init, "drx.lax.scan");
        const size_t num_carry = init_leaves.size();
        TreeFn f = tree_fn(std::move(body));
        ScanFn step = [f, num_carry](const Tree& carry, const Tree& x) {
          const Tree out = f({carry, x});
          if (out.size() < num_carry)
            throw Error("drx.lax.scan: the body returned " + std::to_string(out.size()) +
                        " leaves, fewer than the carry's " + std::to_string(num_carry));
          std::vector<Tree> c(out.children().begin(), out.children().begin() + num_carry);
          std::vector<Tree> y(out.children().begin() + num_carry, out.children().end());
          return std::pair<Tree, Tree>{Tree::list(std::move(c)), Tree::list(std::move(y))};
        };
        ScanOptions options;
        options.length = length;
        options.reverse = reverse;
        options.remat = remat;
        options.checkpoint_every = checkpoint_every;
        auto [carry, ys] = scan(step, init_leaves, py_to_leaves(xs, "drx.lax.scan"), options);
        return py::make_tuple(leaves_to_py(carry), leaves_to_py(ys));
      },
      py::arg("body"), py::arg("init"), py::arg("xs"), py::arg("length"), py::arg("reverse"),
      py::arg("remat"), py::arg("checkpoint_every"));
  m.def(
      "fori_loop",
      [](int64_t lo, int64_t hi, py::function body, py::object init) {
        TreeFn f = tree_fn(std::move(body));
        ForiBody step = [f](const Value& i, const Tree& carry) { return f({Tree(i), carry}); };
        return leaves_to_py(fori_loop(lo, hi, step, py_to_leaves(init, "drx.lax.fori_loop")));
      },
      py::arg("lower"), py::arg("upper"), py::arg("body"), py::arg("init"));
  m.def(
      "cond",
      [](const Value& pred, py::function true_fn, py::function false_fn, py::object operands) {
        TreeFn t = tree_fn(std::move(true_fn)), f = tree_fn(std::move(false_fn));
        BranchFn on_true = [t](const Tree& ops) { return t({ops}); };
        BranchFn on_false = [f](const Tree& ops) { return f({ops}); };
        return leaves_to_py(cond(pred, on_true, on_false, py_to_leaves(operands, "drx.lax.cond")));
      },
      py::arg("pred"), py::arg("true_fn"), py::arg("false_fn"), py::arg("operands"));
  m.def(
      "while_loop",
      [](py::function cond_fn, py::function body_fn, py::object init) {
        TreeFn c = tree_fn(std::move(cond_fn)), b = tree_fn(std::move(body_fn));
        LoopCondFn test = [c](const Tree& carry) {
          const Tree out = c({carry});
          if (out.size() != 1 || out.children()[0].kind() != Tree::Kind::value)
            throw Error("drx.lax.while_loop: cond_fun must return one boolean scalar");
          return out.children()[0].value();
        };
        LoopBodyFn step = [b](const Tree& carry) { return b({carry}); };
        return leaves_to_py(while_loop(test, step, py_to_leaves(init, "drx.lax.while_loop")));
      },
      py::arg("cond_fn"), py::arg("body_fn"), py::arg("init"));
  m.def("placement_softmax", &placement_softmax, py::arg("x"));
  m.def("placement_normalize", &placement_normalize, py::arg("w"));
  m.def("num_threads", &num_threads, "drx's worker threads (DRX_NUM_THREADS, else the cores).");
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Sets drx's worker threads for later calls.");
  m.def(
      "request_mesh",
      [](const MeshArg& mesh, const std::string& op) {
        detail::request_mesh(mesh_from_arg(mesh), op);
      },
      py::arg("mesh"), py::arg("op"),
      "Asks the jit being traced to compile for the mesh with these axes (DrJAX's mesh=).");
  m.def("client_index", &client_index);
  m.def("set_blas_thread_control", &set_blas_thread_control, py::arg("on"),
        "Lets drx keep OpenBLAS on one thread (off by default in Python: NumPy shares it).");
}

}  // namespace drx::python
