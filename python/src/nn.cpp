// drx.nn: the C++ core's nn (drx/nn/nn.h, transformer.h, precision.h), bound for
// python/drx/nn.py as `_drx.nn_*`. The layers take Values (python/drx/nn.py runs them through a
// jit when called on arrays); parameter trees cross as nested Python dicts and lists of leaves
// (Values or Arrays) and come back as nested dicts of NumPy arrays.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "python/src/bindings.h"

namespace drx::python {
namespace {

DType dtype_arg(const std::string& name) { return dtype_from_name(name); }

nn::Init init_from_name(const std::string& name, const char* what) {
  if (name == "glorot_uniform") return nn::Init::glorot_uniform;
  if (name == "he_normal") return nn::Init::he_normal;
  if (name == "lecun_normal") return nn::Init::lecun_normal;
  if (name == "zeros") return nn::Init::zeros;
  throw Error(std::string(what) + ": unknown initialiser '" + name +
              "' (expected glorot_uniform, he_normal, lecun_normal or zeros)");
}

using OptPolicy = std::optional<nn::Policy>;

void bind_policy(py::module_& m) {
  py::class_<nn::Policy>(m, "NnPolicy",
                         "drx::nn::Policy: the dtypes parameters are kept in, products compute "
                         "in, and activations are returned in.")
      .def(py::init(
               [](const std::string& param, const std::string& compute, const std::string& output) {
                 return nn::Policy{dtype_arg(param), dtype_arg(compute), dtype_arg(output)};
               }),
           py::arg("param"), py::arg("compute"), py::arg("output"))
      .def_static(
          "full", [](const std::string& d) { return nn::Policy::full(dtype_arg(d)); },
          py::arg("dtype"), "Everything in one dtype (f32 or f64).")
      .def_static("bf16", &nn::Policy::bf16,
                  "Parameters f32, products on bf16 operands with f32 accumulation and results.")
      .def_static("named", &nn::Policy::named, py::arg("name"), "\"f32\", \"f64\" or \"bf16\".")
      .def_property_readonly("param",
                             [](const nn::Policy& p) { return std::string(dtype_name(p.param)); })
      .def_property_readonly("compute",
                             [](const nn::Policy& p) { return std::string(dtype_name(p.compute)); })
      .def_property_readonly("output",
                             [](const nn::Policy& p) { return std::string(dtype_name(p.output)); })
      .def("name", &nn::Policy::name);
}

void bind_config(py::module_& m) {
  using C = nn::TransformerConfig;
  py::class_<C>(m, "NnTransformerConfig", "drx::nn::TransformerConfig.")
      .def(py::init<>())
      .def_readwrite("vocab", &C::vocab)
      .def_readwrite("context", &C::context)
      .def_readwrite("layers", &C::layers)
      .def_readwrite("width", &C::width)
      .def_readwrite("heads", &C::heads)
      .def_readwrite("mlp", &C::mlp)
      .def_readwrite("ln_eps", &C::ln_eps)
      .def_readwrite("scan_layers", &C::scan_layers)
      .def_readwrite("policy", &C::policy)
      .def("mlp_width", &C::mlp_width)
      .def("head_width", &C::head_width)
      .def("check", &C::check)
      .def("parameters", &C::parameters);
}

void bind_layers(py::module_& m) {
  m.def(
      "nn_dense",
      [](const Value& x, const Value& w, const Value& b, const OptPolicy& policy) {
        return policy ? nn::dense(x, w, b, *policy) : nn::dense(x, w, b);
      },
      py::arg("x"), py::arg("w"), py::arg("b"), py::arg("policy") = py::none(),
      op_doc("nn::dense").c_str());
  m.def("nn_layer_norm", &nn::layer_norm, py::arg("x"), py::arg("scale"), py::arg("bias"),
        py::arg("eps") = 1e-5, op_doc("nn::layer_norm").c_str());
  m.def(
      "nn_conv2d",
      [](const Value& x, const Value& w, const Value& b, const std::vector<int64_t>& strides,
         const std::string& padding, int64_t feature_group_count, const OptPolicy& policy) {
        return policy ? nn::conv2d(x, w, b, strides, padding, *policy, feature_group_count)
                      : nn::conv2d(x, w, b, strides, padding, feature_group_count);
      },
      py::arg("x"), py::arg("w"), py::arg("b"), py::arg("strides"), py::arg("padding"),
      py::arg("feature_group_count") = 1, py::arg("policy") = py::none(),
      op_doc("nn::conv2d").c_str());
  m.def(
      "nn_batch_norm",
      [](const Value& x, const Value& scale, const Value& bias, const Value& mean, const Value& var,
         bool training, double momentum, double eps) {
        const nn::BatchNormOutput out =
            nn::batch_norm(x, scale, bias, {mean, var}, training, momentum, eps);
        return std::make_tuple(out.y, out.stats.mean, out.stats.var);
      },
      py::arg("x"), py::arg("scale"), py::arg("bias"), py::arg("mean"), py::arg("var"),
      py::arg("training"), py::arg("momentum") = 0.99, py::arg("eps") = 1e-5,
      op_doc("nn::batch_norm").c_str());
  m.def("nn_group_norm", &nn::group_norm, py::arg("x"), py::arg("num_groups"), py::arg("scale"),
        py::arg("bias"), py::arg("eps") = 1e-5, op_doc("nn::group_norm").c_str());
  m.def("nn_embedding", &nn::embedding, py::arg("table"), py::arg("ids"),
        op_doc("nn::embedding").c_str());
  m.def(
      "nn_causal_attention",
      [](const Value& q, const Value& k, const Value& v, int64_t heads, const OptPolicy& policy) {
        return policy ? nn::causal_attention(q, k, v, heads, *policy)
                      : nn::causal_attention(q, k, v, heads);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("heads"), py::arg("policy") = py::none(),
      op_doc("nn::causal_attention").c_str());
  m.def(
      "nn_matmul",
      [](const Value& a, const Value& b, const nn::Policy& policy) {
        return nn::matmul(a, b, policy);
      },
      py::arg("a"), py::arg("b"), py::arg("policy"), op_doc("nn::matmul").c_str());
  m.def(
      "nn_dot_general",
      [](const Value& lhs, const Value& rhs, std::vector<int64_t> lhs_contracting,
         std::vector<int64_t> rhs_contracting, std::vector<int64_t> lhs_batch,
         std::vector<int64_t> rhs_batch, const nn::Policy& policy) {
        DotDims d{std::move(lhs_contracting), std::move(rhs_contracting), std::move(lhs_batch),
                  std::move(rhs_batch)};
        return nn::dot_general(lhs, rhs, std::move(d), policy);
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("lhs_contracting"), py::arg("rhs_contracting"),
      py::arg("lhs_batch"), py::arg("rhs_batch"), py::arg("policy"),
      op_doc("nn::dot_general").c_str());
  m.def(
      "nn_mlp_apply",
      [](py::handle params, const Value& x, const OptPolicy& policy) {
        const Tree p = nested_to_tree(params, "mlp_apply", "");
        return policy ? nn::mlp_apply(p, x, *policy) : nn::mlp_apply(p, x);
      },
      py::arg("params"), py::arg("x"), py::arg("policy") = py::none(),
      op_doc("nn::mlp_apply").c_str());
  m.def(
      "nn_cnn_apply",
      [](py::handle params, const Value& x, const OptPolicy& policy) {
        const Tree p = nested_to_tree(params, "cnn_apply", "");
        return policy ? nn::cnn_apply(p, x, *policy) : nn::cnn_apply(p, x);
      },
      py::arg("params"), py::arg("x"), py::arg("policy") = py::none(),
      op_doc("nn::cnn_apply").c_str());
  m.def(
      "nn_transformer_logits",
      [](const nn::TransformerConfig& c, py::handle params, const Value& ids) {
        return nn::transformer_logits(c, nested_to_tree(params, "transformer_logits", ""), ids);
      },
      py::arg("config"), py::arg("params"), py::arg("ids"),
      op_doc("nn::transformer_logits").c_str());
  m.def(
      "nn_transformer_loss",
      [](const nn::TransformerConfig& c, py::handle params, const Value& windows) {
        return nn::transformer_loss(c, nested_to_tree(params, "transformer_loss", ""), windows);
      },
      py::arg("config"), py::arg("params"), py::arg("windows"),
      op_doc("nn::transformer_loss").c_str());
}

void bind_losses(py::module_& m) {
  using Binary = Value (*)(const Value&, const Value&);
  const std::pair<const char*, Binary> ops[] = {
      {"softmax_cross_entropy", &nn::softmax_cross_entropy},
      {"sigmoid_binary_cross_entropy", &nn::sigmoid_binary_cross_entropy},
      {"correct", &nn::correct},
      {"accuracy", &nn::accuracy},
  };
  for (const auto& [name, fn] : ops)
    m.def((std::string("nn_") + name).c_str(), fn, py::arg("logits"), py::arg("labels"),
          op_doc((std::string("nn::") + name).c_str()).c_str());
  m.def("nn_masked_mean_loss", &nn::masked_mean_loss, py::arg("logits"), py::arg("labels"),
        py::arg("mask"), op_doc("nn::masked_mean_loss").c_str());
}

void bind_init(py::module_& m) {
  m.def(
      "nn_init_array",
      [](const std::string& init, const Shape& shape, int64_t fan_in, int64_t fan_out,
         uint64_t seed, const std::string& dtype) {
        const nn::Init kind = init_from_name(init, "init_array");
        const DType dt = dtype_arg(dtype);
        Array a;
        {
          py::gil_scoped_release release;
          a = nn::init_array(kind, shape, fan_in, fan_out, seed, dt);
        }
        return array_to_numpy(a);
      },
      py::arg("init"), py::arg("shape"), py::arg("fan_in"), py::arg("fan_out"), py::arg("seed"),
      py::arg("dtype") = "f32", op_doc("nn::init_array").c_str());
  m.def(
      "nn_normal_array",
      [](const Shape& shape, double stddev, uint64_t seed, const std::string& dtype) {
        const DType dt = dtype_arg(dtype);
        Array a;
        {
          py::gil_scoped_release release;
          a = nn::normal_array(shape, stddev, seed, dt);
        }
        return array_to_numpy(a);
      },
      py::arg("shape"), py::arg("stddev"), py::arg("seed"), py::arg("dtype") = "f32",
      op_doc("nn::normal_array").c_str());
  m.def("nn_derive_init_seed", &nn::derive_init_seed, py::arg("seed"), py::arg("stream"),
        op_doc("nn::derive_init_seed").c_str());
  m.def(
      "nn_mlp_init",
      [](const std::vector<int64_t>& sizes, uint64_t seed, const std::string& weight_init,
         const std::string& dtype) {
        const nn::Init kind = init_from_name(weight_init, "mlp_init");
        const DType dt = dtype_arg(dtype);
        Tree t;
        {
          py::gil_scoped_release release;
          t = nn::mlp_init(sizes, seed, kind, dt);
        }
        return tree_to_nested(t, true);
      },
      py::arg("sizes"), py::arg("seed"), py::arg("weight_init") = "he_normal",
      py::arg("dtype") = "f32", op_doc("nn::mlp_init").c_str());
  m.def(
      "nn_cnn_init",
      [](int64_t height, int64_t width, int64_t channels, int64_t classes, uint64_t seed,
         const std::string& dtype) {
        const DType dt = dtype_arg(dtype);
        Tree t;
        {
          py::gil_scoped_release release;
          t = nn::cnn_init(height, width, channels, classes, seed, dt);
        }
        return tree_to_nested(t, true);
      },
      py::arg("height"), py::arg("width"), py::arg("channels"), py::arg("classes"), py::arg("seed"),
      py::arg("dtype") = "f32", op_doc("nn::cnn_init").c_str());
  m.def(
      "nn_transformer_init",
      [](const nn::TransformerConfig& c, uint64_t seed, const std::string& dtype) {
        const DType dt = dtype_arg(dtype);
        Tree t;
        {
          py::gil_scoped_release release;
          t = nn::transformer_init(c, seed, dt);
        }
        return tree_to_nested(t, true);
      },
      py::arg("config"), py::arg("seed"), py::arg("dtype") = "f32",
      op_doc("nn::transformer_init").c_str());
}

}  // namespace

void bind_nn(py::module_& m) {
  bind_policy(m);
  bind_config(m);
  bind_layers(m);
  bind_losses(m);
  bind_init(m);
}

}  // namespace drx::python
