// A jitted call's arguments flattened in C++: each positional argument becomes its list of
// leaves (Arrays), and the whole call one key string naming the tree structures, each leaf's
// dtype and shape, and which leaves are weakly typed Python numbers. The Python layer looks
// its compiled entries up by this key, so a call on NumPy arrays and Python numbers crosses
// no Python code of drx's but the lookup.
//
// Only the containers whose flattening is fixed (tuple, list, dict with string keys, None:
// exactly those types, not subclasses) and the leaves NumPy arrays and Python bool, int and
// float are handled here; anything else (namedtuples, dataclasses, registered nodes, traced
// values, NumPy scalars) answers None and the Python layer flattens the call with tree_util.
// Both orders agree: dicts by sorted key, as JAX and drx's Tree do.
#include <pybind11/numpy.h>

#include <algorithm>
#include <string>
#include <vector>

#include "python/src/bindings.h"

namespace drx::python {
namespace {

struct Flattener {
  py::handle ndarray;
  std::string key;
  std::vector<Tree> leaves;

  // False when `h` (or something inside it) needs Python's tree_util.
  bool add(py::handle h) {
    PyObject* o = h.ptr();
    PyTypeObject* type = Py_TYPE(o);
    if (type == reinterpret_cast<PyTypeObject*>(ndarray.ptr())) return add_array(h);
    if (o == Py_None) {
      key += 'N';
      return true;
    }
    if (type == &PyFloat_Type) return add_weak(full({}, PyFloat_AS_DOUBLE(o), DType::f64), 'f');
    if (type == &PyBool_Type)
      return add_weak(full({}, o == Py_True ? 1.0 : 0.0, DType::bool_), 'b');
    if (type == &PyLong_Type) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow) return false;  // Python's path gives the error
      Array a(DType::i64, {});
      a.data<int64_t>()[0] = v;
      return add_weak(std::move(a), 'i');
    }
    if (type == &PyTuple_Type || type == &PyList_Type) {
      const bool tuple = type == &PyTuple_Type;
      const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(o) : PyList_GET_SIZE(o);
      key += tuple ? '(' : '[';
      key += std::to_string(n);
      for (Py_ssize_t i = 0; i < n; ++i)
        if (!add(tuple ? PyTuple_GET_ITEM(o, i) : PyList_GET_ITEM(o, i))) return false;
      key += ')';
      return true;
    }
    if (type == &PyDict_Type) return add_dict(h);
    return false;
  }

  bool add_array(py::handle h) {
    Array a = array_from_buffer(py::reinterpret_borrow<py::buffer>(h), false);
    key += 'a';
    key += dtype_name(a.dtype());
    key += shape_str(a.shape());
    leaves.emplace_back(std::move(a));
    return true;
  }

  bool add_weak(Array a, char kind) {
    key += 'w';
    key += kind;
    leaves.emplace_back(std::move(a));
    return true;
  }

  bool add_dict(py::handle h) {
    std::vector<std::pair<std::string, py::handle>> items;
    PyObject *k = nullptr, *v = nullptr;
    Py_ssize_t pos = 0;
    while (PyDict_Next(h.ptr(), &pos, &k, &v)) {
      if (!PyUnicode_CheckExact(k)) return false;  // Python orders other keys
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(k, &size);
      if (!text) throw py::error_already_set();
      items.emplace_back(std::string(text, static_cast<size_t>(size)), v);
    }
    // UTF-8's byte order is code-point order: the order of Python's sorted().
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    key += '{';
    key += std::to_string(items.size());
    for (const auto& [name, value] : items) {
      key += std::to_string(name.size());
      key += ':';
      key += name;
      if (!add(value)) return false;
    }
    key += '}';
    return true;
  }
};

}  // namespace

void bind_flatten(py::module_& m) {
  m.def(
      "flatten_call",
      [](py::tuple args) -> py::object {
        static const py::handle ndarray =
            py::object(py::module_::import("numpy").attr("ndarray")).release();
        py::list per_arg;
        Flattener f{ndarray, "", {}};
        for (py::handle a : args) {
          f.leaves.clear();
          if (!f.add(a)) return py::none();
          f.key += ';';
          per_arg.append(leaves_to_py(Tree::list(f.leaves)));
        }
        return py::make_tuple(per_arg, py::bytes(f.key));
      },
      py::arg("args"),
      "(leaf lists per argument, key) for a call on NumPy arrays, Python numbers, tuples, "
      "lists, str-keyed dicts and None; None when a leaf or node needs drx.tree_util.");
}

}  // namespace drx::python
