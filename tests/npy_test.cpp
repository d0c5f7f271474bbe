// NumPy .npy files: drx's own round trips, the exact layout, NumPy reading
// drx's files and drx reading NumPy's (skipped without /usr/bin/python3 and
// numpy), and a clear drx::Error for every kind of malformed file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "drx/drx.h"
#include "tests/numpy_util.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

const std::vector<Shape> kShapes = {{}, {0}, {1}, {5}, {2, 3}, {2, 0, 4}, {3, 1, 2, 2}};

// Arbitrary bit patterns (NaN payloads, denormals and extreme integers
// included), so a round trip that loses any bit shows; bools are 0 or 1.
Array arbitrary(DType dtype, const Shape& shape, uint64_t seed) {
  Array a(dtype, shape);
  std::mt19937_64 rng(seed);
  auto* bytes = static_cast<unsigned char*>(a.raw());
  for (size_t i = 0; i < a.nbytes(); ++i)
    bytes[i] = static_cast<unsigned char>(dtype == DType::bool_ ? rng() % 2 : rng() % 256);
  return a;
}

std::string hex(const void* data, size_t n) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<const unsigned char*>(data)[i];
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string npy_descr_of(DType d) {
  switch (d) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::i32:
      return "<i4";
    case DType::i64:
      return "<i8";
    case DType::bool_:
      return "|b1";
    case DType::u32:
      return "<u4";
    case DType::u8:
      return "|u1";
    case DType::i8:
      return "|i1";
    case DType::i16:
      return "<i2";
    case DType::u16:
      return "<u2";
    case DType::u64:
      return "<u8";
    case DType::f16:
      return "<f2";
    case DType::bf16:
    case DType::i2:
    case DType::i4:
    case DType::u2:
    case DType::u4:
      break;  // NumPy has none
  }
  return "?";
}

// A per-test scratch directory, removed afterwards.
class NpyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("drx_npy_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string dir() const { return dir_.string(); }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }

 private:
  std::filesystem::path dir_;
};

TEST(Npy, EncodeDecodeRoundTripsEveryDtypeAndShapeBitwise) {
  uint64_t seed = 1;
  for (DType d : kAllDTypes)
    for (const Shape& s : kShapes) {
      if (d == DType::bf16 || is_narrow_integer(d)) continue;  // not NumPy dtypes
      Array a = arbitrary(d, s, seed++);
      Array back = decode_npy(encode_npy(a));
      EXPECT_TRUE(back.bitwise_equal(a)) << dtype_name(d) << shape_str(s);
    }
}

TEST_F(NpyFiles, SaveLoadRoundTripsEveryDtypeAndShapeBitwise) {
  uint64_t seed = 100;
  for (DType d : kAllDTypes)
    for (const Shape& s : kShapes) {
      if (d == DType::bf16 || is_narrow_integer(d)) continue;  // not NumPy dtypes
      Array a = arbitrary(d, s, seed++);
      save_npy(path("a.npy"), a);
      EXPECT_TRUE(load_npy(path("a.npy")).bitwise_equal(a)) << dtype_name(d) << shape_str(s);
      EXPECT_EQ(read_bytes(path("a.npy")), encode_npy(a));
    }
}

TEST(Npy, Bf16IsRefusedWithAHint) {
  expect_error([] { encode_npy(full({2}, 1.5, DType::bf16)); }, {"NumPy has no bf16", "u16"});
}

