// drx::Value (a traced array) and the array ops on it. The Python package wraps a Value in
// its Tracer class, which gives it Python's operators, weak typing of Python numbers and
// NumPy's indexing; here each op is its C++ function.
#include <pybind11/stl.h>

#include "drx/ops/op_table.h"
#include "python/src/bindings.h"

namespace drx::python {
namespace {

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

DType dtype_arg(const std::string& name) { return dtype_from_name(name); }

using Unary = Value (*)(const Value&);
using Binary = Value (*)(const Value&, const Value&);

void bind_unary(py::module_& m) {
  const std::pair<const char*, Unary> ops[] = {
      {"neg", &neg},
      {"exp", &exp},
      {"log", &log},
      {"log1p", &log1p},
      {"tanh", &tanh},
      {"logistic", &logistic},
      {"sqrt", &sqrt},
      {"rsqrt", &rsqrt},
      {"abs", &abs},
      {"sign", &sign},
      {"sin", &sin},
      {"cos", &cos},
      {"erf", &erf},
      {"erf_inv", &erf_inv},
      {"square", &square},
      {"relu", &relu},
      {"cbrt", &cbrt},
      {"is_finite", &is_finite},
      {"floor", &floor},
      {"ceil", &ceil},
      {"round", static_cast<Unary>(&round)},
      {"sigmoid", &sigmoid},
      {"softplus", &softplus},
      {"log_sigmoid", &log_sigmoid},
      {"bitwise_not", &bitwise_not},
      {"stop_gradient", &stop_gradient},
      {"zeros_like", &zeros_like},
      {"ones_like", &ones_like},
  };
  for (const auto& [name, fn] : ops) m.def(name, fn, py::arg("x"), op_doc(name).c_str());
}

void bind_binary(py::module_& m) {
  const std::pair<const char*, Binary> ops[] = {
      {"add", &add},
      {"sub", &sub},
      {"mul", &mul},
      {"div", &div},
      {"pow", static_cast<Binary>(&pow)},
      {"maximum", static_cast<Binary>(&maximum)},
      {"minimum", static_cast<Binary>(&minimum)},
      {"remainder", &remainder},
      {"less", &less},
      {"less_equal", &less_equal},
      {"greater", &greater},
      {"greater_equal", &greater_equal},
      {"equal", &equal},
      {"not_equal", &not_equal},
      {"bitwise_and", &bitwise_and},
      {"bitwise_or", &bitwise_or},
      {"bitwise_xor", &bitwise_xor},
      {"shift_left", &shift_left},
      {"shift_right_logical", &shift_right_logical},
      {"shift_right_arithmetic", &shift_right_arithmetic},
  };
  for (const auto& [name, fn] : ops)
    m.def(name, fn, py::arg("a"), py::arg("b"), op_doc(name).c_str());
}

using Axes = std::optional<std::vector<int64_t>>;
using ReduceAll = Value (*)(const Value&);
using ReduceAlong = Value (*)(const Value&, const std::vector<int64_t>&, bool);

// A reduction over all axes (axes=None) or the listed ones, as NumPy's axis= and keepdims=.
template <ReduceAll All, ReduceAlong Along>
void def_reduction(py::module_& m, const char* name) {
  m.def(
      name,
      [](const Value& x, const Axes& axes, bool keepdims) {
        if (axes) return Along(x, *axes, keepdims);
        if (!keepdims) return All(x);
        std::vector<int64_t> every(static_cast<size_t>(x.ndim()));
        for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int64_t>(i);
        return Along(x, every, true);
      },
      py::arg("x"), py::arg("axes") = py::none(), py::arg("keepdims") = false,
      op_doc(name).c_str());
}

}  // namespace

std::string op_doc(const char* name) {
  const OpInfo* op = find_public_op(name);
  return op ? op->qualified_name() + op->signature + "\n\n" + op->doc : "";
}

void bind_values(py::module_& m) {
  py::class_<Value>(m, "Value", "A traced array: a variable of the program being traced.")
      .def_property_readonly("shape", [](const Value& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("dtype",
                             [](const Value& v) { return std::string(dtype_name(v.dtype())); })
      .def_property_readonly("ndim", &Value::ndim)
      .def_property_readonly("size", &Value::size)
      .def_property_readonly("placement", &Value::placement)
      .def("__repr__", [](const Value& v) {
        return "Traced<" + std::string(dtype_name(v.dtype())) + shape_str(v.shape()) +
               (v.placement().empty() ? "" : "@" + v.placement()) + ">";
      });

  bind_unary(m);
  bind_binary(m);
  m.def("constant", &constant, py::arg("value"), "An Array as a constant of the current trace.");
  m.def(
      "scalar_like", [](const Value& x, double v) { return scalar_like(x, v); }, py::arg("x"),
      py::arg("value"), "A scalar of x's dtype: how a Python number meets a traced array.");
  m.def(
      "fill",
      [](const Shape& shape, double v, const std::string& dtype) {
        return fill(shape, v, dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("value"), py::arg("dtype"));
  m.def(
      "iota",
      [](const Shape& shape, int64_t dimension, const std::string& dtype) {
        return iota(shape, dimension, dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dimension"), py::arg("dtype"));
  m.def(
      "astype",
      [](const Value& x, const std::string& dtype) { return astype(x, dtype_arg(dtype)); },
      py::arg("x"), py::arg("dtype"));
  m.def("where", &where, py::arg("cond"), py::arg("a"), py::arg("b"));
  m.def(
      "gelu", [](const Value& x, bool approximate) { return gelu(x, approximate); }, py::arg("x"),
      py::arg("approximate") = false);

  def_reduction<&sum, &sum>(m, "sum");
  def_reduction<&mean, &mean>(m, "mean");
  def_reduction<&max, &max>(m, "max");
  def_reduction<&min, &min>(m, "min");
  m.def("logsumexp", &logsumexp, py::arg("x"), py::arg("axes"), py::arg("keepdims") = false);
  m.def("softmax", &softmax, py::arg("x"), py::arg("axis") = -1);
  m.def("log_softmax", &log_softmax, py::arg("x"), py::arg("axis") = -1);
  m.def("argmax", &argmax, py::arg("x"), py::arg("axis"), py::arg("keepdims") = false);
  m.def("argmin", &argmin, py::arg("x"), py::arg("axis"), py::arg("keepdims") = false);
  m.def("cumsum", &cumsum, py::arg("x"), py::arg("axis"), py::arg("reverse") = false);
  m.def("sort", &sort, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false);
  m.def("argsort", &argsort, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false);

  m.def("matmul", static_cast<Value (*)(const Value&, const Value&)>(&matmul), py::arg("a"),
        py::arg("b"));
  m.def(
      "dot_general",
      [](const Value& lhs, const Value& rhs, std::vector<int64_t> lhs_contracting,
         std::vector<int64_t> rhs_contracting, std::vector<int64_t> lhs_batch,
         std::vector<int64_t> rhs_batch, std::optional<std::string> preferred) {
        DotDims d{std::move(lhs_contracting), std::move(rhs_contracting), std::move(lhs_batch),
                  std::move(rhs_batch)};
        if (preferred) d.preferred_element_type = dtype_arg(*preferred);
        return dot_general(lhs, rhs, d);
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("lhs_contracting"), py::arg("rhs_contracting"),
      py::arg("lhs_batch"), py::arg("rhs_batch"), py::arg("preferred_element_type") = py::none());

  m.def("reshape", &reshape, py::arg("x"), py::arg("shape"));
  m.def("transpose", &transpose, py::arg("x"), py::arg("perm"));
  m.def("broadcast_to", &broadcast_to, py::arg("x"), py::arg("shape"));
  m.def("broadcast_in_dim", &broadcast_in_dim, py::arg("x"), py::arg("shape"), py::arg("dims"));
  m.def("expand_dims", &expand_dims, py::arg("x"), py::arg("axis"));
  m.def("squeeze", &squeeze, py::arg("x"), py::arg("axis"));
  m.def("concatenate", &concatenate, py::arg("xs"), py::arg("axis"));
  m.def("slice", &slice, py::arg("x"), py::arg("starts"), py::arg("stops"));
  m.def("reverse", &reverse, py::arg("x"), py::arg("dims"));
  m.def(
      "pad",
      [](const Value& x, const Value& v, const std::vector<int64_t>& low,
         const std::vector<int64_t>& high,
         const std::vector<int64_t>& interior) { return pad(x, v, low, high, interior); },
      py::arg("x"), py::arg("value"), py::arg("low"), py::arg("high"), py::arg("interior"));
  m.def("take", &take, py::arg("x"), py::arg("indices"), py::arg("axis") = 0);
  m.def("scatter", &scatter, py::arg("x"), py::arg("indices"), py::arg("updates"),
        py::arg("axis") = 0);
  m.def("scatter_add", &scatter_add, py::arg("x"), py::arg("indices"), py::arg("updates"),
        py::arg("axis") = 0);
  m.def("dynamic_slice", &dynamic_slice, py::arg("x"), py::arg("start"), py::arg("sizes"));
  m.def("dynamic_update_slice", &dynamic_update_slice, py::arg("x"), py::arg("update"),
        py::arg("start"));
  m.def(
      "one_hot",
      [](const Value& labels, int64_t n, const std::string& dtype) {
        return one_hot(labels, n, dtype_arg(dtype));
      },
      py::arg("labels"), py::arg("n"), py::arg("dtype") = "f32");
  m.def(
      "public_ops",
      [] {
        py::list out;
        for (const OpInfo& op : public_ops())
          out.append(py::make_tuple(op.qualified_name(), op.signature, op.doc));
        return out;
      },
      "Every public C++ op: (qualified name, signature, doc), as the public-op table lists them.");
  m.def(
      "in_trace", [] { return current_trace() != nullptr; },
      "Whether a trace is open (inside jit, grad, vmap, map_fn ...).");
}

}  // namespace drx::python
