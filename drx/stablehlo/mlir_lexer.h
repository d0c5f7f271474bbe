#pragma once
// The character-level reader under the MLIR parser: whitespace, comments and
// locations, identifiers, value names, symbols, literals, and errors that name
// the line. Internal to drx/stablehlo.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace drx::stablehlo {

class Lexer {
 public:
  explicit Lexer(std::string_view text);

  // Skips blanks, `// comments` and `loc(...)` locations.
  void skip_ws();
  bool at_end();
  // The next character after skip_ws, or '\0' at the end.
  char peek();
  // True (and consumed) when the text continues with `s` after skip_ws.
  bool consume(std::string_view s);
  void expect(std::string_view s, std::string_view context);
  // The next token is the identifier `w` (not a prefix of a longer one).
  bool peek_word(std::string_view w);
  bool consume_word(std::string_view w);
  bool peek_ident();
  // The text continues, after blanks and comments, with `loc(`.
  bool next_is_location() const;
  // Skips to just after the next `end` (fails when there is none).
  void skip_past(std::string_view end, std::string_view context);
  bool peek_number();

  std::string ident(std::string_view context);           // [A-Za-z_][A-Za-z0-9_$.]*
  std::string value_name(std::string_view context);      // "%x", or "%x#k"
  std::string symbol(std::string_view context);          // @name or @"name", without '@'
  std::string string_literal(std::string_view context);  // decoded contents
  std::string number(std::string_view context);          // a numeric literal as written
  std::string digits(std::string_view context);          // [0-9]+, no sign (tensor dimensions)
  std::string label(std::string_view context);           // "^bb0"
  // Raw text from an opening ( [ { < to its match, strings honoured.
  std::string balanced(std::string_view context);

  size_t pos() const { return pos_; }
  void reset(size_t p) { pos_ = p; }
  std::string_view slice(size_t from, size_t to) const { return text_.substr(from, to - from); }
  int line_at(size_t p) const;
  int line() const { return line_at(pos_); }

  // Throws drx::ParseError "stablehlo: line N: what".
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail_at(size_t p, const std::string& what) const;
  // The upcoming token quoted for messages ("'}'"), or "the end of the input".
  std::string next_text();

 private:
  bool starts_with(std::string_view s) const { return text_.substr(pos_, s.size()) == s; }
  std::string_view text_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
};

}  // namespace drx::stablehlo