TEST(Npy, LayoutIsVersion1LittleEndianCOrderAlignedTo64) {
  Array a = Array::from_vector<int32_t>({1, 2, 3, 4, 5, 258}, {2, 3});
  const std::string bytes = encode_npy(a);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_length = static_cast<unsigned char>(bytes[8]) |
                               (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  const size_t data_at = 10 + header_length;
  EXPECT_EQ(data_at % 64, 0u);
  ASSERT_EQ(bytes.size(), data_at + 24);
  const std::string header = bytes.substr(10, header_length);
  EXPECT_EQ(header.rfind("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u)
      << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', header.find('}') + 1), header.size() - 1);
  // Little-endian, row-major: 258 = 0x0102 is the last element.
  EXPECT_EQ(hex(bytes.data() + data_at + 20, 4), "02010000");

  // Shapes as Python tuples.
  EXPECT_NE(encode_npy(Array::scalar<double>(1)).find("'shape': (), }"), std::string::npos);
  EXPECT_NE(encode_npy(zeros({3}, DType::bool_))
                .find("{'descr': '|b1', 'fortran_order': False, "
                      "'shape': (3,), }"),
            std::string::npos);
}

TEST(Npy, HugeRankUsesVersion2) {
  // A header over 64 KiB needs format 2.0's 4-byte length field.
  Array a(DType::f32, Shape(30000, 1));
  const std::string bytes = encode_npy(a);
  EXPECT_EQ(bytes[6], 2);
  const size_t header_length = static_cast<unsigned char>(bytes[8]) |
                               (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8) |
                               (static_cast<size_t>(static_cast<unsigned char>(bytes[10])) << 16);
  EXPECT_EQ((12 + header_length) % 64, 0u);
  EXPECT_TRUE(decode_npy(bytes).bitwise_equal(a));
}

// The bytes of a .npy file written by hand: `dict` as the header text.
std::string npy_file(const std::string& dict, const std::string& data = "", int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::string text = dict + "\n";
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

std::string le32(const std::vector<int32_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(Npy, ReadsFortranOrderBigEndianAndOtherHeaderSpellings) {
  // Fortran order: element (i, j) of a 2x3 array is stored at i + 2 j.
  Array f = decode_npy(npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                le32({0, 1, 2, 3, 4, 5})));
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(f.to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 4, 1, 3, 5}));

  // Big-endian data is byte-swapped.
  Array b = decode_npy(npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                                std::string("\x00\x00\x00\x01\x80\x00\x00\x00", 8)));
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{1, INT32_MIN}));

  // Double quotes, other key order, no trailing comma, no spaces, Python 2
  // longs, versions 2.0 and 3.0, nonzero bool bytes.
  for (int major : {1, 2, 3}) {
    Array c = decode_npy(npy_file("{\"shape\":(3L,),\"fortran_order\":False,\"descr\":\"|b1\"}",
                                  std::string("\x00\x07\x01", 3), major));
    EXPECT_EQ(c.to_vector<bool>(), (std::vector<bool>{false, true, true})) << major;
    EXPECT_EQ(c.data<uint8_t>()[1], 1) << "bools are stored as 0 or 1";
  }
  // No byte-order character: native.
  EXPECT_EQ(decode_npy(npy_file("{'descr': 'i4', 'fortran_order': False, 'shape': ()}", le32({7})))
                .item<int32_t>(),
            7);
}

// Each malformed file: the bytes, and what its error must say.
struct Malformed {
  std::string bytes;
  std::string message;
};

std::vector<Malformed> malformed_files() {
  const std::string magic("\x93NUMPY\x01\x00", 8);
  const std::string ok_tail = "'fortran_order': False, 'shape': (), }";
  auto dict = [](const std::string& text, const std::string& data = "") {
    return npy_file(text, data);
  };
  return {
      {"", "not a .npy file: it is empty"},
      {"GIF89a-not-numpy",
       "bad magic string (a .npy file starts with \\x93NUMPY, this one with "
       "'GIF89a')"},
      {std::string("\x93NUM", 4), "truncated header: the file ends after 4 bytes"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "format version 4.0"},
      {std::string("\x93NUMPY\x01\x01\x10\x00", 10), "format version 1.1"},
      {magic + "\x05", "the file ends inside the header length field"},
      {magic + std::string("\xff\x00{}", 4), "header length field says 255 bytes, but only 2"},
      {dict("[1, 2]"),
       "header is not a Python dict literal: it must start with '{', found "
       "'[1, 2]\\x0a'"},
      {dict(""), "header is not a Python dict literal"},
      {dict("{'descr': '<f4', 'fortran_order': False}"), "header lacks the key 'shape'"},
      {dict("{'descr': '<f4', " + ok_tail.substr(0, ok_tail.size() - 1) + "'x': 1}"),
       "header has the unexpected key 'x'"},
      {dict("{'descr': '<f4', 'descr': '<f4', " + ok_tail), "header repeats the key 'descr'"},
      {dict("{'descr': '<c8', " + ok_tail),
       "header has descr '<c8', a dtype drx does not read "
       "(drx reads '<f4', '<f8', '<i4', '<i8', '|b1'"},
      {dict("{'descr': '<U3', " + ok_tail), "header has descr '<U3'"},
      {dict("{'descr': '|O', " + ok_tail), "header describes an object array (descr '|O')"},
      {dict("{'descr': [('a', '<f4')], " + ok_tail), "header describes a structured dtype"},
      {dict("{'descr': 5, " + ok_tail), "header expects a string for 'descr', found '5,"},
      {dict("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}"),
       "header needs True or False for 'fortran_order', found '0,"},
      {dict("{'descr': '<f4', 'fortran_order': Truely, 'shape': ()}"), "needs True or False"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"),
       "header needs a tuple of integers for 'shape'"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}"),
       "'shape': (3), an integer in parentheses; a 1-d shape is the tuple (3,)"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}"),
       "header expects an integer in 'shape', found 'x)}"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}"),
       "header expects ',' or ')' in 'shape'"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"),
       "header has the negative dimension -1 in 'shape'"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
       "does not fit in 64 bits"},
      {dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"),
       "shape [4294967296,4294967296] is too large: its size in bytes overflows 64 bits"},
      {dict("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", std::string(8, '\0')),
       "truncated data: shape [3] of '<f4' needs 12 data bytes, but the file has only 8 after the "
       "header"},
      {dict("{'descr': '<f4', " + ok_tail, std::string(6, '\0')),
       "data size mismatch: shape () (a scalar) of '<f4' needs 4 data bytes, but the file has 6 "
       "after the header (2 too many)"},
      {dict("{'descr': '<f4', " + ok_tail + " 7"), "header has text after the dict's closing '}'"},
      {dict("{'descr': '<f4, " + ok_tail), "header expects ',' or '}' after the value of 'descr'"},
      {dict("{'descr': '<f4', 'fortran_order: False, 'shape': ()}"), "expects ':' after the key"},
      {dict("{'descr': '<f4\n', " + ok_tail), "header has a string that is not closed"},
      {dict("{'descr': '<f\\x34', " + ok_tail), "header uses an escape sequence in a string"},
      {dict("{'descr' '<f4', " + ok_tail), "header expects ':' after the key 'descr'"},
      {dict("{'descr': '<f4' 'fortran_order': False, 'shape': ()}"),
       "header expects ',' or '}' after the value of 'descr'"},
      {dict("{,}"), "header expects a quoted key or '}', found ',}"},
      {dict("{'descr': '<f4', " + ok_tail.substr(0, ok_tail.size() - 2)),
       "header expects a quoted key or '}', found the end of the header"},
  };
}

