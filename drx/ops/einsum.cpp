// einsum: Einstein summation over named axes, as jnp.einsum lowers it: each operand's axes
// that no other operand or the result names are summed first, then the operands are
// contracted left to right, each pair by one dot_general (axes both name: batch axes where
// the result or a later operand still names them, contracted otherwise), and the result is
// transposed into the order the subscripts ask for. Its derivatives are those of the ops.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(ops_einsum);

namespace drx {
namespace {

// An operand's axis labels: letters, the axes of "..." as labels of their own (digits, which
// the subscripts cannot contain), one per axis.
using Labels = std::string;

[[noreturn]] void fail(const std::string& subscripts, const std::string& what) {
  throw Error("einsum: '" + subscripts + "': " + what);
}

// `term`'s labels for an operand of `ndim` axes ("..." standing for the axes not named).
Labels expand(const std::string& subscripts, const std::string& term, int64_t ndim,
              int64_t& ellipsis_axes, const std::string& which) {
  const size_t dots = term.find("...");
  std::string letters = term;
  if (dots != std::string::npos) letters.erase(dots, 3);
  for (char c : letters)
    if (!std::isalpha(static_cast<unsigned char>(c)))
      fail(subscripts,
           which + " has '" + std::string(1, c) + "' (expected letters, and at most one '...')");
  const int64_t named = static_cast<int64_t>(letters.size());
  if (dots == std::string::npos) {
    if (ndim >= 0 && named != ndim)
      fail(subscripts, which + " names " + std::to_string(named) + " axes, but the operand has " +
                           std::to_string(ndim));
    return letters;
  }
  // The result's "..." stands for the operands' (none when no operand has one).
  const int64_t rest = ndim >= 0 ? ndim - named : std::max<int64_t>(ellipsis_axes, 0);
  if (rest < 0)
    fail(subscripts, which + " names " + std::to_string(named) + " axes, but the operand has " +
                         std::to_string(ndim));
  if (ellipsis_axes >= 0 && rest != ellipsis_axes)
    fail(subscripts, "'...' stands for " + std::to_string(rest) + " axes in " + which + " but " +
                         std::to_string(ellipsis_axes) +
                         " elsewhere (broadcasting '...' is not supported)");
  ellipsis_axes = rest;
  Labels out = letters.substr(0, dots);
  for (int64_t i = 0; i < rest; ++i) out += static_cast<char>('0' + i);
  return out + letters.substr(dots);
}

std::string describe(char label) {
  return std::isdigit(static_cast<unsigned char>(label)) ? std::string("an axis of '...'")
                                                         : "'" + std::string(1, label) + "'";
}

}  // namespace

DRX_PUBLIC_OP("einsum", "(subscripts: string, operands: vector<Value>) -> Value",
              "Einstein summation, NumPy's subscripts ('ij,jk->ik', '...ij,...jk', implicit "
              "output): dot_general, sum and transpose.");
Value einsum(const std::string& subscripts, const std::vector<Value>& operands) {
  std::string spec;
  for (char c : subscripts)
    if (!std::isspace(static_cast<unsigned char>(c))) spec += c;
  const size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size())
    fail(subscripts, std::to_string(terms.size()) + " operand terms for " +
                         std::to_string(operands.size()) + " operands");
  int64_t ellipsis_axes = -1;
  std::vector<Labels> labels;
  std::map<char, int64_t> size;
  std::map<char, int> uses;
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::string which = "operand " + std::to_string(k) + " ('" + terms[k] + "')";
    Labels l = expand(subscripts, terms[k], operands[k].ndim(), ellipsis_axes, which);
    for (size_t a = 0; a < l.size(); ++a) {
      if (l.find(l[a]) != a)
        fail(subscripts, which + " repeats " + describe(l[a]) +
                             " (a diagonal is not supported; take it with a mask and a sum)");
      const int64_t n = operands[k].shape()[a];
      auto [it, fresh] = size.emplace(l[a], n);
      if (!fresh && it->second != n)
        fail(subscripts, describe(l[a]) + " has size " + std::to_string(it->second) +
                             " in one operand and " + std::to_string(n) + " in " + which);
      ++uses[l[a]];
    }
    labels.push_back(std::move(l));
  }
  Labels output;
  if (arrow == std::string::npos) {  // implicit: '...' first, then the labels used once, sorted
    for (const auto& [label, count] : uses)
      if (std::isdigit(static_cast<unsigned char>(label))) output += label;
    for (const auto& [label, count] : uses)
      if (std::isalpha(static_cast<unsigned char>(label)) && count == 1) output += label;
  } else {
    output = expand(subscripts, spec.substr(arrow + 2), -1, ellipsis_axes, "the result");
    for (size_t a = 0; a < output.size(); ++a) {
      if (output.find(output[a]) != a)
        fail(subscripts, "the result repeats " + describe(output[a]));
      if (!size.count(output[a]))
        fail(subscripts, "the result names " + describe(output[a]) + ", which no operand has");
    }
  }
  auto wanted_after = [&](char label, size_t k) {  // by the result or an operand after k
    if (output.find(label) != std::string::npos) return true;
    for (size_t j = k + 1; j < labels.size(); ++j)
      if (labels[j].find(label) != std::string::npos) return true;
    return false;
  };
  // Each operand's labels no one else names, summed away first.
  std::vector<Value> ops = operands;
  for (size_t k = 0; k < ops.size(); ++k) {
    std::vector<int64_t> alone;
    Labels kept;
    for (size_t a = 0; a < labels[k].size(); ++a) {
      const char c = labels[k][a];
      bool elsewhere = output.find(c) != std::string::npos;
      for (size_t j = 0; j < labels.size() && !elsewhere; ++j)
        elsewhere = j != k && labels[j].find(c) != std::string::npos;
      if (elsewhere)
        kept += c;
      else
        alone.push_back(static_cast<int64_t>(a));
    }
    if (!alone.empty()) ops[k] = sum(ops[k], alone);
    labels[k] = kept;
  }
  Value acc = ops[0];
  Labels acc_labels = labels[0];
  for (size_t k = 1; k < ops.size(); ++k) {
    DotDims dims;
    Labels batch, lhs_free, rhs_free;
    for (size_t a = 0; a < acc_labels.size(); ++a) {
      const char c = acc_labels[a];
      const size_t b = labels[k].find(c);
      if (b == std::string::npos) {
        lhs_free += c;
      } else if (wanted_after(c, k)) {
        dims.lhs_batch.push_back(static_cast<int64_t>(a));
        dims.rhs_batch.push_back(static_cast<int64_t>(b));
        batch += c;
      } else {
        dims.lhs_contracting.push_back(static_cast<int64_t>(a));
        dims.rhs_contracting.push_back(static_cast<int64_t>(b));
      }
    }
    for (char c : labels[k])
      if (acc_labels.find(c) == std::string::npos) rhs_free += c;
    acc = dot_general(acc, ops[k], dims);
    acc_labels = batch + lhs_free + rhs_free;
  }
  // Labels of the result's operand that the result does not name (one operand's, shared with
  // none) were summed above; what is left is a permutation of the result's.
  std::vector<int64_t> perm;
  for (char c : output) perm.push_back(static_cast<int64_t>(acc_labels.find(c)));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  return identity ? acc : transpose(acc, perm);
}

}  // namespace drx
