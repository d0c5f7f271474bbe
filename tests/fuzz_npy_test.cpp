// Seeded fuzzing of the .npy reader: every mutation of a valid .npy file
// either decodes (and then re-encodes to a file that decodes to the same
// array) or throws drx::Error; never a crash or another exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "drx/drx.h"

namespace drx::testing {
namespace {

// Header tokens that push the reader into its error paths.
const std::vector<std::string> kFragments = {"'",
                                             "\"",
                                             "(",
                                             ")",
                                             ",",
                                             ":",
                                             "{",
                                             "}",
                                             "[",
                                             "]",
                                             " ",
                                             "\n",
                                             "\\",
                                             "True",
                                             "False",
                                             "L",
                                             "-1",
                                             "0",
                                             "7",
                                             "99999999999999999999",
                                             "4294967296",
                                             "'descr'",
                                             "'shape'",
                                             "'fortran_order'",
                                             "'<f8'",
                                             "'>i4'",
                                             "'|b1'",
                                             "'|O'",
                                             "'<U2'",
                                             "\x93NUMPY",
                                             std::string(1, '\0'),
                                             "\xff"};

// A .npy file written by hand (any header text; no padding).
std::string npy_file(const std::string& dict, const std::string& data, int major) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::string text = dict + "\n";
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

std::string mutate(const std::string& bytes, std::mt19937_64& rng) {
  std::string s = bytes;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  // Most of the interesting structure is in the first bytes (prefix and header).
  auto position = [&] {
    return rng() % 4 == 0 ? pick(s.size() + 1) : pick(std::min<size_t>(s.size(), 140) + 1);
  };
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    const size_t at = position();
    switch (rng() % 7) {
      case 0:  // truncate
        s.resize(at);
        break;
      case 1:  // overwrite one byte
        if (at < s.size()) s[at] = static_cast<char>(rng() % 256);
        break;
      case 2:  // delete a short range
        if (at < s.size()) s.erase(at, 1 + pick(8));
        break;
      case 3:  // insert a fragment
        s.insert(at, kFragments[pick(kFragments.size())]);
        break;
      case 4: {  // change a number in place (dimensions, item sizes)
        size_t d = s.find_first_of("0123456789", at);
        if (d == std::string::npos) break;
        size_t e = s.find_first_not_of("0123456789", d);
        static const char* const kNumbers[] = {"0", "1", "2", "3", "4", "8", "1000000", "-2"};
        s.replace(d, (e == std::string::npos ? s.size() : e) - d, kNumbers[pick(8)]);
        break;
      }
      case 5:  // change the version or the header length field
        if (s.size() > 9) s[6 + pick(4)] = static_cast<char>(rng() % 256);
        break;
      default:  // append bytes
        s.append(pick(9), static_cast<char>(rng() % 256));
        break;
    }
  }
  return s;
}

TEST(NpyFuzz, MutatedFilesDecodeOrThrowDrxError) {
  std::vector<std::string> seeds;
  seeds.push_back(encode_npy(Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})));
  seeds.push_back(encode_npy(Array::scalar<double>(-0.5)));
  seeds.push_back(encode_npy(Array::from_vector<bool>({true, false, true}, {3})));
  seeds.push_back(encode_npy(Array(DType::i64, {0, 4})));
  seeds.push_back(encode_npy(Array::from_vector<int32_t>({1, -2, 3, -4}, {2, 1, 2})));
  // Fortran order, big-endian, format 2.0 and 3.0, double quotes and Python 2 longs.
  seeds.push_back(npy_file("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }",
                           std::string(24, '\x01'), 1));
  seeds.push_back(npy_file("{\"shape\": (3L, 1L), \"descr\": \"<f8\", \"fortran_order\": False}",
                           std::string(24, '\x40'), 2));
  seeds.push_back(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (4,)}",
                           std::string("\x01\x00\x01\x00", 4), 3));
  for (const std::string& s : seeds) ASSERT_NO_THROW(decode_npy(s));

  // DRX_FUZZ_SCALE=N runs N times as many mutations, from a seed that varies with N.
  const char* scale_env = std::getenv("DRX_FUZZ_SCALE");
  const int scale = scale_env ? std::max(1, std::atoi(scale_env)) : 1;
  std::mt19937_64 rng(20250101 + static_cast<uint64_t>(scale) - 1);
  int decoded = 0, rejected = 0;
  const int per_seed = 1500 * scale;
  auto start = std::chrono::steady_clock::now();
  for (const std::string& seed : seeds) {
    for (int i = 0; i < per_seed; ++i) {
      const std::string bytes = mutate(seed, rng);
      try {
        Array a = decode_npy(bytes, "mutant.npy");
        // What decodes is a well-formed array that survives a round trip.
        ASSERT_EQ(static_cast<int64_t>(a.nbytes()),
                  a.size() * static_cast<int64_t>(dtype_size(a.dtype())));
        ASSERT_TRUE(decode_npy(encode_npy(a)).bitwise_equal(a));
        ++decoded;
      } catch (const Error& e) {
        ASSERT_EQ(std::string(e.what()).rfind("decode_npy: 'mutant.npy': ", 0), 0u) << e.what();
        ++rejected;
      } catch (const std::exception& e) {
        FAIL() << "non-drx exception " << typeid(e).name() << ": " << e.what();
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The mutations reach both outcomes (a fuzzer that only ever fails is not exploring).
  EXPECT_GT(decoded, 200);
  EXPECT_GT(rejected, 2000);
  RecordProperty("decoded", decoded);
  RecordProperty("rejected", rejected);
  RecordProperty("seconds", std::to_string(seconds));
}

}  // namespace
}  // namespace drx::testing