TEST(Npy, MalformedBytesAreClearErrors) {
  for (const Malformed& m : malformed_files()) {
    try {
      Array a = decode_npy(m.bytes, "case.npy");
      ADD_FAILURE() << "no error for [" << m.message << "], got " << a.str();
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("decode_npy: 'case.npy': ", 0), 0u) << what;
      EXPECT_NE(what.find(m.message), std::string::npos)
          << "want: " << m.message << "\ngot:  " << what;
    }
  }
}

TEST_F(NpyFiles, LoadErrorsNameTheFile) {
  const std::string missing = path("missing.npy");
  try {
    load_npy(missing);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "load_npy: '" + missing + "': cannot open: No such file or directory");
  }
  try {
    load_npy(dir());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "load_npy: '" + dir() + "': not a regular file");
  }
  // Every malformed case reads the same from a file, with the file's name.
  for (const Malformed& m : malformed_files()) {
    write_bytes(path("bad.npy"), m.bytes);
    try {
      load_npy(path("bad.npy"));
      ADD_FAILURE() << "no error for " << m.message;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("load_npy: '" + path("bad.npy") + "': ", 0), 0u) << what;
      EXPECT_NE(what.find(m.message), std::string::npos) << what;
    }
  }
}

TEST_F(NpyFiles, SaveReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  const std::string p = path("w.npy");
  save_npy(p, zeros({1000}));
  save_npy(p, Array::scalar<int64_t>(42));
  EXPECT_EQ(load_npy(p).item<int64_t>(), 42);
  EXPECT_EQ(std::filesystem::status(p).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir()))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"w.npy"});

  // A directory that does not exist: the error names the path; nothing is written.
  const std::string nowhere = path("no/such/dir/x.npy");
  try {
    save_npy(nowhere, zeros({2}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "save_npy: cannot write '" + nowhere +
                                         "': creating a temporary file next to it: No such file "
                                         "or directory");
  }
  // Over a directory: the rename fails and the temporary file is removed.
  std::filesystem::create_directories(path("sub"));
  try {
    save_npy(path("sub"), zeros({2}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("renaming the temporary file over it"), std::string::npos)
        << e.what();
  }
  names.clear();
  for (const auto& entry : std::filesystem::directory_iterator(dir()))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"sub", "w.npy"}));
}

// ---- against NumPy itself -------------------------------------------------

