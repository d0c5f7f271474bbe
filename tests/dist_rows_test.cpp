// drx/dist's helpers that need no running MPI job: launcher detection and keeping a process's
// rows of a placed value.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "drx/array/error.h"
#include "drx/dist/launch.h"
#ifdef DRX_HAVE_MPI
#include "drx/dist/dist.h"
#endif

namespace drx::dist {
namespace {

// Unsets a variable for the scope, restoring it after.
class Unset {
 public:
  explicit Unset(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v;
    unsetenv(name);
  }
  ~Unset() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }
  Unset(const Unset&) = delete;
  Unset& operator=(const Unset&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(DistLaunch, EachLaunchersVariableMeansMpirun) {
  Unset ompi("OMPI_COMM_WORLD_SIZE"), pmi("PMI_SIZE"), pmix("PMIX_RANK");
  EXPECT_FALSE(launched_by_mpirun());
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    setenv(name, "2", 1);
    EXPECT_TRUE(launched_by_mpirun()) << name;
    unsetenv(name);
    EXPECT_FALSE(launched_by_mpirun()) << name;
  }
}

#ifdef DRX_HAVE_MPI
TEST(DistRows, KeepRowsZeroesTheOtherRows) {
  Array a(f32, {4, 2});
  for (int64_t i = 0; i < 8; ++i) a.data<float>()[i] = static_cast<float>(i + 1);
  EXPECT_EQ(keep_rows(a, {1, 3}).to_vector<float>(), (std::vector<float>{0, 0, 3, 4, 5, 6, 0, 0}));
  EXPECT_EQ(keep_rows(a, {0, 4}).to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(keep_rows(a, {2, 2}).to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(a.to_vector<float>()[0], 1.0f);  // the argument is left alone
  EXPECT_THROW(keep_rows(a, {3, 5}), Error);
  EXPECT_THROW(keep_rows(a, {2, 1}), Error);
  EXPECT_THROW(keep_rows(Array(f32, {}), {0, 0}), Error);
}
#endif

}  // namespace
}  // namespace drx::dist
