// Ops in the generic form, regions and blocks, functions and the module.
#include <algorithm>

#include "drx/array/error.h"
#include "drx/stablehlo/mlir_parser.h"

namespace drx::stablehlo {

void Parser::apply_signature(Operation& op, const Signature& sig) {
  const size_t no = op.operands.size(), nr = op.results.size();
  if (sig.function) {
    op.operand_types = sig.inputs;
    op.result_types = sig.outputs;
    return;
  }
  const std::vector<TensorType>& l = sig.list;
  if (op.name == "stablehlo.select" && l.size() == 2 && no == 3) {
    op.operand_types = {l[0], l[1], l[1]};
    op.result_types.assign(nr, l[1]);
  } else if (l.size() == 1) {
    op.operand_types.assign(no, l[0]);
    op.result_types.assign(nr, l[0]);
  } else if (nr == 0 && l.size() == no) {
    op.operand_types = l;
  } else if (l.size() == no && l.size() == nr) {
    op.operand_types = l;
    op.result_types = l;
  } else {
    lex_.fail(op.name + ": cannot match " + std::to_string(l.size()) + " types to " +
              std::to_string(no) + " operands and " + std::to_string(nr) + " results");
  }
}

void Parser::finish_attributes(Operation& op, size_t at) {
  std::stable_sort(
      op.attributes.begin(), op.attributes.end(),
      [](const NamedAttribute& a, const NamedAttribute& b) { return a.first < b.first; });
  for (size_t k = 1; k < op.attributes.size(); ++k)
    if (op.attributes[k].first == op.attributes[k - 1].first)
      lex_.fail_at(at, "duplicate attribute '" + op.attributes[k].first + "' on " + op.name);
}

std::vector<std::pair<std::string, TensorType>> Parser::parse_block_args(std::string_view context) {
  std::vector<std::pair<std::string, TensorType>> args;
  lex_.expect("(", context);
  if (lex_.consume(")")) return args;
  do {
    std::string name = lex_.value_name(context);
    if (name.find('#') != std::string::npos) lex_.fail("argument name '" + name + "' has a '#'");
    lex_.expect(":", "after argument " + name);
    args.emplace_back(std::move(name), parse_tensor_type("of a block argument"));
  } while (lex_.consume(","));
  lex_.expect(")", "after the arguments " + std::string(context));
  return args;
}

Region Parser::parse_region(const std::vector<std::pair<std::string, TensorType>>* entry_args) {
  DepthGuard guard(*this);
  lex_.skip_ws();
  const int open_line = lex_.line();
  lex_.expect("{", "to open a region");
  Region r;
  if (entry_args != nullptr) r.blocks.push_back(Block{*entry_args, {}});
  while (true) {
    const char c = lex_.peek();
    if (c == '}') {
      lex_.consume("}");
      return r;
    }
    if (c == '\0')
      lex_.fail("unbalanced '{': the region opened on line " + std::to_string(open_line) +
                " is not closed");
    if (c == '^') {
      lex_.label("to start a block");
      std::vector<std::pair<std::string, TensorType>> args;
      if (lex_.peek() == '(') args = parse_block_args("of a block");
      lex_.expect(":", "after a block label");
      if (r.blocks.size() == 1 && entry_args != nullptr && r.blocks[0].ops.empty())
        r.blocks[0].arguments = std::move(args);  // the entry block, labelled
      else
        r.blocks.push_back(Block{std::move(args), {}});
      continue;
    }
    if (r.blocks.empty()) r.blocks.emplace_back();
    r.blocks.back().ops.push_back(parse_op());
  }
}

void Parser::parse_generic_tail(Operation& op) {
  lex_.expect("(", "before the operands of " + op.name);
  if (!lex_.consume(")")) {
    do op.operands.push_back(lex_.value_name("as an operand of " + op.name));
    while (lex_.consume(","));
    lex_.expect(")", "after the operands of " + op.name);
  }
  if (lex_.peek() == '[') lex_.fail(op.name + ": block successors are not supported");
  if (lex_.consume("<")) {
    for (NamedAttribute& kv : parse_dictionary()) op.attributes.push_back(std::move(kv));
    lex_.expect(">", "to close the properties of " + op.name);
  }
  if (lex_.consume("(")) {
    do op.regions.push_back(parse_region(nullptr));
    while (lex_.consume(","));
    lex_.expect(")", "after the regions of " + op.name);
  }
  if (lex_.peek() == '{')
    for (NamedAttribute& kv : parse_dictionary()) op.attributes.push_back(std::move(kv));
  lex_.skip_ws();
  const size_t at = lex_.pos();
  Signature sig = parse_signature(op.name);
  if (!sig.function) lex_.fail_at(at, op.name + ": expected a function type (...) -> (...)");
  apply_signature(op, sig);
}

Operation Parser::parse_op() {
  lex_.skip_ws();
  const size_t start = lex_.pos();
  Operation op;
  op.line = lex_.line();
  if (lex_.peek() == '%') {
    do {
      std::string name = lex_.value_name("as a result");
      if (name.find('#') != std::string::npos) lex_.fail("result name '" + name + "' has a '#'");
      if (lex_.consume(":")) {
        const int64_t k = parse_integer("as a result count");
        if (k < 1 || k > 4096) lex_.fail("bad result count " + std::to_string(k));
        for (int64_t j = 0; j < k; ++j) op.results.push_back(name + "#" + std::to_string(j));
      } else {
        op.results.push_back(std::move(name));
      }
    } while (lex_.consume(","));
    lex_.expect("=", "after the results of an op");
  }
  try {
    parse_op_rest(op, start);
  } catch (const ParseError& e) {
    // Name the op (the innermost one) when the error is found further on.
    const std::string what = e.what(), here = "line " + std::to_string(op.line) + ":";
    if (op.name.empty() || what.find(" (in ") != std::string::npos ||
        what.find(here) != std::string::npos)
      throw;
    throw ParseError(what + " (in " + op.name + " on line " + std::to_string(op.line) + ")");
  }
  return op;
}

void Parser::parse_op_rest(Operation& op, size_t start) {
  if (lex_.peek() == '"') {
    op.name = lex_.string_literal("as an op name");
    if (op.name.empty()) lex_.fail("empty op name");
    parse_generic_tail(op);
  } else {
    if (!lex_.peek_ident()) lex_.fail("expected an op, got " + lex_.next_text());
    op.name = lex_.ident("as an op name");
    if (op.name == "return") op.name = "func.return";
    if (op.name == "call") op.name = "func.call";
    if (op.name == "sdy.mesh") {  // sdy.mesh @name = <...>
      Attribute sym;
      sym.kind = Attribute::Kind::string;
      sym.text = lex_.symbol("after sdy.mesh");
      op.attributes.emplace_back("sym_name", std::move(sym));
      lex_.expect("=", "after the name of sdy.mesh");
      op.attributes.emplace_back("mesh", parse_attribute(false));
    } else {
      parse_pretty(op);
    }
  }
  finish_attributes(op, start);
  if (op.result_types.size() != op.results.size())
    lex_.fail_at(start, op.name + ": " + std::to_string(op.results.size()) + " results but " +
                            std::to_string(op.result_types.size()) + " result types");
  if (op.operand_types.size() != op.operands.size())
    lex_.fail_at(start, op.name + ": " + std::to_string(op.operands.size()) + " operands but " +
                            std::to_string(op.operand_types.size()) + " operand types");
}

Function Parser::parse_function() {
  Function f;
  if (lex_.consume_word("private"))
    f.is_public = false;
  else if (!lex_.consume_word("public"))
    lex_.consume_word("nested");
  f.name = lex_.symbol("as the name of a func.func");
  const std::string context = "of func.func @" + f.name;
  lex_.expect("(", "before the arguments " + context);
  if (!lex_.consume(")")) {
    do {
      std::string name = lex_.value_name("as an argument " + context);
      if (name.find('#') != std::string::npos) lex_.fail("argument name '" + name + "' has a '#'");
      lex_.expect(":", "after argument " + name);
      f.arguments.emplace_back(std::move(name), parse_tensor_type("of an argument " + context));
      f.argument_attributes.push_back(lex_.peek() == '{' ? parse_dictionary() : AttributeList{});
    } while (lex_.consume(","));
    lex_.expect(")", "after the arguments " + context);
  }
  if (lex_.consume("->")) {
    if (lex_.consume("(")) {
      if (!lex_.consume(")")) {
        do {
          f.results.push_back(parse_tensor_type("of a result " + context));
          f.result_attributes.push_back(lex_.peek() == '{' ? parse_dictionary() : AttributeList{});
        } while (lex_.consume(","));
        lex_.expect(")", "after the results " + context);
      }
    } else {
      f.results.push_back(parse_tensor_type("of the result " + context));
      f.result_attributes.emplace_back();
    }
  }
  if (lex_.consume_word("attributes")) f.attributes = parse_dictionary();
  if (lex_.peek() == '{') f.body = parse_region(&f.arguments);
  return f;
}

Function Parser::function_from_generic(Operation& op) {
  auto fail = [&](const std::string& what) {
    throw ParseError("stablehlo: line " + std::to_string(op.line) + ": " + what);
  };
  Function f;
  f.line = op.line;
  const Attribute* name = find_attribute(op.attributes, "sym_name");
  const Attribute* type = find_attribute(op.attributes, "function_type");
  if (name == nullptr || name->kind != Attribute::Kind::string || type == nullptr ||
      type->kind != Attribute::Kind::type || type->list.size() != 2)
    fail("\"func.func\" needs sym_name and function_type");
  f.name = name->text;
  if (const Attribute* vis = find_attribute(op.attributes, "sym_visibility"))
    f.is_public = vis->text != "private";
  for (const Attribute& t : type->list[1].list) f.results.push_back(t.type);
  const std::vector<Attribute>& ins = type->list[0].list;
  if (op.regions.size() > 1) fail("\"func.func\" has more than one region");
  if (!op.regions.empty()) f.body = std::move(op.regions[0]);
  if (!f.body.blocks.empty()) {
    f.arguments = f.body.blocks[0].arguments;
  } else {
    for (size_t k = 0; k < ins.size(); ++k)
      f.arguments.emplace_back("%arg" + std::to_string(k), ins[k].type);
  }
  if (f.arguments.size() != ins.size())
    fail("\"func.func\" @" + f.name + ": the entry block's arguments do not match its type");
  for (size_t k = 0; k < ins.size(); ++k)
    if (!(f.arguments[k].second == ins[k].type))
      fail("\"func.func\" @" + f.name + ": argument " + std::to_string(k) +
           " does not match its type");
  f.argument_attributes.assign(f.arguments.size(), {});
  f.result_attributes.assign(f.results.size(), {});
  for (NamedAttribute& kv : op.attributes) {
    const bool args = kv.first == "arg_attrs", res = kv.first == "res_attrs";
    if (args || res) {
      std::vector<AttributeList>& out = args ? f.argument_attributes : f.result_attributes;
      if (kv.second.kind != Attribute::Kind::array || kv.second.list.size() != out.size())
        fail("\"func.func\" @" + f.name + ": " + kv.first + " does not match its type");
      for (size_t k = 0; k < out.size(); ++k) out[k] = kv.second.list[k].dict;
    } else if (kv.first != "sym_name" && kv.first != "function_type" &&
               kv.first != "sym_visibility") {
      f.attributes.push_back(std::move(kv));
    }
  }
  return f;
}

void Parser::parse_module_body(Module& m, bool braced) {
  while (true) {
    if (braced) {
      if (lex_.consume("}")) return;
      if (lex_.at_end()) lex_.fail("unbalanced '{': the module is not closed");
    } else if (lex_.at_end()) {
      return;
    }
    lex_.skip_ws();
    const int line = lex_.line();
    if (lex_.consume_word("func.func")) {
      Function f = parse_function();
      f.line = line;
      m.functions.push_back(std::move(f));
      continue;
    }
    if (!braced && (lex_.peek() == '#' || lex_.peek_word("module") || lex_.peek() == '{')) return;
    Operation op = parse_op();
    if (op.name == "builtin.module" && !braced && m.functions.empty() && m.operations.empty() &&
        m.name.empty()) {
      add_generic_module(m, op);
      return;
    }
    add_module_op(m, std::move(op));
  }
}

void Parser::add_module_op(Module& m, Operation op) {
  if (op.name == "func.func")
    m.functions.push_back(function_from_generic(op));
  else
    m.operations.push_back(std::move(op));
}

// "builtin.module"() <{sym_name = "m"}> ({ ... }) {attributes} : () -> ()
void Parser::add_generic_module(Module& m, Operation& op) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1)
    throw ParseError("stablehlo: line " + std::to_string(op.line) +
                     ": \"builtin.module\" needs one region of one block");
  for (NamedAttribute& kv : op.attributes) {
    if (kv.first == "sym_name")
      m.name = kv.second.text;
    else
      m.attributes.push_back(std::move(kv));
  }
  for (Operation& inner : op.regions[0].blocks[0].ops) add_module_op(m, std::move(inner));
}

