// drx::Array <-> NumPy. Arguments are viewed in place where their layout allows (drx never
// writes an argument's buffer); results are handed to NumPy without a copy, read-only.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstring>

#include "python/src/bindings.h"

namespace drx::python {
namespace {

// NumPy's name for each dtype NumPy has; bf16 (which Debian's NumPy lacks) leaves as f32.
const char* numpy_name(DType d) {
  switch (d) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::f16:
      return "float16";
    case DType::i8:
      return "int8";
    case DType::i16:
      return "int16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
    case DType::u16:
      return "uint16";
    case DType::u32:
      return "uint32";
    case DType::u64:
      return "uint64";
    case DType::bool_:
      return "bool";
    default:
      return nullptr;
  }
}

DType dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'b' && size == 1) return DType::bool_;
  if (kind == 'i' && size == 1) return DType::i8;
  if (kind == 'i' && size == 2) return DType::i16;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'u' && size == 1) return DType::u8;
  if (kind == 'u' && size == 2) return DType::u16;
  if (kind == 'u' && size == 4) return DType::u32;
  if (kind == 'u' && size == 8) return DType::u64;
  throw Error("drx.asarray: NumPy dtype " + std::string(py::str(py::object(dt))) +
              " has no drx dtype (expected one of: float16/32/64, int8/16/32/64, "
              "uint8/16/32/64, bool)");
}

}  // namespace

Array array_from_buffer(const py::buffer& b, bool copy) {
  py::array arr = py::array::ensure(b, py::array::c_style);
  if (!arr) throw Error("drx.asarray: expected an array-like with the buffer protocol");
  if (arr.dtype().attr("isnative").cast<bool>() == false)  // e.g. big-endian '>f4'
    arr = py::array::ensure(arr.attr("astype")(arr.dtype().attr("newbyteorder")("=")));
  const DType dt = dtype_of_numpy(arr.dtype());
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  const auto address = reinterpret_cast<uintptr_t>(arr.data());
  // Viewed in place where drx's kernels can read it as they read their own buffers (aligned
  // as malloc aligns); NumPy's own allocations are.
  if (!copy && arr.nbytes() > 0 && address % alignof(std::max_align_t) == 0) {
    auto* held = new py::object(arr);
    std::shared_ptr<void> owner(held, [](void* p) {
      py::gil_scoped_acquire gil;  // the last holder may be a thread without the GIL
      delete static_cast<py::object*>(p);
    });
    return Array::external(dt, std::move(shape), const_cast<void*>(arr.data()), std::move(owner));
  }
  Array out(dt, shape);
  if (out.nbytes()) std::memcpy(out.raw(), arr.data(), out.nbytes());
  return out;
}

Array copy_unless_owned(const Array& a, const std::vector<Array>& inputs) {
  const auto* begin = static_cast<const std::byte*>(a.raw());
  for (const Array& in : inputs) {
    const auto* in_begin = static_cast<const std::byte*>(in.raw());
    if (begin >= in_begin && begin < in_begin + std::max<size_t>(in.nbytes(), 1)) {
      Array copy(a.dtype(), a.shape());
      if (a.nbytes()) std::memcpy(copy.raw(), a.raw(), a.nbytes());
      return copy;
    }
  }
  return a;
}

py::object array_to_numpy(const Array& a) {
  if (a.dtype() == DType::bf16) return array_to_numpy(convert_array(a, DType::f32));
  const char* name = numpy_name(a.dtype());
  if (!name)
    throw Error("drx: a result of dtype " + std::string(dtype_name(a.dtype())) +
                " has no NumPy dtype");
  // The capsule owns a copy of the Array handle, so NumPy's view keeps the buffer alive.
  auto* keep = new Array(a);
  py::capsule owner(keep, [](void* p) { delete static_cast<Array*>(p); });
  const py::dtype dt(name);
  std::vector<py::ssize_t> shape(a.shape().begin(), a.shape().end());
  py::array view(dt, shape, {}, keep->raw(), owner);
  py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return view;
}

void bind_arrays(py::module_& m) {
  py::class_<Array>(m, "Array", "A concrete drx array (results of compiled calls).")
      .def_property_readonly("shape",
                             [](const Array& a) {
                               py::tuple t(a.shape().size());
                               for (size_t i = 0; i < a.shape().size(); ++i) t[i] = a.shape()[i];
                               return t;
                             })
      .def_property_readonly("dtype",
                             [](const Array& a) { return std::string(dtype_name(a.dtype())); })
      .def_property_readonly("ndim", &Array::ndim)
      .def_property_readonly("size", &Array::size)
      .def("numpy", &array_to_numpy, "The array as a read-only NumPy array (no copy).")
      .def(
          "copy", [](const Array& a) { return copy_unless_owned(a, {a}); },
          "The array in a buffer of its own.")
      .def("__repr__", &Array::str);
  m.def("asarray", &array_from_buffer, py::arg("x"), py::arg("copy") = true,
        "A NumPy array (or buffer) as a drx Array: a copy, or with copy=False a view of its "
        "memory where its layout allows (the array is kept alive, and must not be changed "
        "while drx reads it).");
  m.def("live_array_buffers", &live_array_buffers,
        "Buffers drx has allocated that are still alive (for leak checks).");
  m.def(
      "scalar_array",
      [](double v, const std::string& dtype) { return full({}, v, dtype_from_name(dtype)); },
      "A 0-d Array of `dtype` holding v.");
}

}  // namespace drx::python
