#include "drx/ir/params.h"

#include <cstring>
#include <map>

#include "drx/ir/program.h"

namespace drx {

namespace {
// Maps each variable of one program to its number of first appearance, so
// that two programs traced alike compare equal whatever their raw numbering.
class Renaming {
 public:
  bool same(int a, int b) {
    auto [ia, added_a] = a_.emplace(a, static_cast<int>(a_.size()));
    auto [ib, added_b] = b_.emplace(b, static_cast<int>(b_.size()));
    return ia->second == ib->second && added_a == added_b;
  }

 private:
  std::map<int, int> a_, b_;
};

bool same_vars(const Program& p, const std::vector<int>& a, const Program& q,
               const std::vector<int>& b, Renaming& r) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!r.same(a[i], b[i]) || !(p.type_of(a[i]) == q.type_of(b[i]))) return false;
  return true;
}
}  // namespace

bool same_structure(const Program& p, const Program& q) {
  if (p.placements != q.placements || p.eqns.size() != q.eqns.size()) return false;
  Renaming r;
  if (!same_vars(p, p.inputs, q, q.inputs, r)) return false;
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    const Eqn &e = p.eqns[k], &f = q.eqns[k];
    if (e.prim != f.prim || !same_vars(p, e.ins, q, f.ins, r) ||
        !same_vars(p, e.outs, q, f.outs, r) || !(e.params == f.params))
      return false;
  }
  return same_vars(p, p.outputs, q, q.outputs, r);
}

bool attr_equal(const Attr& a, const Attr& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<Array>(&a)) return x->bitwise_equal(std::get<Array>(b));
  if (auto* p = std::get_if<std::shared_ptr<const Program>>(&a)) {
    const auto& q = std::get<std::shared_ptr<const Program>>(b);
    return *p == q || (*p && q && same_structure(**p, *q));
  }
  if (auto* d = std::get_if<double>(&a)) {
    double e = std::get<double>(b);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  if (auto* i = std::get_if<int64_t>(&a)) return *i == std::get<int64_t>(b);
  if (auto* str = std::get_if<std::string>(&a)) return *str == std::get<std::string>(b);
  if (auto* v = std::get_if<std::vector<int64_t>>(&a))
    return *v == std::get<std::vector<int64_t>>(b);
  return std::get<DType>(a) == std::get<DType>(b);
}

bool Params::operator==(const Params& o) const {
  if (items_.size() != o.items_.size()) return false;
  auto it = o.items_.begin();
  for (const auto& [k, v] : items_) {
    if (k != it->first || !attr_equal(v, it->second)) return false;
    ++it;
  }
  return true;
}

const Attr& Params::at(const std::string& key, const std::string& op) const {
  auto it = items_.find(key);
  if (it == items_.end()) throw TypeError(op + ": missing parameter '" + key + "'");
  return it->second;
}

namespace {
template <class T>
const T& get_as(const Params& p, const std::string& key, const std::string& op, const char* what) {
  const Attr& a = p.at(key, op);
  if (auto* v = std::get_if<T>(&a)) return *v;
  throw TypeError(op + ": parameter '" + key + "' must be " + what);
}
}  // namespace

int64_t Params::get_int(const std::string& key, const std::string& op) const {
  return get_as<int64_t>(*this, key, op, "an integer");
}
double Params::get_double(const std::string& key, const std::string& op) const {
  const Attr& a = at(key, op);
  if (auto* i = std::get_if<int64_t>(&a)) return static_cast<double>(*i);
  return get_as<double>(*this, key, op, "a number");
}
const std::string& Params::get_string(const std::string& key, const std::string& op) const {
  return get_as<std::string>(*this, key, op, "a name");
}
const std::vector<int64_t>& Params::get_ints(const std::string& key, const std::string& op) const {
  return get_as<std::vector<int64_t>>(*this, key, op, "an integer list like [0,1]");
}
DType Params::get_dtype(const std::string& key, const std::string& op) const {
  return get_as<DType>(*this, key, op, "a dtype");
}
const Array& Params::get_array(const std::string& key, const std::string& op) const {
  return get_as<Array>(*this, key, op, "an array literal");
}
const Program& Params::get_program(const std::string& key, const std::string& op) const {
  return *get_as<std::shared_ptr<const Program>>(*this, key, op, "a sub-program (@name)");
}

}  // namespace drx
