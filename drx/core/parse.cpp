// Text -> Program: a hand-written lexer and a recursive-descent parser.
//
// The format (what drx/ir/print.cpp writes):
//
//   file      := program+
//   program   := 'program' @name placements? '(' [input (',' input)*] ')'
//                '->' '(' [type (',' type)*] ')' '{' eqn* 'return' [var (',' var)*] '}'
//   placements:= '[' name '=' int (',' name '=' int)* ']'
//   input     := %N ':' type
//   eqn       := (var (',' var)* | '(' ')') '=' op ('[' [attr (',' attr)*] ']')?
//                [var (',' var)*] ':' (type (',' type)* | '(' ')')
//   type      := dtype '[' [int (',' int)*] ']' ('@' placement)?
//                (placement: name ('.' name)*, outermost first, as one token)
//   attr      := key '=' (int | float | "string" | '[' ints ']' | dtype | array | @program)
//   array     := dtype '[' dims ']' '{' [element (',' element)*] '}'
//
// Names are identifiers or "quoted strings"; `//` starts a comment. Floats
// always contain '.' or 'e' (or are nan, inf, -inf), so `1.0` is a double
// parameter and `1` an integer. The first program is the result; the others
// are sub-programs referenced as @name, in any order.
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>

#include "drx/array/half.h"
#include "drx/core/primitive.h"
#include "drx/core/program_text.h"
#include "drx/core/text_syntax.h"

namespace drx {
namespace {

enum class Tok { ident, var, global, integer, real, string, punct, arrow, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;  // identifier, digits of %N, decoded @name or string, number, punctuation
  int line = 1, col = 1;
  size_t begin = 0, end = 0;  // byte offsets into the source
};

[[noreturn]] void fail_at(int line, int col, const std::string& msg) {
  throw ParseError("line " + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
}
[[noreturn]] void fail_at(const Token& t, const std::string& msg) { fail_at(t.line, t.col, msg); }

// A short, printable excerpt of the source.
std::string excerpt(std::string_view src, size_t begin, size_t end, size_t max_len = 40) {
  std::string_view s = src.substr(begin, end - begin);
  bool cut = s.size() > max_len;
  std::string out;
  for (char ch : s.substr(0, max_len)) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return cut ? out + "..." : out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    std::vector<Token> toks;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      t.begin = pos_;
      if (at_end()) {
        toks.push_back(t);
        return toks;
      }
      lex_one(t);
      t.end = pos_;
      toks.push_back(std::move(t));
    }
  }

