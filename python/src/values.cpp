// drx::Value (a traced array) and the array ops on it. The Python package wraps a Value in
// its Tracer class, which gives it Python's operators, weak typing of Python numbers and
// NumPy's indexing; here each op is its C++ function.
#include <pybind11/stl.h>

#include <string>
#include <variant>

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
      {"expm1", &expm1},
      {"round_away", &round_away},
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
      {"atan2", &atan2},
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
      py::arg("shape"), py::arg("value"), py::arg("dtype"), op_doc("fill").c_str());
  m.def(
      "iota",
      [](const Shape& shape, int64_t dimension, const std::string& dtype) {
        return iota(shape, dimension, dtype_arg(dtype));
      },
      py::arg("shape"), py::arg("dimension"), py::arg("dtype"), op_doc("iota").c_str());
  m.def(
      "astype",
      [](const Value& x, const std::string& dtype) { return astype(x, dtype_arg(dtype)); },
      py::arg("x"), py::arg("dtype"), op_doc("astype").c_str());
  m.def("where", &where, py::arg("cond"), py::arg("a"), py::arg("b"), op_doc("where").c_str());
  m.def("clip", static_cast<Value (*)(const Value&, const Value&, const Value&)>(&clip),
        py::arg("x"), py::arg("lo"), py::arg("hi"), op_doc("clip").c_str());
  m.def("full_like", &full_like, py::arg("x"), py::arg("value"), op_doc("full_like").c_str());
  m.def(
      "arange", [](int64_t n, const std::string& dtype) { return arange(n, dtype_arg(dtype)); },
      py::arg("n"), py::arg("dtype") = "i32", op_doc("arange").c_str());
  m.def(
      "bitcast_convert",
      [](const Value& x, const std::string& dtype) { return bitcast_convert(x, dtype_arg(dtype)); },
      py::arg("x"), py::arg("dtype"), op_doc("bitcast_convert").c_str());
  m.def("move_axis", &move_axis, py::arg("x"), py::arg("source"), py::arg("destination"),
        op_doc("move_axis").c_str());
  m.def(
      "top_k",
      [](const Value& x, int64_t k) {
        TopK t = top_k(x, k);
        return py::make_tuple(t.values, t.indices);
      },
      py::arg("x"), py::arg("k"), op_doc("top_k").c_str());
  m.def("place", &place, py::arg("x"), py::arg("placement"), op_doc("place").c_str());
  m.def(
      "gelu", [](const Value& x, bool approximate) { return gelu(x, approximate); }, py::arg("x"),
      py::arg("approximate") = false, op_doc("gelu").c_str());

  def_reduction<&sum, &sum>(m, "sum");
  def_reduction<&mean, &mean>(m, "mean");
  def_reduction<&max, &max>(m, "max");
  def_reduction<&min, &min>(m, "min");
  def_reduction<&prod, &prod>(m, "prod");
  m.def(
      "var",
      [](const Value& x, const std::vector<int64_t>& axes, bool keepdims, int64_t ddof) {
        return var(x, axes, keepdims, ddof);
      },
      py::arg("x"), py::arg("axes"), py::arg("keepdims") = false, py::arg("ddof") = 0,
      op_doc("var").c_str());
  m.def(
      "std",
      [](const Value& x, const std::vector<int64_t>& axes, bool keepdims, int64_t ddof) {
        return drx::std(x, axes, keepdims, ddof);
      },
      py::arg("x"), py::arg("axes"), py::arg("keepdims") = false, py::arg("ddof") = 0,
      op_doc("std").c_str());
  m.def("einsum", &einsum, py::arg("subscripts"), py::arg("operands"), op_doc("einsum").c_str());
  // (lhs, rhs, out) dimension numbers, each [batch or out-feature, feature, spatial...].
  auto conv_dims = [](const char* op, const std::vector<std::vector<int64_t>>& dims) {
    if (dims.size() != 3) throw Error(std::string(op) + ": dimension numbers must be three lists");
    for (const auto& d : dims)
      if (d.size() < 2)
        throw Error(std::string(op) + ": each dimension-number list needs at least two entries");
    ConvDimensionNumbers n;
    n.lhs_batch = dims[0][0], n.lhs_feature = dims[0][1];
    n.lhs_spatial.assign(dims[0].begin() + 2, dims[0].end());
    n.rhs_out_feature = dims[1][0], n.rhs_in_feature = dims[1][1];
    n.rhs_spatial.assign(dims[1].begin() + 2, dims[1].end());
    n.out_batch = dims[2][0], n.out_feature = dims[2][1];
    n.out_spatial.assign(dims[2].begin() + 2, dims[2].end());
    return n;
  };
  m.def(
      "conv_general_dilated",
      [conv_dims](
          const Value& lhs, const Value& rhs, std::vector<int64_t> window_strides,
          std::vector<std::pair<int64_t, int64_t>> padding, std::vector<int64_t> lhs_dilation,
          std::vector<int64_t> rhs_dilation, std::vector<int64_t> window_reversal,
          std::optional<std::vector<std::vector<int64_t>>> dims, int64_t feature_group_count,
          int64_t batch_group_count, std::optional<std::string> preferred) {
        ConvParams c;
        c.window_strides = std::move(window_strides);
        c.padding = std::move(padding);
        c.lhs_dilation = std::move(lhs_dilation);
        c.rhs_dilation = std::move(rhs_dilation);
        c.window_reversal = std::move(window_reversal);
        if (dims) c.dims = conv_dims("conv_general_dilated", *dims);
        c.feature_group_count = feature_group_count;
        c.batch_group_count = batch_group_count;
        if (preferred) c.preferred_element_type = dtype_arg(*preferred);
        return conv_general_dilated(lhs, rhs, c);
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("window_strides"), py::arg("padding"),
      py::arg("lhs_dilation"), py::arg("rhs_dilation"), py::arg("window_reversal"), py::arg("dims"),
      py::arg("feature_group_count"), py::arg("batch_group_count"),
      py::arg("preferred_element_type"), op_doc("conv_general_dilated").c_str());
  m.def(
      "conv_transpose",
      [conv_dims](
          const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
          const std::variant<std::string, std::vector<std::pair<int64_t, int64_t>>>& padding,
          const std::vector<int64_t>& rhs_dilation, const std::vector<std::vector<int64_t>>& dims,
          bool transpose_kernel) {
        const ConvDimensionNumbers d = conv_dims("conv_transpose", dims);
        return std::visit(
            [&](const auto& pad) {
              return conv_transpose(lhs, rhs, strides, pad, rhs_dilation, d, transpose_kernel);
            },
            padding);
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("strides"), py::arg("padding"),
      py::arg("rhs_dilation"), py::arg("dims"), py::arg("transpose_kernel"),
      op_doc("conv_transpose").c_str());
  auto window_config = [](std::vector<int64_t> dimensions, std::vector<int64_t> strides,
                          std::vector<std::pair<int64_t, int64_t>> padding,
                          std::vector<int64_t> base_dilation,
                          std::vector<int64_t> window_dilation) {
    return WindowConfig{std::move(dimensions), std::move(strides), std::move(padding),
                        std::move(base_dilation), std::move(window_dilation)};
  };
  m.def(
      "reduce_window",
      [window_config](const Value& x, std::optional<Value> init, const std::string& body,
                      std::vector<int64_t> dimensions, std::vector<int64_t> strides,
                      std::vector<std::pair<int64_t, int64_t>> padding,
                      std::vector<int64_t> base_dilation, std::vector<int64_t> window_dilation) {
        const WindowConfig w =
            window_config(std::move(dimensions), std::move(strides), std::move(padding),
                          std::move(base_dilation), std::move(window_dilation));
        return init ? reduce_window(x, *init, body, w) : reduce_window(x, body, w);
      },
      py::arg("x"), py::arg("init"), py::arg("body"), py::arg("dimensions"), py::arg("strides"),
      py::arg("padding"), py::arg("base_dilation"), py::arg("window_dilation"),
      op_doc("reduce_window").c_str());
  m.def(
      "select_and_scatter_add",
      [window_config](const Value& operand, const Value& source, const std::string& select,
                      std::vector<int64_t> dimensions, std::vector<int64_t> strides,
                      std::vector<std::pair<int64_t, int64_t>> padding) {
        return select_and_scatter_add(
            operand, source,
            window_config(std::move(dimensions), std::move(strides), std::move(padding), {}, {}),
            select);
      },
      py::arg("operand"), py::arg("source"), py::arg("select"), py::arg("dimensions"),
      py::arg("strides"), py::arg("padding"), op_doc("select_and_scatter_add").c_str());
  m.def("nn_max_pool", &nn::max_pool, py::arg("x"), py::arg("window"), py::arg("strides"),
        py::arg("padding"), op_doc("nn::max_pool").c_str());
  m.def("nn_avg_pool", &nn::avg_pool, py::arg("x"), py::arg("window"), py::arg("strides"),
        py::arg("padding"), py::arg("count_include_pad"), op_doc("nn::avg_pool").c_str());
  m.def("padtype_to_pads", &padtype_to_pads, py::arg("in_shape"), py::arg("window_shape"),
        py::arg("window_strides"), py::arg("padding"), op_doc("padtype_to_pads").c_str());
  m.def("logsumexp", &logsumexp, py::arg("x"), py::arg("axes"), py::arg("keepdims") = false,
        op_doc("logsumexp").c_str());
  m.def("softmax", &softmax, py::arg("x"), py::arg("axis") = -1, op_doc("softmax").c_str());
  m.def("log_softmax", &log_softmax, py::arg("x"), py::arg("axis") = -1,
        op_doc("log_softmax").c_str());
  m.def("argmax", &argmax, py::arg("x"), py::arg("axis"), py::arg("keepdims") = false,
        op_doc("argmax").c_str());
  m.def("argmin", &argmin, py::arg("x"), py::arg("axis"), py::arg("keepdims") = false,
        op_doc("argmin").c_str());
  m.def("cumsum", &cumsum, py::arg("x"), py::arg("axis"), py::arg("reverse") = false,
        op_doc("cumsum").c_str());
  m.def("sort", &sort, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false,
        op_doc("sort").c_str());
  m.def("argsort", &argsort, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false,
        op_doc("argsort").c_str());

  m.def("matmul", static_cast<Value (*)(const Value&, const Value&)>(&matmul), py::arg("a"),
        py::arg("b"), op_doc("matmul").c_str());
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
      py::arg("lhs_batch"), py::arg("rhs_batch"), py::arg("preferred_element_type") = py::none(),
      op_doc("dot_general").c_str());

  m.def("reshape", &reshape, py::arg("x"), py::arg("shape"), op_doc("reshape").c_str());
  m.def("transpose", &transpose, py::arg("x"), py::arg("perm"), op_doc("transpose").c_str());
  m.def("broadcast_to", &broadcast_to, py::arg("x"), py::arg("shape"),
        op_doc("broadcast_to").c_str());
  m.def("broadcast_in_dim", &broadcast_in_dim, py::arg("x"), py::arg("shape"), py::arg("dims"),
        op_doc("broadcast_in_dim").c_str());
  m.def("expand_dims", &expand_dims, py::arg("x"), py::arg("axis"), op_doc("expand_dims").c_str());
  m.def("squeeze", &squeeze, py::arg("x"), py::arg("axis"), op_doc("squeeze").c_str());
  m.def("concatenate", &concatenate, py::arg("xs"), py::arg("axis"), op_doc("concatenate").c_str());
  m.def("slice", &slice, py::arg("x"), py::arg("starts"), py::arg("stops"),
        op_doc("slice").c_str());
  m.def("reverse", &reverse, py::arg("x"), py::arg("dims"), op_doc("reverse").c_str());
  m.def(
      "pad",
      [](const Value& x, const Value& v, const std::vector<int64_t>& low,
         const std::vector<int64_t>& high,
         const std::vector<int64_t>& interior) { return pad(x, v, low, high, interior); },
      py::arg("x"), py::arg("value"), py::arg("low"), py::arg("high"), py::arg("interior"),
      op_doc("pad").c_str());
  m.def("take", &take, py::arg("x"), py::arg("indices"), py::arg("axis") = 0,
        op_doc("take").c_str());
  m.def("scatter", &scatter, py::arg("x"), py::arg("indices"), py::arg("updates"),
        py::arg("axis") = 0, op_doc("scatter").c_str());
  m.def("scatter_add", &scatter_add, py::arg("x"), py::arg("indices"), py::arg("updates"),
        py::arg("axis") = 0, op_doc("scatter_add").c_str());
  m.def("dynamic_slice", &dynamic_slice, py::arg("x"), py::arg("start"), py::arg("sizes"),
        op_doc("dynamic_slice").c_str());
  m.def("dynamic_update_slice", &dynamic_update_slice, py::arg("x"), py::arg("update"),
        py::arg("start"), op_doc("dynamic_update_slice").c_str());
  m.def(
      "one_hot",
      [](const Value& labels, int64_t n, const std::string& dtype) {
        return one_hot(labels, n, dtype_arg(dtype));
      },
      py::arg("labels"), py::arg("n"), py::arg("dtype") = "f32", op_doc("one_hot").c_str());
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
