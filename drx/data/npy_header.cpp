#include "drx/data/npy_header.h"

#include <cstdint>
#include <limits>

#include "drx/array/error.h"

namespace drx::data {
namespace {

// The dtypes drx reads and writes in .npy files, with NumPy's kind letter; the
// item size is dtype_size(dtype), so a descr is byte order + kind + size
// ("<f4"). A new dtype needs one row here.
struct NpyType {
  DType dtype;
  char kind;
};
constexpr NpyType kNpyTypes[] = {
    {DType::f32, 'f'},   {DType::f64, 'f'}, {DType::i32, 'i'}, {DType::i64, 'i'},
    {DType::bool_, 'b'}, {DType::u32, 'u'}, {DType::u8, 'u'},  {DType::i8, 'i'},
    {DType::i16, 'i'},   {DType::u16, 'u'}, {DType::u64, 'u'}, {DType::f16, 'f'},
};
// (NumPy has no bf16: its arrays are written as f32 or bit-cast to u16.)

std::string descr_of(const NpyType& t, std::endian order) {
  const size_t size = dtype_size(t.dtype);
  const char order_char = size == 1 ? '|' : order == std::endian::big ? '>' : '<';
  return std::string(1, order_char) + t.kind + std::to_string(size);
}

std::string supported_descrs() {
  std::string out;
  for (const NpyType& t : kNpyTypes)
    out += (out.empty() ? "'" : ", '") + descr_of(t, std::endian::little) + "'";
  return out;
}

std::string shape_text(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// A recursive-descent reader for the one dict a .npy header holds. Not a
// general Python literal parser: values are read by what their key expects.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  NpyHeader parse() {
    skip_space();
    if (!consume('{'))
      fail("is not a Python dict literal: it must start with '{', found " + found());
    NpyHeader h;
    std::string descr;
    bool have_descr = false, have_order = false, have_shape = false;
    while (true) {
      skip_space();
      if (consume('}')) break;
      const size_t key_at = pos_;
      std::string key = read_string("a quoted key or '}'");
      skip_space();
      if (!consume(':')) fail("expects ':' after the key '" + key + "', found " + found());
      skip_space();
      if (key == "descr") {
        once(have_descr, key, key_at);
        if (peek() == '[')
          fail(
              "describes a structured dtype (a list of fields); drx reads arrays of one "
              "element type: " +
              supported_descrs());
        descr = read_string("a string for 'descr'");
      } else if (key == "fortran_order") {
        once(have_order, key, key_at);
        h.fortran_order = read_bool(key);
      } else if (key == "shape") {
        once(have_shape, key, key_at);
        h.shape = read_shape();
      } else {
        fail("has the unexpected key '" + key +
             "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (consume(',')) continue;
      if (consume('}')) break;
      fail("expects ',' or '}' after the value of '" + key + "', found " + found());
    }
    skip_space();
    if (pos_ != s_.size()) fail("has text after the dict's closing '}': " + found());
    for (auto [have, key] : {std::pair{have_descr, "descr"}, std::pair{have_order, "fortran_order"},
                             std::pair{have_shape, "shape"}})
      if (!have)
        fail(std::string("lacks the key '") + key +
             "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
    set_dtype(descr, h);
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error("header " + what); }

  // What is at the current position, quoted and with control bytes escaped.
  std::string found() const {
    if (pos_ >= s_.size()) return "the end of the header";
    std::string out = "'";
    for (size_t i = pos_; i < s_.size() && i < pos_ + 24; ++i) {
      auto c = static_cast<unsigned char>(s_[i]);
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        static const char* const kHex = "0123456789abcdef";
        out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
      }
    }
    return out + (pos_ + 24 < s_.size() ? "...'" : "'");
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (pos_ < s_.size() && is_python_space(s_[pos_])) ++pos_;
  }

  void once(bool& seen, const std::string& key, size_t at) {
    if (seen) fail("repeats the key '" + key + "' (at byte " + std::to_string(at) + ")");
    seen = true;
  }

  std::string read_string(const char* expected) {
    const char quote = peek();
    if (quote != '\'' && quote != '"')
      fail(std::string("expects ") + expected + ", found " + found());
    size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\')
        fail("uses an escape sequence in a string; .npy headers hold plain strings such as '<f4'");
      if (s_[pos_] == '\n') break;
      ++pos_;
    }
    if (pos_ >= s_.size() || s_[pos_] != quote)
      fail("has a string that is not closed (it starts at byte " + std::to_string(start - 1) + ")");
    return std::string(s_.substr(start, pos_++ - start));
  }

  bool read_word(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    const char next = pos_ + word.size() < s_.size() ? s_[pos_ + word.size()] : '\0';
    const bool identifier_goes_on = (next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') ||
                                    (next >= '0' && next <= '9') || next == '_';
    if (identifier_goes_on) return false;
    pos_ += word.size();
    return true;
  }

  bool read_bool(const std::string& key) {
    if (read_word("True")) return true;
    if (read_word("False")) return false;
    fail("needs True or False for '" + key + "', found " + found());
  }

  Shape read_shape() {
    if (!consume('('))
      fail("needs a tuple of integers for 'shape', such as (2, 3), (3,) or (), found " + found());
    Shape shape;
    bool comma_after_last = false;
    while (true) {
      skip_space();
      if (consume(')')) break;
      shape.push_back(read_dimension());
      skip_space();
      comma_after_last = consume(',');
      if (comma_after_last) continue;
      if (consume(')')) break;
      fail("expects ',' or ')' in 'shape', found " + found());
    }
    // Python reads (3) as the integer 3, which NumPy rejects as a shape.
    if (shape.size() == 1 && !comma_after_last)
      fail("has 'shape': (" + std::to_string(shape[0]) +
           "), an integer in parentheses; a 1-d shape is the tuple (" + std::to_string(shape[0]) +
           ",)");
    return shape;
  }

  int64_t read_dimension() {
    const bool negative = consume('-');
    if (peek() < '0' || peek() > '9') fail("expects an integer in 'shape', found " + found());
    const size_t start = pos_;
    int64_t value = 0;
    for (; peek() >= '0' && peek() <= '9'; ++pos_) {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        fail("has a dimension in 'shape' that does not fit in 64 bits: " +
             std::string(s_.substr(start, 24)));
      value = value * 10 + digit;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // a long integer, written by Python 2
    if (negative && value != 0)
      fail("has the negative dimension -" + std::to_string(value) + " in 'shape'");
    return value;
  }

  void set_dtype(const std::string& descr, NpyHeader& h) const {
    std::string_view rest = descr;
    h.byte_order = std::endian::native;  // '|' (not applicable), '=' (native), or none given
    if (!rest.empty() && (rest[0] == '<' || rest[0] == '>' || rest[0] == '|' || rest[0] == '=')) {
      if (rest[0] == '<') h.byte_order = std::endian::little;
      if (rest[0] == '>') h.byte_order = std::endian::big;
      rest.remove_prefix(1);
    }
    if (rest.starts_with("O"))
      fail("describes an object array (descr '" + descr +
           "'): NumPy stores its Python objects pickled, and drx reads only numeric and bool "
           "arrays: " +
           supported_descrs());
    for (const NpyType& t : kNpyTypes)
      if (rest == std::string(1, t.kind) + std::to_string(dtype_size(t.dtype))) {
        h.dtype = t.dtype;
        return;
      }
    fail("has descr '" + descr + "', a dtype drx does not read (drx reads " + supported_descrs() +
         ", and '>' big-endian forms)");
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text) { return HeaderParser(text).parse(); }

std::string npy_descr(DType dtype, std::endian byte_order) {
  for (const NpyType& t : kNpyTypes)
    if (t.dtype == dtype) return descr_of(t, byte_order);
  if (dtype == DType::bf16)
    throw Error("npy: NumPy has no bf16 dtype (convert the array to f32, or bit-cast it to u16)");
  throw Error("npy: dtype " + std::string(dtype_name(dtype)) +
              " has no .npy descr (add it to kNpyTypes in drx/data/npy_header.cpp)");
}

std::string format_npy_header(const NpyHeader& header) {
  return "{'descr': '" + npy_descr(header.dtype, header.byte_order) +
         "', 'fortran_order': " + (header.fortran_order ? "True" : "False") +
         ", 'shape': " + shape_text(header.shape) + ", }";
}

}  // namespace drx::data
