#pragma once
// NumPy .npy files: one array per file, as np.save writes and np.load reads
// them (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
//
// drx writes format version 1.0 (2.0 when the header would exceed 64 KiB),
// little-endian, C order, with the header padded so the data starts on a
// 64-byte boundary. It reads versions 1.0, 2.0 and 3.0, little- and big-endian
// data (big-endian is byte-swapped on load) and Fortran-order arrays
// (reordered to drx's row-major layout on load). Element types:
//   f32 '<f4'   f64 '<f8'   i32 '<i4'   i64 '<i8'   bool '|b1'
// Anything else (object arrays, structured dtypes, strings, other widths) is
// refused with a drx::Error that names the file and the descr.
#include <string>
#include <string_view>

#include "drx/array/array.h"

namespace drx {

// Writes `array` to `path` as a .npy file. The file is replaced atomically (a
// temporary file in the same directory, fsynced, renamed over `path`), so a
// reader sees the old file or the whole new one. drx::Error naming the path and
// the reason if it cannot be written.
void save_npy(const std::string& path, const Array& array);

// Reads the .npy file at `path`. Every problem with the file is a drx::Error
// that starts "load_npy: '<path>': " and says what is wrong: cannot open, bad
// magic string, unsupported version, truncated header, a header that is not
// the expected dict, an unsupported descr, fewer or more data bytes than the
// shape needs. Bool bytes other than 0 read as true.
Array load_npy(const std::string& path);

// The bytes of a .npy file holding `array` (what save_npy writes).
std::string encode_npy(const Array& array);

// An array from the bytes of a .npy file; errors as load_npy's, naming `source`
// and starting "decode_npy: ".
Array decode_npy(std::string_view bytes, const std::string& source = "<bytes>");

}  // namespace drx
