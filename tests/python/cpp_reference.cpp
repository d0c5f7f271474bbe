// _drx_cpp_reference: the C++ versions of the programs tests/python/test_cpp_parity.py writes
// in Python with the drx package, for bitwise comparison, and W1 (bench/w1_model.h) driven
// from C++ for bench/python_fedavg_w1.py. Each program is written with drx's C++ API (the
// same ops in the same order as its Python twin), run on copies of NumPy arrays, its results
// handed back as NumPy copies.
//
// This module links a static copy of libdrx of its own (its libdrx symbols hidden), so its
// globals (the BLAS-thread policy, the thread pool, the jit caches) are separate from
// drx._drx's: set_blas_thread_control here sets this copy's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/w1_model.h"
#include "drx/drx.h"

namespace py = pybind11;
using drx::Array;
using drx::Tree;
using drx::Value;

namespace {

// ---- NumPy <-> drx::Array, copies ------------------------------------------------------------
drx::DType dtype_of(const py::array& a) {
  const char kind = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  if (kind == 'f' && size == 4) return drx::f32;
  if (kind == 'f' && size == 8) return drx::f64;
  if (kind == 'i' && size == 4) return drx::i32;
  if (kind == 'i' && size == 8) return drx::i64;
  throw py::type_error(
      "_drx_cpp_reference: expected a float32, float64, int32 or int64 array, "
      "got dtype " +
      py::str(py::object(a.dtype())).cast<std::string>());
}

Array to_array(const py::handle& h) {
  py::array a = py::array::ensure(h, py::array::c_style);
  if (!a) throw py::type_error("_drx_cpp_reference: expected an array");
  const drx::DType dt = dtype_of(a);
  Array out(dt, drx::Shape(a.shape(), a.shape() + a.ndim()));
  if (out.nbytes()) std::memcpy(out.raw(), a.data(), out.nbytes());
  return out;
}

py::array to_numpy(const Array& a) {
  const char* name = nullptr;
  switch (a.dtype()) {
    case drx::DType::f32:
      name = "float32";
      break;
    case drx::DType::f64:
      name = "float64";
      break;
    case drx::DType::i32:
      name = "int32";
      break;
    case drx::DType::i64:
      name = "int64";
      break;
    default:
      throw py::type_error("_drx_cpp_reference: unexpected result dtype " +
                           std::string(drx::dtype_name(a.dtype())));
  }
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  py::array out{py::dtype(name), shape};
  if (a.nbytes()) std::memcpy(out.mutable_data(), a.raw(), a.nbytes());
  return out;
}

Tree params_from_dict(const py::dict& d) {
  std::vector<std::pair<std::string, Tree>> items;
  for (auto [k, v] : d) items.emplace_back(k.cast<std::string>(), Tree(to_array(v)));
  return Tree::dict(std::move(items));
}

py::dict dict_from_params(const Tree& t) {
  py::dict d;
  for (size_t i = 0; i < t.size(); ++i) d[py::str(t.keys()[i])] = to_numpy(t.children()[i].array());
  return d;
}

// The text of the last program a function of this module compiled (for comparing with
// drx.make_program's when bits differ).
std::string g_last_program;

template <class J>
void remember(const J& jitted) {
  g_last_program = drx::to_string(jitted.last_program());
}

// ---- FedAvg on linear regression (examples/python/fedavg_round.py) -----------------------------
constexpr double kLr = 0.1;
constexpr int kLocalSteps = 5;

// loss(w, x, y) = ((x @ w - y) ** 2).mean()
Value loss(Value w, Value x, Value y) { return drx::mean(drx::pow(drx::matmul(x, w) - y, 2.0)); }

// for _ in range(5): w = w - lr * drx.grad(loss)(w, x, y)
Value client_update(Value w, Value x, Value y) {
  auto step = [&](const Value&, const drx::Tree& v) {
    return drx::Tree(v.value() - kLr * drx::grad(loss)(v.value(), x, y));
  };
  return drx::fori_loop(0, kLocalSteps, step, drx::Tree(w)).value();
}

auto fedavg_round_program(int64_t clients) {
  return drx::program({{"clients", clients}}, [](Value w, Value xs, Value ys) {
    Value ws = drx::map_fn(client_update, drx::broadcast(w), xs, ys);
    return drx::reduce_mean(ws);
  });
}

auto federated_loss_program(int64_t clients) {
  return drx::program({{"clients", clients}}, [](Value w, Value xs, Value ys) {
    return drx::reduce_mean(drx::map_fn(loss, drx::broadcast(w), xs, ys));
  });
}

py::array fedavg_round(const py::handle& w, const py::handle& xs, const py::handle& ys) {
  const Array x = to_array(xs);
  auto round = drx::jit(fedavg_round_program(x.shape()[0]));
  const Array out = round(to_array(w), x, to_array(ys));
  remember(round);
  return to_numpy(out);
}

py::array federated_loss(const py::handle& w, const py::handle& xs, const py::handle& ys) {
  const Array x = to_array(xs);
  auto f = drx::jit(federated_loss_program(x.shape()[0]));
  const Array out = f(to_array(w), x, to_array(ys));
  remember(f);
  return to_numpy(out);
}

// d federated_loss(w0 + s (round(w0) - w0)) / d s. s is a Python number on the Python side (a
// weakly typed f64 scalar, converted to w0's dtype where they differ).
py::array fedavg_hypergradient(double s, const py::handle& w0, const py::handle& xs,
                               const py::handle& ys) {
  const Array x = to_array(xs);
  const int64_t clients = x.shape()[0];
  auto round = fedavg_round_program(clients);
  auto fed_loss = federated_loss_program(clients);
  auto loss_after = [round, fed_loss](Value s, Value w0, Value xs, Value ys) {
    Value w1 = round(w0, xs, ys);
    Value sw = s.dtype() == w0.dtype() ? s : drx::astype(s, w0.dtype());
    return fed_loss(w0 + sw * (w1 - w0), xs, ys);
  };
  auto h = drx::jit(drx::grad(loss_after));
  const Array out = h(drx::full({}, s, drx::f64), to_array(w0), x, to_array(ys));
  remember(h);
  return to_numpy(out);
}

// ---- local steps as a scan -------------------------------------------------------------------
// x [steps * batch, features] -> [steps, batch, features]; y likewise; one step per batch.
Value client_update_scan(Value w, Value x, Value y, int64_t steps, int64_t batch) {
  const int64_t features = x.shape()[1];
  Tree per_step = Tree::list(
      {Tree(drx::reshape(x, {steps, batch, features})), Tree(drx::reshape(y, {steps, batch}))});
  auto step = [](const Tree& c, const Tree& b) -> std::pair<Tree, Tree> {
    Value wc = c.value();
    return {Tree(wc - kLr * drx::grad(loss)(wc, b[0].value(), b[1].value())), Tree()};
  };
  return drx::scan(step, Tree(w), per_step).first.value();
}

auto scan_round_program(int64_t clients, int64_t steps, int64_t batch) {
  return drx::program({{"clients", clients}}, [steps, batch](Value w, Value xs, Value ys) {
    Value ws =
        drx::map_fn([steps, batch](Value wc, Value x,
                                   Value y) { return client_update_scan(wc, x, y, steps, batch); },
                    drx::broadcast(w), xs, ys);
    return drx::reduce_mean(ws);
  });
}

py::array scan_fedavg_round(const py::handle& w, const py::handle& xs, const py::handle& ys,
                            int64_t steps, int64_t batch) {
  const Array x = to_array(xs);
  auto round = drx::jit(scan_round_program(x.shape()[0], steps, batch));
  const Array out = round(to_array(w), x, to_array(ys));
  remember(round);
  return to_numpy(out);
}

// d federated_loss(scan_round(w)) / d w.
py::array scan_fedavg_grad(const py::handle& w, const py::handle& xs, const py::handle& ys,
                           int64_t steps, int64_t batch) {
  const Array x = to_array(xs);
  auto round = scan_round_program(x.shape()[0], steps, batch);
  auto fed_loss = federated_loss_program(x.shape()[0]);
  auto f = [round, fed_loss](Value w, Value xs, Value ys) {
    return fed_loss(round(w, xs, ys), xs, ys);
  };
  auto g = drx::jit(drx::grad(f));
  const Array out = g(to_array(w), x, to_array(ys));
  remember(g);
  return to_numpy(out);
}

// ---- hierarchical FedAvg: placements {"groups": G, "clients": C}
// --------------------------------- tests/python/test_core.py's two-level program: each client
// contributes a * (x * x).sum().
auto two_level_program(int64_t groups, int64_t clients) {
  return drx::program(
      {{"groups", groups}, {"clients", clients}},
      [](Value w, Value xs) {
        auto group = [](Value wg, Value xg) {
          Value per_client = drx::map_fn([](Value a, Value x) { return a * drx::sum(x * x); },
                                         drx::broadcast(wg, "clients"), xg);
          return drx::reduce_mean(per_client);
        };
        return drx::reduce_mean(drx::map_fn(group, drx::broadcast(w, "groups"), xs));
      },
      {"", "groups.clients"});
}

py::array two_level(const py::handle& w, const py::handle& xs) {
  const Array x = to_array(xs);
  auto f = drx::jit(two_level_program(x.shape()[0], x.shape()[1]));
  const Array out = f(to_array(w), x);
  remember(f);
  return to_numpy(out);
}

// grad of (two_level(w, xs) ** 2.0).sum() with respect to w.
py::array two_level_grad(const py::handle& w, const py::handle& xs) {
  const Array x = to_array(xs);
  auto prog = two_level_program(x.shape()[0], x.shape()[1]);
  auto f = [prog](Value w, Value xs) { return drx::sum(drx::pow(prog(w, xs), 2.0)); };
  auto g = drx::jit(drx::grad(f));
  const Array out = g(to_array(w), x);
  remember(g);
  return to_numpy(out);
}

// Hierarchical FedAvg training: clients run client_update from their group's model, each group
// averages its clients, the server averages the groups.
auto hier_round_program(int64_t groups, int64_t clients) {
  return drx::program(
      {{"groups", groups}, {"clients", clients}},
      [](Value w, Value xs, Value ys) {
        auto group = [](Value wg, Value xg, Value yg) {
          Value ws = drx::map_fn(client_update, drx::broadcast(wg, "clients"), xg, yg);
          return drx::reduce_mean(ws);
        };
        return drx::reduce_mean(drx::map_fn(group, drx::broadcast(w, "groups"), xs, ys));
      },
      {"", "groups.clients", "groups.clients"});
}

auto hier_loss_program(int64_t groups, int64_t clients) {
  return drx::program(
      {{"groups", groups}, {"clients", clients}},
      [](Value w, Value xs, Value ys) {
        auto group = [](Value wg, Value xg, Value yg) {
          return drx::reduce_mean(drx::map_fn(loss, drx::broadcast(wg, "clients"), xg, yg));
        };
        return drx::reduce_mean(drx::map_fn(group, drx::broadcast(w, "groups"), xs, ys));
      },
      {"", "groups.clients", "groups.clients"});
}

py::array hier_round(const py::handle& w, const py::handle& xs, const py::handle& ys) {
  const Array x = to_array(xs);
  auto f = drx::jit(hier_round_program(x.shape()[0], x.shape()[1]));
  const Array out = f(to_array(w), x, to_array(ys));
  remember(f);
  return to_numpy(out);
}

// d hier_loss(hier_round(w)) / d w.
py::array hier_round_grad(const py::handle& w, const py::handle& xs, const py::handle& ys) {
  const Array x = to_array(xs);
  auto round = hier_round_program(x.shape()[0], x.shape()[1]);
  auto hloss = hier_loss_program(x.shape()[0], x.shape()[1]);
  auto f = [round, hloss](Value w, Value xs, Value ys) { return hloss(round(w, xs, ys), xs, ys); };
  auto g = drx::jit(drx::grad(f));
  const Array out = g(to_array(w), x, to_array(ys));
  remember(g);
  return to_numpy(out);
}

// ---- W1 (bench/w1_model.h), local steps as a scan -----------------------------------------------
auto w1_round_program(int64_t cohort, int64_t steps, int64_t batch) {
  return drx::program({{"clients", cohort}},
                      [steps, batch](Tree server, Value xs, Value ys) {
                        Tree clients = drx::map_fn(
                            [steps, batch](Tree p, Value x, Value y) {
                              return w1::local_train_scan(p, x, y, steps, batch);
                            },
                            drx::broadcast(server), xs, ys);
                        return drx::reduce_mean(clients);
                      },
                      {"", "clients", "clients"});
}

using W1Jitted = decltype(drx::jit(w1_round_program(1, 1, 1)));

// One jitted W1 round, called repeatedly: from Python (__call__) or in a C++ loop (time_rounds).
class W1Round {
 public:
  W1Round(int64_t cohort, int64_t steps, int64_t batch, int64_t hidden)
      : cohort_(cohort),
        steps_(steps),
        batch_(batch),
        hidden_(hidden),
        round_(drx::jit(w1_round_program(cohort, steps, batch))) {}

