#include "drx/stablehlo/mlir_lexer.h"

#include <algorithm>

#include "drx/array/error.h"

namespace drx::stablehlo {
namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '$' || c == '.'; }
// Characters of value names and symbols after % and @.
bool is_suffix_char(char c) { return is_ident_char(c) || c == '-'; }

}  // namespace

Lexer::Lexer(std::string_view text) : text_(text) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

int Lexer::line_at(size_t p) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), p);
  return static_cast<int>(it - line_starts_.begin());
}

void Lexer::fail(const std::string& what) const { fail_at(pos_, what); }

void Lexer::fail_at(size_t p, const std::string& what) const {
  throw ParseError("stablehlo: line " + std::to_string(line_at(p)) + ": " + what);
}

std::string Lexer::next_text() {
  skip_ws();
  if (pos_ >= text_.size()) return "the end of the input";
  size_t end = pos_;
  if (is_ident_char(text_[end]) || text_[end] == '%' || text_[end] == '@' || text_[end] == '#') {
    ++end;
    while (end < text_.size() && end - pos_ < 32 && is_suffix_char(text_[end])) ++end;
  } else {
    ++end;
  }
  std::string s(text_.substr(pos_, end - pos_));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + s + "'";
}

void Lexer::skip_ws() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (starts_with("//")) {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    } else if (starts_with("loc(") && (pos_ == 0 || !is_suffix_char(text_[pos_ - 1]))) {
      pos_ += 3;
      balanced("in a location");
    } else {
      break;
    }
  }
}

bool Lexer::at_end() {
  skip_ws();
  return pos_ >= text_.size();
}

char Lexer::peek() {
  skip_ws();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool Lexer::consume(std::string_view s) {
  skip_ws();
  if (!starts_with(s)) return false;
  pos_ += s.size();
  return true;
}

void Lexer::expect(std::string_view s, std::string_view context) {
  if (!consume(s))
    fail("expected '" + std::string(s) + "' " + std::string(context) + ", got " + next_text());
}

bool Lexer::peek_word(std::string_view w) {
  skip_ws();
  return starts_with(w) &&
         (pos_ + w.size() >= text_.size() || !is_ident_char(text_[pos_ + w.size()]));
}

bool Lexer::consume_word(std::string_view w) {
  if (!peek_word(w)) return false;
  pos_ += w.size();
  return true;
}

bool Lexer::next_is_location() const {
  size_t p = pos_;
  while (p < text_.size()) {
    char c = text_[p];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++p;
    } else if (text_.substr(p, 2) == "//") {
      while (p < text_.size() && text_[p] != '\n') ++p;
    } else {
      break;
    }
  }
  return text_.substr(p, 4) == "loc(";
}

void Lexer::skip_past(std::string_view end, std::string_view context) {
  size_t found = text_.find(end, pos_);
  if (found == std::string_view::npos) fail("unterminated " + std::string(context));
  pos_ = found + end.size();
}

bool Lexer::peek_ident() { return is_alpha(peek()); }

bool Lexer::peek_number() {
  char c = peek();
  if (is_digit(c)) return true;
  return (c == '-' || c == '+') && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]);
}

std::string Lexer::ident(std::string_view context) {
  if (!peek_ident()) fail("expected a name " + std::string(context) + ", got " + next_text());
  size_t start = pos_;
  while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
  return std::string(slice(start, pos_));
}

std::string Lexer::value_name(std::string_view context) {
  if (peek() != '%') fail("expected a value " + std::string(context) + ", got " + next_text());
  size_t start = pos_++;
  while (pos_ < text_.size() && is_suffix_char(text_[pos_])) ++pos_;
  if (pos_ == start + 1) fail("expected a value name after '%' " + std::string(context));
  if (pos_ < text_.size() && text_[pos_] == '#') {
    size_t hash = pos_++;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    if (pos_ == hash + 1) fail("expected a result number after '#' " + std::string(context));
  }
  return std::string(slice(start, pos_));
}

