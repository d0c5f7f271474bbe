#pragma once
// Private to drx/core: the lexical rules shared by the printer, the parser and
// verify, kept in one place so that whatever is printed lexes back the same way.
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "drx/ir/program.h"

namespace drx::text {

inline bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool is_ident_char(char c) {
  return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}
inline bool is_ident(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

// A double-quoted string literal; bytes outside printable ASCII become \xHH.
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A name (program, placement, parameter key): bare when it lexes as one
// identifier, quoted otherwise, so any std::string survives the round trip.
inline std::string name_text(std::string_view s) { return is_ident(s) ? std::string(s) : quote(s); }

inline std::string special_float_text(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  return v < 0 ? "-inf" : "inf";
}

// A double parameter: exact (%.17g) and always lexed as a float, never as an int.
inline std::string double_text(double v) {
  if (!std::isfinite(v)) return special_float_text(v);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// An element of an array literal, whose dtype is stated in front of it.
inline std::string f32_text(float v) {
  if (!std::isfinite(v)) return special_float_text(v);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}
inline std::string f64_text(double v) {
  if (!std::isfinite(v)) return special_float_text(v);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// "f32[2,3]", "f32[8,3]@clients" or "f32[4,8,3]@groups.clients" (a placement
// that is not an identifier is quoted).
inline std::string type_text(const Type& t) {
  std::string s = std::string(dtype_name(t.dtype)) + shape_str(t.shape);
  if (!t.placement.empty()) s += "@" + name_text(t.placement);
  return s;
}

// Why `t` cannot be a value's type, or "" if it can: a placed value carries its
// placement (each level of a nested one) as its leading axes.
inline std::string type_problem(const Type& t) {
  if (t.placement.empty()) return {};
  if (std::string problem = placement_path_problem(t.placement); !problem.empty())
    return "type " + type_text(t) + ": " + problem;
  if (t.shape.empty())
    return "type " + type_text(t) + " is placed but has no leading (placement) axis";
  if (t.ndim() < placement_depth(t.placement))
    return "type " + type_text(t) + " is placed at " +
           std::to_string(placement_depth(t.placement)) + " nested placements but has only " +
           std::to_string(t.ndim()) + " axes (one leading axis per placement)";
  return {};
}

// One equation with the program's own variable numbers and sub-programs by
// their own names: for messages about programs that may not be well formed.
std::string raw_eqn_text(const Program& p, const Eqn& e);

}  // namespace drx::text