  py::dict call(const py::dict& params, const py::handle& xs, const py::handle& ys) {
    const Tree p = params_from_dict(params);
    const Array x = to_array(xs), y = to_array(ys);
    Tree out;
    {
      py::gil_scoped_release release;
      out = round_(p, x, y);
    }
    return dict_from_params(out);
  }

  // `rounds` rounds chained from params, each timed with std::chrono around the C++ call; the
  // final parameters are kept for final_params().
  std::vector<double> time_rounds(const py::dict& params, const py::handle& xs,
                                  const py::handle& ys, int64_t rounds) {
    Tree server = params_from_dict(params);
    const Array x = to_array(xs), y = to_array(ys);
    std::vector<double> seconds;
    {
      py::gil_scoped_release release;
      for (int64_t r = 0; r < rounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        server = round_(server, x, y);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    final_ = server;
    return seconds;
  }

  py::dict final_params() const {
    if (final_.kind() != Tree::Kind::dict)
      throw py::value_error("W1Round.final_params: call time_rounds first");
    return dict_from_params(final_);
  }

  int trace_count() const { return round_.trace_count(); }
  std::string program_text() const { return drx::to_string(round_.last_program()); }
  double flops() const { return w1::round_flops(cohort_, steps_, batch_, hidden_); }

 private:
  int64_t cohort_, steps_, batch_, hidden_;
  W1Jitted round_;
  Tree final_;
};

}  // namespace

PYBIND11_MODULE(_drx_cpp_reference, m) {
  m.doc() =
      "C++ versions (drx's C++ API) of the programs tests/python/test_cpp_parity.py writes in "
      "Python, and W1 driven from C++, for bitwise comparison and bench/python_fedavg_w1.py.";
  m.def("set_blas_thread_control", &drx::set_blas_thread_control, py::arg("on"),
        "This module's own copy of drx::set_blas_thread_control (drx._drx has its own).");
  m.def("blas_thread_control", &drx::blas_thread_control);
  m.def("num_threads", &drx::num_threads, "This module's copy of drx::num_threads().");
  m.def(
      "last_program_text", [] { return g_last_program; },
      "The program the last function of this module compiled, as drx's IR text.");

  m.def("fedavg_round", &fedavg_round, py::arg("w"), py::arg("xs"), py::arg("ys"));
  m.def("federated_loss", &federated_loss, py::arg("w"), py::arg("xs"), py::arg("ys"));
  m.def("fedavg_hypergradient", &fedavg_hypergradient, py::arg("s"), py::arg("w0"), py::arg("xs"),
        py::arg("ys"));
  m.def("scan_fedavg_round", &scan_fedavg_round, py::arg("w"), py::arg("xs"), py::arg("ys"),
        py::arg("steps"), py::arg("batch"));
  m.def("scan_fedavg_grad", &scan_fedavg_grad, py::arg("w"), py::arg("xs"), py::arg("ys"),
        py::arg("steps"), py::arg("batch"));
  m.def("two_level", &two_level, py::arg("w"), py::arg("xs"));
  m.def("two_level_grad", &two_level_grad, py::arg("w"), py::arg("xs"));
  m.def("hier_round", &hier_round, py::arg("w"), py::arg("xs"), py::arg("ys"));
  m.def("hier_round_grad", &hier_round_grad, py::arg("w"), py::arg("xs"), py::arg("ys"));

  m.attr("W1_LEARNING_RATE") = w1::kLearningRate;
  py::class_<W1Round>(m, "W1Round", "One FedAvg round of W1 (bench/w1_model.h), jitted once.")
      .def(py::init<int64_t, int64_t, int64_t, int64_t>(), py::arg("cohort"), py::arg("steps"),
           py::arg("batch"), py::arg("hidden"))
      .def("__call__", &W1Round::call, py::arg("params"), py::arg("xs"), py::arg("ys"))
      .def("time_rounds", &W1Round::time_rounds, py::arg("params"), py::arg("xs"), py::arg("ys"),
           py::arg("rounds"),
           "Runs `rounds` chained rounds from params in C++; returns each round's seconds.")
      .def("final_params", &W1Round::final_params,
           "The parameters after the last time_rounds call.")
      .def_property_readonly("trace_count", &W1Round::trace_count)
      .def_property_readonly("flops", &W1Round::flops)
      .def("program_text", &W1Round::program_text);
}