std::string Lexer::symbol(std::string_view context) {
  if (peek() != '@') fail("expected a @symbol " + std::string(context) + ", got " + next_text());
  ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '"') return string_literal(context);
  size_t start = pos_;
  while (pos_ < text_.size() && is_suffix_char(text_[pos_])) ++pos_;
  if (pos_ == start) fail("expected a symbol name after '@' " + std::string(context));
  return std::string(slice(start, pos_));
}

std::string Lexer::string_literal(std::string_view context) {
  if (peek() != '"') fail("expected a string " + std::string(context) + ", got " + next_text());
  size_t start = pos_++;
  std::string out;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n')
      fail_at(start, "unterminated string " + std::string(context));
    char c = text_[pos_++];
    if (c == '"') break;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= text_.size()) fail_at(start, "unterminated string " + std::string(context));
    char e = text_[pos_++];
    if (e == '"' || e == '\\') {
      out += e;
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (is_hex(e) && pos_ < text_.size() && is_hex(text_[pos_])) {
      out += static_cast<char>(std::stoi(std::string{e, text_[pos_]}, nullptr, 16));
      ++pos_;
    } else {
      fail("unknown escape '\\" + std::string(1, e) + "' in a string " + std::string(context));
    }
  }
  return out;
}

std::string Lexer::number(std::string_view context) {
  if (!peek_number()) fail("expected a number " + std::string(context) + ", got " + next_text());
  size_t start = pos_;
  if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
  if (starts_with("0x") || starts_with("0X")) {
    pos_ += 2;
    size_t digits = pos_;
    while (pos_ < text_.size() && is_hex(text_[pos_])) ++pos_;
    if (pos_ == digits) fail("expected hex digits after '0x' " + std::string(context));
  } else {
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t e = pos_++;
      if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
      size_t digits = pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      if (pos_ == digits) fail_at(e, "malformed exponent in a number " + std::string(context));
    }
  }
  if (pos_ < text_.size() && is_alpha(text_[pos_]) && text_[pos_] != 'x')
    fail("malformed number '" + std::string(slice(start, pos_ + 1)) + "' " + std::string(context));
  return std::string(slice(start, pos_));
}

std::string Lexer::digits(std::string_view context) {
  skip_ws();
  size_t start = pos_;
  while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
  if (pos_ == start) fail("expected digits " + std::string(context) + ", got " + next_text());
  if (pos_ - start > 18) fail_at(start, "number too large " + std::string(context));
  return std::string(slice(start, pos_));
}

std::string Lexer::label(std::string_view context) {
  if (peek() != '^')
    fail("expected a block label " + std::string(context) + ", got " + next_text());
  size_t start = pos_++;
  while (pos_ < text_.size() && is_suffix_char(text_[pos_])) ++pos_;
  if (pos_ == start + 1) fail("expected a block name after '^' " + std::string(context));
  return std::string(slice(start, pos_));
}

std::string Lexer::balanced(std::string_view context) {
  skip_ws();
  size_t start = pos_;
  std::string stack;
  do {
    if (pos_ >= text_.size())
      fail_at(start, "unbalanced '" + std::string(1, text_[start]) + "' " + std::string(context));
    char c = text_[pos_];
    if (c == '"') {
      string_literal(context);
      continue;
    }
    if (c == '(' || c == '[' || c == '{' || c == '<') {
      stack += c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : '>';
    } else if (c == ')' || c == ']' || c == '}' || c == '>') {
      // "->" inside a type is not a closing bracket.
      if (c == '>' && pos_ > 0 && text_[pos_ - 1] == '-') {
        ++pos_;
        continue;
      }
      if (stack.empty() || stack.back() != c)
        fail("mismatched '" + std::string(1, c) + "' " + std::string(context));
      stack.pop_back();
    } else if (stack.empty()) {
      fail("expected a bracket " + std::string(context) + ", got " + next_text());
    }
    ++pos_;
  } while (!stack.empty());
  return std::string(slice(start, pos_));
}

}  // namespace drx::stablehlo