 private:
  bool at_end(size_t k = 0) const { return pos_ + k >= src_.size(); }
  char peek(size_t k = 0) const { return at_end(k) ? '\0' : src_[pos_ + k]; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  [[noreturn]] void fail_here(const std::string& msg) const { fail_at(line_, col_, msg); }

  void skip_space() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (!at_end() && peek() != '\n') advance();
      } else {
        return;
      }
    }
  }

  void lex_one(Token& t) {
    char c = peek();
    if (text::is_ident_start(c)) {
      t.kind = Tok::ident;
      t.text = ident();
    } else if (c == '%') {
      advance();
      if (!is_digit(peek())) fail_here("expected a variable number after '%', found " + found());
      t.kind = Tok::var;
      while (is_digit(peek())) {
        t.text += peek();
        advance();
      }
    } else if (c == '@') {
      advance();
      t.kind = Tok::global;
      if (text::is_ident_start(peek()))
        t.text = ident();
      else if (peek() == '"')
        t.text = string();
      else
        fail_here("expected a name after '@', found " + found());
    } else if (c == '"') {
      t.kind = Tok::string;
      t.text = string();
    } else if (is_digit(c) || (c == '-' && is_digit(peek(1)))) {
      number(t);
    } else if (c == '-' && peek(1) == '>') {
      t.kind = Tok::arrow;
      t.text = "->";
      advance();
      advance();
    } else if (std::string_view("()[]{},:=-").find(c) != std::string_view::npos) {
      t.kind = Tok::punct;
      t.text = std::string(1, c);
      advance();
    } else {
      fail_here("unexpected character " + found());
    }
  }

  std::string found() const {
    if (at_end()) return "end of input";
    return "'" + excerpt(src_, pos_, pos_ + 1) + "'";
  }

  std::string ident() {
    std::string s;
    while (!at_end() && text::is_ident_char(peek())) {
      s += peek();
      advance();
    }
    return s;
  }

  void digits(std::string& s, const char* what) {
    if (!is_digit(peek())) fail_here(std::string("expected digits ") + what + ", found " + found());
    while (is_digit(peek())) {
      s += peek();
      advance();
    }
  }

  // -?digits(.digits)?([eE][+-]?digits)?
  void number(Token& t) {
    t.kind = Tok::integer;
    if (peek() == '-') {
      t.text += '-';
      advance();
    }
    digits(t.text, "in a number");
    if (peek() == '.') {
      t.kind = Tok::real;
      t.text += '.';
      advance();
      digits(t.text, "after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      t.kind = Tok::real;
      t.text += 'e';
      advance();
      if (peek() == '+' || peek() == '-') {
        t.text += peek();
        advance();
      }
      digits(t.text, "in the exponent");
    }
  }

  std::string string() {
    int line = line_, col = col_;
    advance();  // opening quote
    std::string s;
    for (;;) {
      if (at_end() || peek() == '\n')
        fail_at(line, col, "unterminated string (expected a closing '\"')");
      char c = peek();
      advance();
      if (c == '"') return s;
      if (c != '\\') {
        s += c;
        continue;
      }
      char e = peek();
      if (at_end()) fail_at(line, col, "unterminated string (expected a closing '\"')");
      advance();
      switch (e) {
        case '"':
        case '\\':
          s += e;
          break;
        case 'n':
          s += '\n';
          break;
        case 't':
          s += '\t';
          break;
        case 'r':
          s += '\r';
          break;
        case 'x': {
          int v = 0;
          for (int k = 0; k < 2; ++k) {
            char h = peek();
            int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (at_end() || d < 0)
              fail_here("expected two hex digits after \\x in a string, found " + found());
            v = v * 16 + d;
            advance();
          }
          s += static_cast<char>(v);
          break;
        }
        default:
          fail_at(line_, col_ - 1,
                  "unknown escape '\\" + excerpt(src_, pos_ - 1, pos_) +
                      "' in a string (expected \\\", \\\\, \\n, \\t, \\r or \\xHH)");
      }
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

struct ParsedEqn {
  const Token* start = nullptr;
  std::string text;  // the source of the equation, for messages
  const Primitive* prim = nullptr;
  Params params;                                           // sub-programs not yet resolved
  std::vector<std::pair<std::string, const Token*>> refs;  // parameter key, @name token
  std::vector<int> ins, outs;
  std::vector<Type> out_types;
  std::vector<const Token*> out_type_toks;
};

struct ParsedProgram {
  const Token* name_tok = nullptr;
  std::vector<std::pair<std::string, int64_t>> placements;
  std::vector<Type> var_types;
  std::vector<const Token*> defined_at;  // nullptr: not defined (yet)
  std::vector<int> inputs, outputs;
  std::vector<ParsedEqn> eqns;
};

std::string types_text(const std::vector<Type>& types) {
  std::string s;
  for (size_t k = 0; k < types.size(); ++k) s += (k ? ", " : "") + text::type_text(types[k]);
  return s;
}

// One array element as written: a number token, possibly a '-' before nan/inf.
struct Element {
  const Token* tok;
  bool negated;
};

class Parser {
 public:
  Parser(std::string_view src, std::vector<Token> toks) : src_(src), toks_(std::move(toks)) {
    // Every defined variable takes more than one byte of text, so a larger
    // number cannot come from a printed program; the bound keeps var_types small.
    max_var_ = static_cast<int64_t>(src.size()) + 1024;
  }

  Program parse() {
    do {
      programs_.push_back(parse_program_def());
    } while (is_ident(peek(), "program"));
    if (peek().kind != Tok::end) fail(peek(), "'program' or the end of the text");
    return build_all();
  }

 private:
  // ---- token access --------------------------------------------------------
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  const Token& previous() const { return toks_[pos_ > 0 ? pos_ - 1 : 0]; }
  static bool is_punct(const Token& t, char c) {
    return t.kind == Tok::punct && t.text.size() == 1 && t.text[0] == c;
  }
  static bool is_ident(const Token& t, std::string_view word) {
    return t.kind == Tok::ident && t.text == word;
  }
  bool accept(char c) {
    if (!is_punct(peek(), c)) return false;
    next();
    return true;
  }
  std::string describe(const Token& t) const {
    if (t.kind == Tok::end) return "end of input";
    return "'" + excerpt(src_, t.begin, t.end) + "'";
  }
  [[noreturn]] void fail(const Token& t, const std::string& expected) const {
    fail_at(t, "expected " + expected + ", found " + describe(t));
  }
  const Token& expect(char c, const std::string& context) {
    if (!is_punct(peek(), c)) fail(peek(), "'" + std::string(1, c) + "' " + context);
    return next();
  }
  const Token& expect_kind(Tok kind, const std::string& expected) {
    if (peek().kind != kind) fail(peek(), expected);
    return next();
  }
  std::string name(const std::string& what) {
    const Token& t = peek();
    if (t.kind != Tok::ident && t.kind != Tok::string) fail(t, what);
    return next().text;
  }

  // ---- numbers -------------------------------------------------------------
  int64_t to_int(const Token& t) const {
    int64_t v = 0;
    const char* b = t.text.data();
    const char* e = b + t.text.size();
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec == std::errc::result_out_of_range)
      fail_at(t, "integer " + excerpt(src_, t.begin, t.end) + " is out of range (64-bit)");
    if (ec != std::errc() || p != e) fail(t, "an integer");
    return v;
  }
  int64_t parse_int(const std::string& what) {
    if (peek().kind != Tok::integer) fail(peek(), what);
    return to_int(next());
  }
  template <class F>
  F to_float(const Token& t, bool negated) const {
    F v;
    if (t.kind == Tok::ident) {
      if (t.text == "nan")
        v = std::numeric_limits<F>::quiet_NaN();
      else if (t.text == "inf")
        v = std::numeric_limits<F>::infinity();
      else
        fail(t, "a number");
    } else if (t.kind == Tok::integer || t.kind == Tok::real) {
      errno = 0;
      char* end = nullptr;
      if constexpr (std::is_same_v<F, float>)
        v = std::strtof(t.text.c_str(), &end);
      else
        v = std::strtod(t.text.c_str(), &end);
      // Underflow to a subnormal or zero is exact enough; overflow is an error.
      if (errno == ERANGE && std::isinf(v))
        fail_at(t, "number " + excerpt(src_, t.begin, t.end) + " is out of range for " +
                       (std::is_same_v<F, float> ? "f32" : "f64"));
      if (end != t.text.c_str() + t.text.size()) fail(t, "a number");
    } else {
      fail(t, "a number");
    }
    return negated ? -v : v;
  }

  // ---- variables -----------------------------------------------------------
  int var_number(const Token& t) const {
    if (t.text.size() > 9 || std::stoll(t.text) > max_var_)
      fail_at(t, "variable number %" + excerpt(src_, t.begin + 1, t.end) +
                     " is too large for a text of this length");
    return static_cast<int>(std::stoll(t.text));
  }
  void define(ParsedProgram& p, const Token& t, Type type) {
    auto v = static_cast<size_t>(var_number(t));
    if (v >= p.var_types.size()) {
      p.var_types.resize(v + 1);
      p.defined_at.resize(v + 1, nullptr);
    }
    if (const Token* prev = p.defined_at[v])
      fail_at(t, "%" + t.text + " is already defined at line " + std::to_string(prev->line) + ":" +
                     std::to_string(prev->col) + " (each variable is defined once)");
    p.defined_at[v] = &t;
    p.var_types[v] = std::move(type);
  }
  int use(const ParsedProgram& p, const Token& t) const {
    int v = var_number(t);
    if (static_cast<size_t>(v) >= p.defined_at.size() || !p.defined_at[static_cast<size_t>(v)])
      fail_at(t, "%" + t.text + " is not defined (a variable must be defined before it is used)");
    return v;
  }

  // ---- types and shapes ----------------------------------------------------
  DType parse_dtype(const std::string& what) {
    const Token& t = peek();
    if (t.kind != Tok::ident) fail(t, what);
    for (DType d : kAllDTypes)
      if (dtype_name(d) == t.text) {
        next();
        return d;
      }
    fail_at(t, "unknown dtype " + describe(t) + " (expected " + dtype_names() + ")");
  }

  Shape parse_dims(const std::string& context) {
    const Token& open = expect('[', "to start the dimensions " + context);
    Shape shape;
    int64_t elements = 1;
    if (!is_punct(peek(), ']')) {
      do {
        const Token& t = peek();
        int64_t d = parse_int("a dimension (a non-negative integer) " + context);
        if (d < 0) fail_at(t, "dimension " + std::to_string(d) + " is negative " + context);
        shape.push_back(d);
        // The bound is on the non-zero dims, not on the element count: strides and the
        // kernels' outer/inner sizes multiply the dims on either side of a zero one.
        if (d != 0 && elements > (int64_t{1} << 53) / d)
          fail_at(open, "shape has too many elements (more than 2^53, zero dims aside) " + context);
        if (d != 0) elements *= d;
      } while (accept(','));
    }
    expect(']', "to close the dimensions " + context);
    return shape;
  }

  Type parse_type(const std::string& context) {
    Type t;
    t.dtype = parse_dtype("a type such as f32[2,3] " + context);
    t.shape = parse_dims("of a type " + context);
    if (peek().kind == Tok::global) {
      const Token& at = next();
      t.placement = at.text;
      if (std::string problem = text::type_problem(t); !problem.empty()) fail_at(at, problem);
    }
    return t;
  }

  // ---- programs ------------------------------------------------------------
  ParsedProgram parse_program_def() {
    if (!is_ident(peek(), "program")) fail(peek(), "'program'");
    next();
    ParsedProgram p;
    p.name_tok = &expect_kind(Tok::global, "a program name such as @main after 'program'");
    for (const ParsedProgram& q : programs_)
      if (q.name_tok->text == p.name_tok->text)
        fail_at(*p.name_tok, "program @" + text::name_text(p.name_tok->text) +
                                 " is defined twice (first at line " +
                                 std::to_string(q.name_tok->line) + ")");
    if (accept('[')) {
      do {
        const Token& t = peek();
        std::string pname = name("a placement name");
        expect('=', "after the placement name");
        int64_t size = parse_int("the placement's size (an integer)");
        if (size < 0) fail_at(t, "placement " + pname + " has a negative size");
        if (pname.find('.') != std::string::npos)
          fail_at(t, "placement name " + text::name_text(pname) +
                         " contains '.', which separates nested placements (groups.clients)");
        for (const auto& [n, s] : p.placements)
          if (n == pname) fail_at(t, "placement " + pname + " is declared twice");
        p.placements.emplace_back(pname, size);
      } while (accept(','));
      expect(']', "to close the placement list");
    }
    expect('(', "to start the input list");
    if (!is_punct(peek(), ')')) {
      do {
        const Token& v = expect_kind(Tok::var, "an input variable such as %0");
        expect(':', "after the input variable");
        Type t = parse_type("of an input");
        define(p, v, std::move(t));
        p.inputs.push_back(var_number(v));
      } while (accept(','));
    }
    expect(')', "to close the input list");
    expect_kind(Tok::arrow, "'->' after the inputs");
    expect('(', "to start the output types");
    std::vector<Type> declared;
    std::vector<const Token*> declared_toks;
    if (!is_punct(peek(), ')')) {
      do {
        declared_toks.push_back(&peek());
        declared.push_back(parse_type("of an output"));
      } while (accept(','));
    }
    expect(')', "to close the output types");
    expect('{', "to start the program body");
    while (peek().kind == Tok::var || is_punct(peek(), '(')) p.eqns.push_back(parse_eqn(p));
    if (!is_ident(peek(), "return")) fail(peek(), "an equation or 'return'");
    const Token& ret = next();
    std::vector<const Token*> ret_toks;
    if (peek().kind == Tok::var) {
      do {
        ret_toks.push_back(&expect_kind(Tok::var, "a variable to return"));
        p.outputs.push_back(use(p, *ret_toks.back()));
      } while (accept(','));
    }
    expect('}', "to close the program body");
    if (p.outputs.size() != declared.size())
      fail_at(ret, "return gives " + std::to_string(p.outputs.size()) + " value(s), the program " +
                       "declares " + std::to_string(declared.size()) + " output(s)");
    for (size_t i = 0; i < declared.size(); ++i) {
      const Type& got = p.var_types[static_cast<size_t>(p.outputs[i])];
      if (!(got == declared[i]))
        fail_at(*ret_toks[i], "returned %" + ret_toks[i]->text + " has type " +
                                  text::type_text(got) + ", the program declares output " +
                                  std::to_string(i) + " as " + text::type_text(declared[i]));
    }
    return p;
  }

  ParsedEqn parse_eqn(ParsedProgram& p) {
    ParsedEqn e;
    e.start = &peek();
    std::vector<const Token*> out_toks;
    if (accept('(')) {
      expect(')', "(an equation without outputs is written '() = op ...')");
    } else {
      do {
        out_toks.push_back(&expect_kind(Tok::var, "an output variable such as %3"));
      } while (accept(','));
    }
    expect('=', "after the equation's outputs");
    const Token& op = expect_kind(Tok::ident, "an operation name");
    e.prim = find_primitive(op.text);
    if (!e.prim) fail_at(op, "unknown operation " + describe(op));
    if (accept('[')) {
      if (!is_punct(peek(), ']')) {
        do {
          parse_attr(e);
        } while (accept(','));
      }
      expect(']', "to close the parameters of " + op.text);
    }
    if (peek().kind == Tok::var) {
      do {
        e.ins.push_back(use(p, expect_kind(Tok::var, "an operand variable")));
      } while (accept(','));
    }
    expect(':', "before the output types of " + op.text);
    if (accept('(')) {
      expect(')', "(an equation without outputs is annotated ': ()')");
    } else {
      do {
        e.out_type_toks.push_back(&peek());
        e.out_types.push_back(parse_type("of an output of " + op.text));
      } while (accept(','));
    }
    e.text = excerpt(src_, e.start->begin, previous().end, 200);
    if (out_toks.size() != e.out_types.size())
      fail_at(*e.start, "`" + e.text + "` names " + std::to_string(out_toks.size()) +
                            " output(s) but annotates " + std::to_string(e.out_types.size()) +
                            " type(s)");
    // Equations that refer to sub-programs are checked once those are built.
    if (e.refs.empty()) check_types(e, e.params, p.var_types);
    for (size_t i = 0; i < out_toks.size(); ++i) {
      define(p, *out_toks[i], e.out_types[i]);
      e.outs.push_back(var_number(*out_toks[i]));
    }
    return e;
  }

  void parse_attr(ParsedEqn& e) {
    const Token& key_tok = peek();
    std::string key = name("a parameter name");
    if (e.params.has(key)) fail_at(key_tok, "parameter " + key + " is given twice");
    for (const auto& r : e.refs)
      if (r.first == key) fail_at(key_tok, "parameter " + key + " is given twice");
    expect('=', "after the parameter name " + key);
    const Token& t = peek();
    switch (t.kind) {
      case Tok::integer:
        e.params.set(key, to_int(next()));
        return;
      case Tok::real:
        e.params.set(key, to_float<double>(next(), false));
        return;
      case Tok::string:
        e.params.set(key, next().text);
        return;
      case Tok::global:
        e.refs.emplace_back(key, &next());
        return;
      case Tok::punct:
        if (is_punct(t, '[')) {
          next();
          std::vector<int64_t> ints;
          if (!is_punct(peek(), ']')) {
            do {
              ints.push_back(parse_int("an integer in the list " + key));
            } while (accept(','));
          }
          expect(']', "to close the list " + key);
          e.params.set(key, std::move(ints));
          return;
        }
        if (is_punct(t, '-')) {
          next();
          if (is_ident(peek(), "nan") || is_ident(peek(), "inf")) {
            e.params.set(key, to_float<double>(next(), true));
            return;
          }
          fail(peek(), "nan or inf after '-'");
        }
        break;
      case Tok::ident:
        if (t.text == "nan" || t.text == "inf") {
          e.params.set(key, to_float<double>(next(), false));
          return;
        }
        {
          DType d = parse_dtype("a parameter value");
          if (is_punct(peek(), '['))
            e.params.set(key, parse_array(d, key));
          else
            e.params.set(key, d);
        }
        return;
      default:
        break;
    }
    fail(t, "a value for parameter " + key +
                " (an integer, a float, a \"string\", [integers], a dtype, an array such as "
                "f32[2]{1, 2}, or @program)");
  }

  Array parse_array(DType dtype, const std::string& key) {
    const Token& start = previous();
    Shape shape = parse_dims("of the array " + key);
    expect('{', "to start the elements of the array " + key);
    std::vector<Element> elems;
    if (!is_punct(peek(), '}')) {
      do {
        bool neg = accept('-');
        const Token& t = peek();
        if (neg && !is_ident(t, "nan") && !is_ident(t, "inf")) fail(t, "nan or inf after '-'");
        if (t.kind != Tok::integer && t.kind != Tok::real && t.kind != Tok::ident)
          fail(t, "an element of the array " + key);
        elems.push_back({&next(), neg});
      } while (accept(','));
    }
    expect('}', "to close the elements of the array " + key);
    if (static_cast<int64_t>(elems.size()) != num_elements(shape))
      fail_at(start, "array " + key + " of shape " + shape_str(shape) + " needs " +
                         std::to_string(num_elements(shape)) + " elements, " +
                         std::to_string(elems.size()) + " given");
    Array a(dtype, shape);
    if (is_half(dtype)) {
      for (size_t i = 0; i < elems.size(); ++i)
        a.data<uint16_t>()[i] =
            half_from_double(dtype, to_float<double>(*elems[i].tok, elems[i].negated));
      return a;
    }
    if (is_narrow_integer(dtype)) {
      // Read in the compute dtype (i8 or u8), then range-checked to the width.
      const int bits = integer_bits(dtype);
      const int64_t lo = is_unsigned(dtype) ? 0 : -(int64_t{1} << (bits - 1));
      const int64_t hi =
          is_unsigned(dtype) ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
      for (size_t i = 0; i < elems.size(); ++i) {
        const Token& t = *elems[i].tok;
        if (t.kind != Tok::integer || elems[i].negated)
          fail(t, "an integer in the " + std::string(dtype_name(dtype)) + " array " + key);
        const int64_t v = to_int(t);
        if (v < lo || v > hi)
          fail_at(t,
                  "element " + t.text + " is out of range for " + std::string(dtype_name(dtype)));
        a.data<int8_t>()[i] = static_cast<int8_t>(v);
      }
      return a;
    }
    dispatch_dtype(dtype, [&](auto z) {
      using T = decltype(z);
      T* out = a.data<T>();
      for (size_t i = 0; i < elems.size(); ++i) {
        const Token& t = *elems[i].tok;
        if constexpr (std::is_floating_point_v<T>) {
          out[i] = to_float<T>(t, elems[i].negated);
        } else if constexpr (std::is_same_v<T, uint8_t>) {
          if (is_ident(t, "true") || (t.kind == Tok::integer && t.text == "1"))
            out[i] = 1;
          else if (is_ident(t, "false") || (t.kind == Tok::integer && t.text == "0"))
            out[i] = 0;
          else
            fail(t, "true or false in the bool array " + key);
        } else {
          if (t.kind != Tok::integer || elems[i].negated)
            fail(t, "an integer in the " + std::string(dtype_name(dtype)) + " array " + key);
          int64_t v = to_int(t);
          // (u64 holds every non-negative int64; the comparison is done in int64 otherwise.)
          const bool out_of_range =
              std::is_same_v<T, uint64_t>
                  ? v < 0
                  : v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                        v > static_cast<int64_t>(std::numeric_limits<T>::max());
          if (out_of_range)
            fail_at(t,
                    "element " + t.text + " is out of range for " + std::string(dtype_name(dtype)));
          out[i] = static_cast<T>(v);
        }
      }
    });
    return a;
  }

  // ---- resolution and type checking -----------------------------------------
  Program build_all() {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < programs_.size(); ++i) index[programs_[i].name_tok->text] = i;
    // deps[i]: (program index, @name token) for each reference made by program i.
    std::vector<std::vector<std::pair<size_t, const Token*>>> deps(programs_.size());
    for (size_t i = 0; i < programs_.size(); ++i)
      for (const ParsedEqn& e : programs_[i].eqns)
        for (const auto& [key, tok] : e.refs) {
          auto it = index.find(tok->text);
          if (it == index.end())
            fail_at(*tok, "unknown program @" + text::name_text(tok->text) + " (no 'program @" +
                              text::name_text(tok->text) + "' in the text)");
          deps[i].emplace_back(it->second, tok);
        }
    // Depth-first, iteratively (a long chain must not exhaust the stack):
    // every program is built after the programs it refers to.
    std::vector<std::shared_ptr<const Program>> built(programs_.size());
    std::vector<int> state(programs_.size(), 0);  // 0 new, 1 on the stack, 2 built
    for (size_t root = 0; root < programs_.size(); ++root) {
      if (state[root]) continue;
      std::vector<std::pair<size_t, size_t>> stack{{root, 0}};  // program, next dependency
      state[root] = 1;
      while (!stack.empty()) {
        auto& [i, k] = stack.back();
        if (k < deps[i].size()) {
          auto [j, tok] = deps[i][k++];
          if (state[j] == 1) {
            std::string cycle;
            bool on = false;
            for (const auto& frame : stack) {
              on = on || frame.first == j;
              if (on)
                cycle += "@" + text::name_text(programs_[frame.first].name_tok->text) + " -> ";
            }
            fail_at(*tok, "sub-programs form a cycle: " + cycle + "@" +
                              text::name_text(programs_[j].name_tok->text));
          }
          if (state[j] == 0) {
            state[j] = 1;
            stack.emplace_back(j, 0);
          }
        } else {
          built[i] = std::make_shared<const Program>(build(programs_[i], built, index));
          state[i] = 2;
          stack.pop_back();
        }
      }
    }
    return *built[0];
  }

  Program build(const ParsedProgram& pp, const std::vector<std::shared_ptr<const Program>>& built,
                const std::map<std::string, size_t>& index) const {
    Program p;
    p.name = pp.name_tok->text;
    p.placements = pp.placements;
    p.var_types.assign(pp.var_types.begin(), pp.var_types.end());
    p.inputs = pp.inputs;
    p.outputs = pp.outputs;
    for (const ParsedEqn& pe : pp.eqns) {
      Eqn e{pe.prim, pe.params, pe.ins, pe.outs};
      if (!pe.refs.empty()) {
        for (const auto& [key, tok] : pe.refs) e.params.set(key, built[index.at(tok->text)]);
        check_types(pe, e.params, pp.var_types);
      }
      p.eqns.push_back(std::move(e));
    }
    return p;
  }

  // The primitive's own inference must agree with the annotated output types.
  static void check_types(const ParsedEqn& pe, const Params& params,
                          const std::vector<Type>& var_types) {
    std::vector<Type> in_types;
    for (int v : pe.ins) in_types.push_back(var_types[static_cast<size_t>(v)]);
    std::vector<Type> inferred;
    try {
      inferred = pe.prim->infer_types(in_types, params);
    } catch (const Error& err) {
      fail_at(*pe.start, "in `" + pe.text + "`: " + err.what());
    }
    if (inferred.size() != pe.out_types.size())
      fail_at(*pe.start, "in `" + pe.text + "`: " + pe.prim->name() + " produces " +
                             std::to_string(inferred.size()) + " output(s), the equation names " +
                             std::to_string(pe.out_types.size()));
    for (size_t i = 0; i < inferred.size(); ++i)
      if (!(inferred[i] == pe.out_types[i]))
        fail_at(*pe.out_type_toks[i],
                "in `" + pe.text + "`: output " + std::to_string(i) + " is annotated " +
                    text::type_text(pe.out_types[i]) + " but " + pe.prim->name() + " gives " +
                    text::type_text(inferred[i]) + " for operands (" + types_text(in_types) + ")");
  }

  std::string_view src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int64_t max_var_ = 0;
  std::vector<ParsedProgram> programs_;
};

}  // namespace

Program parse_program(const std::string& text) {
  Parser parser(text, Lexer(text).run());
  return parser.parse();
}

}  // namespace drx
