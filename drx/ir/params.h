#pragma once
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "drx/array/array.h"

namespace drx {

class Program;

// One parameter of an equation. Sub-programs (bodies of higher-order
// primitives) are parameters too, so every primitive sees one uniform bag.
using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, DType, Array,
                          std::shared_ptr<const Program>>;

bool attr_equal(const Attr& a, const Attr& b);

// Named parameters, kept sorted by name so printing and comparison are canonical.
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::pair<const std::string, Attr>> init) : items_(init) {}

  Params& set(const std::string& key, Attr value) {
    items_[key] = std::move(value);
    return *this;
  }
  bool has(const std::string& key) const { return items_.count(key) != 0; }
  const Attr& at(const std::string& key, const std::string& op) const;

  int64_t get_int(const std::string& key, const std::string& op) const;
  double get_double(const std::string& key, const std::string& op) const;
  const std::string& get_string(const std::string& key, const std::string& op) const;
  const std::vector<int64_t>& get_ints(const std::string& key, const std::string& op) const;
  DType get_dtype(const std::string& key, const std::string& op) const;
  const Array& get_array(const std::string& key, const std::string& op) const;
  const Program& get_program(const std::string& key, const std::string& op) const;

  const std::map<std::string, Attr>& items() const { return items_; }
  bool operator==(const Params& o) const;

 private:
  std::map<std::string, Attr> items_;
};

}  // namespace drx
