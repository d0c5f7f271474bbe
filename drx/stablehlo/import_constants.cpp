// Element types and dense constants.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "drx/array/error.h"
#include "drx/array/half.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

[[noreturn]] void bad(int line, const std::string& what) {
  throw Error("stablehlo: line " + std::to_string(line) + ": " + what);
}

uint64_t parse_hex(const std::string& s, int line) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str() + 2, &end, 16);
  if (errno == ERANGE || *end != '\0') bad(line, "bad hexadecimal element '" + s + "'");
  return v;
}

// One element literal into dst (dtype_size(dt) bytes).
void store(const std::string& lit, DType dt, char* dst, int line) {
  const bool hex = lit.size() > 2 && lit[0] == '0' && (lit[1] == 'x' || lit[1] == 'X');
  auto put = [&](auto v) { std::memcpy(dst, &v, sizeof v); };
  switch (dt) {
    case DType::f32: {
      if (hex) return put(static_cast<uint32_t>(parse_hex(lit, line)));
      return put(std::strtof(lit.c_str(), nullptr));
    }
    case DType::f64: {
      if (hex) return put(parse_hex(lit, line));
      return put(std::strtod(lit.c_str(), nullptr));
    }
    case DType::bf16:
    case DType::f16: {  // decimal literals round once, straight from the double
      if (hex) return put(static_cast<uint16_t>(parse_hex(lit, line)));
      return put(half_from_double(dt, std::strtod(lit.c_str(), nullptr)));
    }
    case DType::bool_: {
      if (lit == "true" || lit == "1") return put(uint8_t{1});
      if (lit == "false" || lit == "0") return put(uint8_t{0});
      if (hex) return put(static_cast<uint8_t>(parse_hex(lit, line) != 0));
      bad(line, "bad i1 element '" + lit + "'");
    }
    default:
      break;
  }
  int64_t v = 0;
  if (hex) {
    v = static_cast<int64_t>(parse_hex(lit, line));
  } else {
    char* end = nullptr;
    errno = 0;
    if (!lit.empty() && lit[0] != '-') {
      v = static_cast<int64_t>(std::strtoull(lit.c_str(), &end, 10));
    } else {
      v = std::strtoll(lit.c_str(), &end, 10);
    }
    if (errno == ERANGE || end == lit.c_str() || *end != '\0')
      bad(line, "bad integer element '" + lit + "'");
  }
  switch (dt) {
    case DType::i32:
      return put(static_cast<int32_t>(v));
    case DType::i64:
      return put(v);
    case DType::u32:
      return put(static_cast<uint32_t>(v));
    case DType::u8:
      return put(static_cast<uint8_t>(v));
    case DType::i8:
      return put(static_cast<int8_t>(v));
    case DType::i16:
      return put(static_cast<int16_t>(v));
    case DType::u16:
      return put(static_cast<uint16_t>(v));
    case DType::u64:
      return put(static_cast<uint64_t>(v));
    case DType::i2:
    case DType::i4:
    case DType::u2:
    case DType::u4: {  // one byte, holding the value: out of range is a malformed literal
      const int bits = integer_bits(dt);
      const int64_t lo = is_unsigned(dt) ? 0 : -(int64_t{1} << (bits - 1));
      const int64_t hi =
          is_unsigned(dt) ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
      if (v < lo || v > hi)
        bad(line, "element " + lit + " is out of range for " + std::string(dtype_name(dt)) + " (" +
                      std::to_string(lo) + " to " + std::to_string(hi) + ")");
      return put(static_cast<int8_t>(v));
    }
    default:
      bad(line, "no integer elements for dtype " + std::string(dtype_name(dt)));
  }
}

}  // namespace

DType element_dtype(const std::string& e, int line) {
  std::string names;
  for (const DTypeInfo& r : kDTypeTable) {
    if (r.mlir_name == e) return r.dtype;
    names += (names.empty() ? "" : ", ") + std::string(r.mlir_name);
  }
  bad(line, "element type " + e + " is not supported (drx holds " + names + ")");
}

Array dense_array(const Attribute& a, const TensorType& type, int line) {
  if (a.kind != Attribute::Kind::dense) bad(line, "expected a dense<...> constant");
  const DType dt = element_dtype(type.element, line);
  // A splat names its size without spelling it out: refuse one too large to hold rather than
  // fail in the allocator.
  constexpr int64_t kMaxElements = int64_t{1} << 28;
  int64_t count = 1;
  for (int64_t d : type.shape)
    count = d == 0 || count == 0 ? 0 : (d > kMaxElements / count ? kMaxElements + 1 : count * d);
  if (count > kMaxElements)
    bad(line, "a constant " + to_string(type) + " of more than 2^28 elements is not supported");
  Array out(dt, type.shape);
  const size_t width = dtype_size(dt);
  const int64_t n = out.size();
  char* dst = static_cast<char*>(out.raw());
  if (!a.hex.empty()) {
    const size_t bytes = a.hex.size() / 2;
    const bool one = bytes == width;
    if (a.hex.size() % 2 != 0 || (!one && bytes != width * static_cast<size_t>(n)))
      bad(line, "a hex constant of " + std::to_string(bytes) + " bytes for " + to_string(type));
    std::vector<char> raw(bytes);
    for (size_t i = 0; i < bytes; ++i)
      raw[i] = static_cast<char>(std::strtoul(a.hex.substr(2 * i, 2).c_str(), nullptr, 16));
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * width, raw.data() + (one ? 0 : i * width), width);
    return out;
  }
  if (a.elements.empty()) {
    if (n != 0) bad(line, "an empty constant for " + to_string(type));
    return out;
  }
  const bool splat = a.elements.size() == 1;
  if (!splat && static_cast<int64_t>(a.elements.size()) != n)
    bad(line, std::to_string(a.elements.size()) + " elements for " + to_string(type));
  for (int64_t i = 0; i < n; ++i)
    store(a.elements[splat ? 0 : static_cast<size_t>(i)], dt, dst + i * width, line);
  return out;
}

}  // namespace drx::stablehlo::detail
