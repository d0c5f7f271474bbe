// Issue 27, "no silent failures", the library's unclear messages made clear: errors raised
// while tracing under vmap say so, scan's length must be >= 0, errors about an argument that
// placement inference placed (or could not place) say what inference did, and a program
// header whose placement sizes disagree with the placed values is refused by verify and by
// `drx check`, `run` and `split`.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

::testing::AssertionResult HasAll(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (text.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' not found in: " << text;
  return ::testing::AssertionSuccess();
}

// The message of the drx::Error `fn` throws (a failure if none).
template <class F>
std::string message_of(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no drx::Error thrown";
  return "";
}

// ---- vmap ----------------------------------------------------------------------------

TEST(ClearMessages, ErrorsUnderVmapSaySoWithTheInAxes) {
  // Each row is f32[2]; adding an f32[5] is a shape error inside the mapped function.
  auto f = vmap([](Value row, Value scale) { return row * scale + fill({5}, 1.0, f32); },
                {0, std::nullopt});
  std::string m;
  try {
    trace(f, {Type(f32, {3, 2}), Type(f32, {})});
    ADD_FAILURE() << "no error";
  } catch (const TypeError& e) {  // keeps its type
    m = e.what();
  }
  EXPECT_TRUE(HasAll(m, {"add", "in the function mapped by vmap", "in_axes {0, nullopt}",
                         "mapped axis of size 3"}));
}

TEST(ClearMessages, NestedVmapAddsOneLinePerLevel) {
  auto inner = vmap([](Value x) { return x + fill({7}, 1.0, f32); });
  auto outer = vmap([inner](Value x) { return inner(x); });
  std::string m = message_of([&] { trace(outer, {Type(f32, {4, 3, 2})}); });
  EXPECT_TRUE(HasAll(m, {"mapped axis of size 3", "mapped axis of size 4"}));
  EXPECT_LT(m.find("size 3"), m.find("size 4")) << "innermost first: " << m;
}

// ---- scan's length -------------------------------------------------------------------

TEST(ClearMessages, ScanLengthMustBeNonNegative) {
  auto body = [](Tree c, Tree) { return std::pair<Tree, Tree>(c, Tree()); };
  auto no_xs = [&](Value c) { return scan(body, Tree(c), Tree(), -5).first.value(); };
  EXPECT_TRUE(
      HasAll(message_of([&] { trace(no_xs, {Type(f32, {})}); }), {"scan", "length -5", ">= 0"}));
  // With xs, a negative length was silently replaced by theirs.
  auto with_xs = [&](Value c, Value xs) { return scan(body, Tree(c), Tree(xs), -5).first.value(); };
  EXPECT_TRUE(HasAll(message_of([&] {
                       trace(with_xs, {Type(f32, {}), Type(f32, {4})});
                     }),
                     {"scan", "length -5", ">= 0"}));
  // Not given at all: it must be given, as a count >= 0.
  auto unset = [&](Value c) { return scan(body, Tree(c), Tree()).first.value(); };
  EXPECT_TRUE(HasAll(message_of([&] { trace(unset, {Type(f32, {})}); }),
                     {"xs has no leaves", "length", ">= 0"}));
}

// ---- placement inference -------------------------------------------------------------

TEST(ClearMessages, ErrorsAboutAnInferredArgumentSayItWasInferred) {
  // x f32[3] lands at clients (3 rows), although the author meant it for the server.
  auto f = program({{"clients", 3}}, [](Value x, Value s) { return x * s; });
  std::string m = message_of([&] { trace(f, {Type(f32, {3}), Type(f32, {})}); });
  EXPECT_TRUE(HasAll(m, {"argument 0 (f32[3])", "placed at 'clients'",
                         "leading dimension 3 equals the size of placement 'clients'",
                         "in_placements", "{\"clients\", \"\"}"}));
}

TEST(ClearMessages, ErrorsAboutAnAmbiguousArgumentSayItWasAmbiguous) {
  auto f = program({{"clients", 3}, {"groups", 3}}, [](Value x) { return reduce_sum(x); });
  std::string m = message_of([&] { trace(f, {Type(f32, {3, 2})}); });
  EXPECT_TRUE(HasAll(m, {"reduce_sum", "argument 0 (f32[3,2])", "ambiguous", "'clients'",
                         "'groups'", "in_placements"}));
}

TEST(ClearMessages, ExplicitInPlacementsAddNoInferenceNote) {
  auto f = program({{"clients", 3}}, [](Value x, Value s) { return x * s; }, {"clients", ""});
  std::string m = message_of([&] { trace(f, {Type(f32, {3}), Type(f32, {})}); });
  EXPECT_EQ(m.find("inference"), std::string::npos) << m;
}

// ---- program headers whose sizes disagree with the placed values ----------------------

// A program over 4 clients printed with the header [clients=5].
std::string mismatched_header_text() {
  auto f = program({{"clients", 4}}, [](Value x) { return reduce_sum(x); });
  std::string text = to_string(trace(f, {Type(f32, {4})}));
  const std::string header = "[clients=4]";
  const size_t at = text.find(header);
  EXPECT_NE(at, std::string::npos) << text;
  return text.replace(at, header.size(), "[clients=5]");
}

TEST(ClearMessages, VerifyRefusesPlacedValuesOfTheWrongSize) {
  const std::string text = mismatched_header_text();
  std::string m = message_of([&] { verify(parse_program(text)); });
  EXPECT_TRUE(HasAll(m, {"verify @main", "f32[4]@clients", "clients=5"}));
  // A matching header still verifies.
  auto f = program({{"clients", 4}}, [](Value x) { return reduce_sum(x); });
  EXPECT_NO_THROW(verify(parse_program(to_string(trace(f, {Type(f32, {4})})))));
}

TEST(ClearMessages, CheckRunAndSplitRefuseAMismatchedHeader) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "drx_clear_messages_header";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "prog.drx").string();
  std::ofstream(file) << mismatched_header_text();
  std::vector<std::vector<std::string>> commands = {
      {"check", file}, {"run", file}, {"split", file, "--out", (dir / "parts").string()}};
  for (const std::vector<std::string>& args : commands) {
    CliResult r = cli(args);
    EXPECT_EQ(r.code, 1) << args[0] << ": " << r.out << r.err;
    EXPECT_TRUE(HasAll(r.err, {"f32[4]@clients", "clients=5"})) << args[0];
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace drx::testing
