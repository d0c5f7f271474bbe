#include "drx/export/mapreduce_names.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "drx/array/error.h"
#include "drx/core/trace.h"
#include "drx/trace/trace_tree.h"

namespace drx {
namespace {

const char* const kNameRule =
    "a name is segments of letters, digits, '_', '-' and '.' joined by '/', no segment "
    "starting with '.' (plan values are files NAME.npy)";

bool valid_segment(const std::string& s) {
  if (s.empty() || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char ch) {
    return std::isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
  });
}

// The form's own names: they would collide with its values between parts.
bool reserved(const std::string& n) {
  if (n == "client_index") return true;
  return n.size() >= 2 && (n[0] == 'v' || n[0] == 'c') &&
         std::all_of(n.begin() + 1, n.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

void collect(const Tree& t, const std::string& at, std::vector<std::string>& out) {
  if (t.is_leaf()) {
    out.push_back(at);
    return;
  }
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string seg = t.kind() == Tree::Kind::dict ? t.keys()[i] : std::to_string(i);
    if (!valid_segment(seg))
      throw Error("tree_leaf_names: the key '" + seg + "' under '" + at +
                  "' is not a name segment: " + kNameRule);
    collect(t.children()[i], at.empty() ? seg : at + "/" + seg, out);
  }
}

bool contains(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// Positions in the order a runner goes through the form: stage s's
// server_prepare 4s, client work 4s+1, aggregation 4s+2, server_update 4s+3.
int written_at(const MapReduceForm& f, const std::string& n) {
  for (size_t s = 0; s < f.stages.size(); ++s) {
    const Stage& st = f.stages[s];
    const int base = 4 * static_cast<int>(s);
    if (contains(st.server_prepare.outputs, n)) return base;
    for (const AggregationSpec& a : st.aggregations)
      if (a.server_value == n) return base + 2;
    if (contains(st.server_update.outputs, n)) return base + 3;
  }
  return -1;
}

int last_read_at(const MapReduceForm& f, const std::string& n) {
  int last = -1;
  for (size_t s = 0; s < f.stages.size(); ++s) {
    const Stage& st = f.stages[s];
    const int base = 4 * static_cast<int>(s);
    if (contains(st.server_prepare.inputs, n)) last = base;
    if (contains(st.client_work.inputs, n) || contains(st.broadcast, n)) last = base + 1;
    if (contains(st.server_update.inputs, n)) last = base + 3;
  }
  return last;
}

void rename_all(std::vector<std::string>& names, const std::map<std::string, std::string>& to) {
  for (std::string& n : names)
    if (auto it = to.find(n); it != to.end()) n = it->second;
}

// Makes the last server_update also output `from` under the name `alias`. An input's name may
// also be an output's of that part (an update in place), so `from` is looked up where the
// value is: among the part's inputs for a program input, else first among its outputs.
void add_alias(MapReduceForm& form, const std::string& from, bool program_input,
               const std::string& alias) {
  Part& u = form.stages.back().server_update;
  int var = -1;
  for (size_t k = 0; k < u.outputs.size() && var < 0 && !program_input; ++k)
    if (u.outputs[k] == from) var = u.program.outputs[k];
  for (size_t k = 0; k < u.inputs.size() && var < 0; ++k)
    if (u.inputs[k] == from) var = u.program.inputs[k];
  if (var < 0) {
    var = u.program.add_var(form.types.at(from));
    u.program.inputs.push_back(var);
    u.inputs.push_back(from);
  }
  u.program.outputs.push_back(var);
  u.outputs.push_back(alias);
  form.types[alias] = form.types.at(from);
}

}  // namespace

void check_form_name(const std::string& name, const std::string& op) {
  size_t start = 0;
  while (true) {
    const size_t slash = name.find('/', start);
    const std::string seg = name.substr(start, slash == std::string::npos ? slash : slash - start);
    if (!valid_segment(seg)) throw Error(op + ": '" + name + "' is not a valid name: " + kNameRule);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (reserved(name))
    throw Error(op + ": the name '" + name +
                "' is reserved: client_index, v<digits> and c<digits> name the form's own values");
}

std::vector<std::string> tree_leaf_names(const Tree& t, const std::string& prefix) {
  std::vector<std::string> out;
  collect(t, prefix, out);
  return out;
}

FormNames form_names(const std::vector<Tree>& args, const Tree& result,
                     const std::vector<std::string>& arg_names) {
  if (!arg_names.empty() && arg_names.size() != args.size())
    throw Error("form_names: " + std::to_string(arg_names.size()) + " argument names for " +
                std::to_string(args.size()) + " arguments");
  FormNames names;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string prefix = arg_names.empty() ? "arg" + std::to_string(i) : arg_names[i];
    check_form_name(prefix, "form_names");
    for (std::string& n : tree_leaf_names(args[i], prefix)) names.inputs.push_back(std::move(n));
  }
  names.outputs = tree_leaf_names(result, result.kind() == Tree::Kind::dict ? "" : "out");
  for (const std::string& n : names.outputs) check_form_name(n, "form_names");
  return names;
}

NamedProgram trace_named(const TreeFn& fn, const std::vector<Tree>& examples,
                         const std::vector<std::string>& arg_names) {
  // Inside a trace, the values fn captures would become inputs without names.
  if (current_trace())
    throw Error("trace_named: called inside a trace; trace_named traces a whole program");
  TraceScope scope;
  std::vector<Tree> inputs;
  for (const Type& t : leaf_types(examples)) inputs.emplace_back(scope.add_input(t));
  const Tree args = tree_unflatten(Tree::list(examples), inputs);
  const Tree out = fn(args.children());
  NamedProgram r{scope.finish(leaf_values(out)), form_names(examples, out, arg_names)};
  r.program.name = "main";
  return r;
}

MapReduceForm mapreduce_form(const Program& program, const FormNames& names) {
  const std::string op = "mapreduce_form";
  if (names.inputs.size() != program.inputs.size() ||
      names.outputs.size() != program.outputs.size())
    throw Error(op + ": " + std::to_string(names.inputs.size()) + " input and " +
                std::to_string(names.outputs.size()) + " output names for a program of " +
                std::to_string(program.inputs.size()) + " inputs and " +
                std::to_string(program.outputs.size()) + " outputs");
  for (const std::vector<std::string>* list : {&names.inputs, &names.outputs}) {
    std::set<std::string> seen;
    for (const std::string& n : *list) {
      check_form_name(n, op);
      if (!seen.insert(n).second)
        throw Error(op + ": the name '" + n + "' is given to two " +
                    (list == &names.inputs ? "inputs" : "outputs"));
    }
  }
  MapReduceForm form = mapreduce_form(program);

  std::map<std::string, std::string> to;  // SSA name -> the caller's
  std::set<std::string> dropped;          // place-fed inputs' server names, read by no part
  std::map<std::string, std::string> input_value;  // a server input's name -> its SSA name
  std::set<std::string> data_names;
  for (size_t k = 0; k < names.inputs.size(); ++k) {
    const std::string& old = form.inputs[k];
    const std::string& name = names.inputs[k];
    std::vector<std::string> rows;
    for (const auto& [c, j] : form.client_data)
      if (j == k) rows.push_back(c);
    if (!rows.empty() && !form.client_data.count(old)) {
      // The clients get rows of it through a place; its name goes to the rows.
      if (last_read_at(form, old) >= 0 || contains(form.outputs, old))
        throw Error(op + ": input '" + name +
                    "' is read whole by the server and row by row by the clients; one name "
                    "cannot denote both: pass the server's copy as an argument of its own");
      dropped.insert(old);
    }
    if (rows.empty()) {
      to[old] = name;
      input_value[name] = old;
    }
    for (const std::string& c : rows) to[c] = name;
    if (!rows.empty()) data_names.insert(name);
  }
  std::vector<std::pair<std::string, std::string>> aliases;  // (a named value, another name)
  // Inputs that an output copies under another name: read by the last server_update, so an
  // output replacing them in place must wait until then.
  std::set<std::string> copied;
  for (size_t j = 0; j < names.outputs.size(); ++j)
    if (auto it = to.find(form.outputs[j]); it != to.end() && it->second != names.outputs[j])
      copied.insert(it->second);
  for (size_t j = 0; j < names.outputs.size(); ++j) {
    const std::string& old = form.outputs[j];
    const std::string& name = names.outputs[j];
    if (data_names.count(name))
      throw Error(op + ": output '" + name + "' has the name of the clients' data input '" + name +
                  "'; give it another name");
    if (auto it = to.find(old); it != to.end()) {
      if (it->second != name) aliases.emplace_back(old, name);
      continue;
    }
    if (auto in = input_value.find(name); in != input_value.end()) {
      // An update in place: of the input's type, and written once no part reads the input
      // any more; where a later part still does, the last server_update writes a copy.
      const Type& was = form.types.at(in->second);
      const Type& now = form.types.at(old);
      if (was != now)
        throw Error(op + ": output '" + name + "' is " + now.str() + " but input '" + name +
                    "' is " + was.str() + "; one name is one type: give the output another name");
      const int written = written_at(form, old);
      if (written < 0 || copied.count(name) || last_read_at(form, in->second) > written) {
        aliases.emplace_back(old, name);
        continue;
      }
    }
    to[old] = name;
  }
  for (const auto& [value, alias] : aliases)
    if (auto in = input_value.find(alias);
        in != input_value.end() && form.types.at(in->second) != form.types.at(value))
      throw Error(op + ": output '" + alias + "' is " + form.types.at(value).str() +
                  " but input '" + alias + "' is " + form.types.at(in->second).str() +
                  "; give the output another name");

  form.inputs = names.inputs;
  rename_all(form.outputs, to);
  std::map<std::string, size_t> data;
  for (const auto& [c, k] : form.client_data) data[to.count(c) ? to.at(c) : c] = k;
  form.client_data = std::move(data);
  std::map<std::string, Type> types;
  for (const auto& [n, t] : form.types)
    if (!dropped.count(n)) types[to.count(n) ? to.at(n) : n] = t;
  form.types = std::move(types);
  for (Stage& s : form.stages) {
    for (Part* part : {&s.server_prepare, &s.client_work, &s.server_update}) {
      rename_all(part->inputs, to);
      rename_all(part->outputs, to);
    }
    for (std::vector<std::string>* list : {&s.broadcast, &s.client_data, &s.state_in, &s.state_out})
      rename_all(*list, to);
    for (AggregationSpec& a : s.aggregations)
      for (std::string* n : {&a.client_value, &a.weight, &a.server_value})
        if (auto it = to.find(*n); it != to.end()) *n = it->second;
  }
  for (const auto& [value, alias] : aliases) {
    const std::string from = to.count(value) ? to.at(value) : value;
    const auto in = input_value.find(from);
    add_alias(form, from, in != input_value.end() && in->second == value, alias);
  }
  form.outputs = names.outputs;
  return form;
}

}  // namespace drx
