#pragma once
#include <stdexcept>
#include <string>

namespace drx {

// Every error a user can cause is a drx::Error; its message names the operation,
// the offending types or values, and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A program or value whose types do not fit an operation.
class TypeError : public Error {
 public:
  using Error::Error;
};

// Malformed program text.
class ParseError : public Error {
 public:
  using Error::Error;
};

}  // namespace drx
