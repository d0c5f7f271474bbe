#pragma once
// The header dictionary of a NumPy .npy file, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// a Python literal that names the element type (descr), the element order and
// the shape. This file reads and writes that text; drx/data/npy.cpp handles the
// bytes around it (magic string, version, lengths, data).
#include <bit>
#include <string>
#include <string_view>

#include "drx/array/dtype.h"

namespace drx::data {

struct NpyHeader {
  DType dtype = DType::f32;
  // The byte order of the data in the file (for 1-byte types: any).
  std::endian byte_order = std::endian::little;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header text (the bytes between the length field and the data).
// Accepts what Python's literal syntax allows for this dict: either quote
// style, any whitespace, keys in any order, trailing commas, Python 2 long
// integers (3L); a descr with no byte-order character, or with '=' or '|', is
// in the machine's own order. Throws drx::Error starting with "header " and saying what is
// wrong: not a dict, a missing, repeated or unknown key, a value of the wrong
// kind, an unknown or unsupported descr (object arrays, structured dtypes), a
// negative dimension. The caller adds the file's name.
NpyHeader parse_npy_header(std::string_view text);

// The dict text for `header`, as NumPy writes it (little-endian descr, keys
// sorted), without padding or the final newline.
std::string format_npy_header(const NpyHeader& header);

// The descr of a dtype in the file's byte order, e.g. "<f4", "|b1".
std::string npy_descr(DType dtype, std::endian byte_order = std::endian::little);

}  // namespace drx::data
