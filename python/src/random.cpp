// drx.random: the C++ core's random numbers (drx/random/random.h) and the threefry2x32 block
// function, bound for python/drx/random.py, which checks the arguments (naming its own
// functions), takes JAX's names and keywords and runs eager calls through a jit. Here each
// function is the C++ one: a key is a Value of the current trace, or an Array for the host
// functions (key, split, fold_in on concrete keys).
#include <pybind11/stl.h>

#include <cstring>

#include "python/src/bindings.h"

namespace drx::python {
namespace {

// A host key, checked here so that the error names the function called (the C++ host functions
// share one check).
const Array& host_key(const char* fn, const Array& key) {
  if (key.dtype() != DType::u32 || key.shape() != Shape{2})
    throw Error(std::string("random.") + fn + ": expected a key of type u32[2] (from " +
                "drx.random.key, split or fold_in), got " + std::string(dtype_name(key.dtype())) +
                shape_str(key.shape()) + "; for a batch of keys, use drx.vmap");
  return key;
}

// n keys as one u32[n, 2], as JAX's split returns them.
Value stack_keys(const std::vector<Value>& keys) {
  if (keys.empty()) return fill({0, 2}, 0, DType::u32);
  std::vector<Value> rows;
  for (const Value& k : keys) rows.push_back(reshape(k, {1, 2}));
  return concatenate(rows, 0);
}

Array stack_keys(const std::vector<Array>& keys) {
  Array out(DType::u32, {static_cast<int64_t>(keys.size()), 2});
  for (size_t i = 0; i < keys.size(); ++i)
    std::memcpy(out.data<uint32_t>() + 2 * i, keys[i].data<uint32_t>(), 2 * sizeof(uint32_t));
  return out;
}

}  // namespace

void bind_random(py::module_& m) {
  namespace rnd = drx::random;
  m.def(
      "random_key", [](int64_t seed) { return rnd::key(seed); }, py::arg("seed"),
      op_doc("random::key").c_str());
  m.def(
      "random_key", [](const Value& seed) { return rnd::key(seed); }, py::arg("seed"));

  m.def(
      "random_split",
      [](const Array& key, int64_t n) { return stack_keys(rnd::split(host_key("split", key), n)); },
      py::arg("key"), py::arg("n"),
      (op_doc("random::split") + "\n\nThe n keys stacked as one u32[n, 2], as JAX returns them.")
          .c_str());
  m.def(
      "random_split", [](const Value& key, int64_t n) { return stack_keys(rnd::split(key, n)); },
      py::arg("key"), py::arg("n"));
  m.def(
      "random_split2", [](const Array& key) { return rnd::split2(host_key("split2", key)); },
      py::arg("key"), op_doc("random::split2").c_str());
  m.def(
      "random_split2", [](const Value& key) { return rnd::split2(key); }, py::arg("key"));

  m.def(
      "random_fold_in",
      [](const Array& key, int64_t data) { return rnd::fold_in(host_key("fold_in", key), data); },
      py::arg("key"), py::arg("data"), op_doc("random::fold_in").c_str());
  m.def(
      "random_fold_in", [](const Value& key, int64_t data) { return rnd::fold_in(key, data); },
      py::arg("key"), py::arg("data"));
  m.def(
      "random_fold_in", [](const Value& key, const Value& data) { return rnd::fold_in(key, data); },
      py::arg("key"), py::arg("data"));

  m.def(
      "random_bits",
      [](const Value& key, const Shape& shape, const std::string& dtype) {
        return rnd::bits(key, shape, dtype_from_name(dtype));
      },
      py::arg("key"), py::arg("shape"), py::arg("dtype") = "u32", op_doc("random::bits").c_str());
  m.def(
      "random_uniform",
      [](const Value& key, const Shape& shape, const std::string& dtype, double minval,
         double maxval) {
        return rnd::uniform(key, shape, dtype_from_name(dtype), minval, maxval);
      },
      py::arg("key"), py::arg("shape"), py::arg("dtype") = "f32", py::arg("minval") = 0.0,
      py::arg("maxval") = 1.0, op_doc("random::uniform").c_str());
  m.def(
      "random_normal",
      [](const Value& key, const Shape& shape, const std::string& dtype) {
        return rnd::normal(key, shape, dtype_from_name(dtype));
      },
      py::arg("key"), py::arg("shape"), py::arg("dtype") = "f32", op_doc("random::normal").c_str());
  m.def(
      "random_bernoulli",
      [](const Value& key, double p, const Shape& shape) { return rnd::bernoulli(key, p, shape); },
      py::arg("key"), py::arg("p"), py::arg("shape"), op_doc("random::bernoulli").c_str());
  m.def(
      "random_bernoulli",
      [](const Value& key, const Value& p, const Shape& shape) {
        return rnd::bernoulli(key, p, shape);
      },
      py::arg("key"), py::arg("p"), py::arg("shape"));
  m.def(
      "random_randint",
      [](const Value& key, const Shape& shape, int64_t minval, int64_t maxval,
         const std::string& dtype) {
        return rnd::randint(key, shape, minval, maxval, dtype_from_name(dtype));
      },
      py::arg("key"), py::arg("shape"), py::arg("minval"), py::arg("maxval"),
      py::arg("dtype") = "i32", op_doc("random::randint").c_str());
  m.def(
      "random_permutation", [](const Value& key, int64_t n) { return rnd::permutation(key, n); },
      py::arg("key"), py::arg("n"), op_doc("random::permutation").c_str());
  m.def(
      "random_permutation",
      [](const Value& key, const Value& x, int64_t axis) { return rnd::permutation(key, x, axis); },
      py::arg("key"), py::arg("x"), py::arg("axis") = 0);
  m.def(
      "threefry2x32",
      [](const Value& k0, const Value& k1, const Value& x0, const Value& x1) {
        return threefry2x32(k0, k1, x0, x1);
      },
      py::arg("k0"), py::arg("k1"), py::arg("x0"), py::arg("x1"), op_doc("threefry2x32").c_str());
}

}  // namespace drx::python