Module Parser::parse_module() {
  Module m;
  bool seen_module = false;
  while (!lex_.at_end()) {
    if (lex_.consume("{-#")) {  // {-# dialect_resources ... #-}
      lex_.skip_past("#-}", "'{-#' block");
      continue;
    }
    if (lex_.peek() == '#') {  // #alias = value
      lex_.consume("#");
      std::string name = lex_.ident("as an attribute alias");
      lex_.expect("=", "after attribute alias #" + name);
      if (lex_.next_is_location())
        lex_.skip_ws();
      else
        aliases_[name] = parse_attribute(true);
      continue;
    }
    if (lex_.peek_word("module")) {
      if (seen_module || !m.functions.empty() || !m.operations.empty())
        lex_.fail("a second module (only one module per text is read)");
      lex_.consume_word("module");
      seen_module = true;
      if (lex_.peek() == '@') m.name = lex_.symbol("as the module name");
      if (lex_.consume_word("attributes")) m.attributes = parse_dictionary();
      lex_.expect("{", "to open the module body");
      parse_module_body(m, true);
      continue;
    }
    if (seen_module) lex_.fail("unexpected " + lex_.next_text() + " after the module");
    const size_t before = lex_.pos();
    parse_module_body(m, false);
    if (lex_.pos() == before) lex_.fail("unexpected " + lex_.next_text() + " at the top level");
  }
  return m;
}

Module parse_mlir(const std::string& text) { return Parser(text).parse_module(); }

const Attribute* find_attribute(const AttributeList& list, std::string_view name) {
  for (const NamedAttribute& kv : list)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

std::string to_string(const TensorType& type) {
  std::string s = "tensor<";
  for (int64_t d : type.shape) s += std::to_string(d) + "x";
  return s + type.element + ">";
}

}  // namespace drx::stablehlo