TEST_F(NpyFiles, NumPyLoadsDrxFilesWithTheirDtypeShapeAndBytes) {
  DRX_SKIP_WITHOUT_NUMPY();
  std::string want, files;
  uint64_t seed = 7;
  int n = 0;
  for (DType d : kAllDTypes)
    for (const Shape& s : kShapes) {
      if (d == DType::bf16 || is_narrow_integer(d)) continue;  // not NumPy dtypes
      Array a = arbitrary(d, s, seed++);
      const std::string name = path("f" + std::to_string(n++) + ".npy");
      save_npy(name, a);
      files += " " + name;
      std::string dims;
      for (int64_t x : s) dims += (dims.empty() ? "" : ",") + std::to_string(x);
      want += npy_descr_of(d) + " (" + dims + ") " + hex(a.raw(), a.nbytes()) + "\n";
    }
  PythonResult r = run_python(
      "import sys, numpy as np\n"
      "for p in sys.argv[1:]:\n"
      "    a = np.load(p, allow_pickle=False)\n"
      "    print(a.dtype.str, '(' + ','.join(map(str, a.shape)) + ')', a.tobytes().hex())\n",
      files);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, want);
}

TEST_F(NpyFiles, DrxLoadsNumPyFiles) {
  DRX_SKIP_WITHOUT_NUMPY();
  PythonResult r = run_python(
      "import sys, numpy as np\n"
      "d = sys.argv[1]\n"
      "np.save(d + '/f32.npy', np.arange(6, dtype='<f4').reshape(2, 3) / 4)\n"
      "np.save(d + '/f64.npy', np.array([[1.5, -2.0], [1e300, -0.0]]))\n"
      "np.save(d + '/i32.npy', np.array([1, -2, 2**31 - 1, -2**31], dtype='<i4'))\n"
      "np.save(d + '/i64.npy', np.array([[2**62], [-5]], dtype='<i8'))\n"
      "np.save(d + '/bool.npy', np.array([True, False, True]))\n"
      "np.save(d + '/scalar.npy', np.array(3.5))\n"
      "np.save(d + '/empty.npy', np.zeros((0, 3), dtype='<f4'))\n"
      "np.save(d + '/fortran.npy', np.asfortranarray(np.arange(24, dtype='<i4').reshape(2, 3, "
      "4)))\n"
      "np.save(d + '/big.npy', np.arange(6, dtype='>f8').reshape(2, 3))\n"
      "np.save(d + '/big_fortran.npy', np.asfortranarray(np.arange(6, dtype='>i8').reshape(3, "
      "2)))\n"
      "for v in (2, 3):\n"
      "    with open(d + '/v%d.npy' % v, 'wb') as f:\n"
      "        np.lib.format.write_array(f, np.arange(4, dtype='<i8'), version=(v, 0))\n",
      dir());
  ASSERT_EQ(r.status, 0) << r.output;

  auto iota = [](int n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
    return v;
  };
  struct Want {
    std::string file;
    DType dtype;
    Shape shape;
    std::vector<double> values;
  };
  const std::vector<Want> wants = {
      {"f32", DType::f32, {2, 3}, {0, 0.25, 0.5, 0.75, 1, 1.25}},
      {"f64", DType::f64, {2, 2}, {1.5, -2.0, 1e300, -0.0}},
      {"i32", DType::i32, {4}, {1, -2, 2147483647.0, -2147483648.0}},
      {"i64", DType::i64, {2, 1}, {4611686018427387904.0, -5}},
      {"bool", DType::bool_, {3}, {1, 0, 1}},
      {"scalar", DType::f64, {}, {3.5}},
      {"empty", DType::f32, {0, 3}, {}},
      {"fortran", DType::i32, {2, 3, 4}, iota(24)},
      {"big", DType::f64, {2, 3}, iota(6)},
      {"big_fortran", DType::i64, {3, 2}, iota(6)},
      {"v2", DType::i64, {4}, iota(4)},
      {"v3", DType::i64, {4}, iota(4)},
  };
  for (const Want& w : wants) {
    Array a = load_npy(path(w.file + ".npy"));
    EXPECT_EQ(a.dtype(), w.dtype) << w.file;
    EXPECT_EQ(a.shape(), w.shape) << w.file;
    ASSERT_EQ(a.size(), static_cast<int64_t>(w.values.size())) << w.file;
    for (int64_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a.element_as_double(i), w.values[static_cast<size_t>(i)]) << w.file << " " << i;
  }
  EXPECT_EQ(load_npy(path("i64.npy")).to_vector<int64_t>()[0], int64_t{1} << 62);
  EXPECT_TRUE(std::signbit(load_npy(path("f64.npy")).to_vector<double>()[3]));
  // The files really exercise the paths they are named after.
  EXPECT_NE(read_bytes(path("fortran.npy")).find("'fortran_order': True"), std::string::npos);
  EXPECT_NE(read_bytes(path("big_fortran.npy")).find("'descr': '>i8'"), std::string::npos);
  EXPECT_EQ(read_bytes(path("v3.npy"))[6], 3);
}

}  // namespace
}  // namespace drx::testing
