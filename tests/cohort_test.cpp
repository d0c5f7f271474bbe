// A round's cohort in a fixed number of slots (drx/data/cohort.h): padding and DP participation.
#include "drx/data/cohort.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "drx/array/error.h"
#include "drx/data/sampling.h"

namespace drx::data {
namespace {

TEST(Cohort, SlotsAreTheCohortOrThePoissonCapacity) {
  EXPECT_EQ(cohort_slots(CohortSampling::fixed_size, 100, 10), 10);
  // m = 10: ceil(10 + 8 sqrt(10) + 30) = ceil(65.30) = 66.
  EXPECT_EQ(cohort_slots(CohortSampling::poisson, 100, 10), 66);
  // Never more than the clients.
  EXPECT_EQ(cohort_slots(CohortSampling::poisson, 20, 10), 20);
}

TEST(Cohort, PaddingRepeatsTheFirstClient) {
  const PaddedCohort p = pad_cohort({3, 5}, 4, 0);
  EXPECT_EQ(p.slots, (std::vector<int64_t>{3, 5, 3, 3}));
  EXPECT_EQ(p.real, 2);
  const PaddedCohort none = pad_cohort({}, 3, 0);
  EXPECT_EQ(none.slots, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(none.real, 0);
  const PaddedCohort full = pad_cohort({1, 2}, 2, 0);
  EXPECT_EQ(full.slots, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(full.real, 2);
}

TEST(Cohort, MoreClientsThanSlotsNamesTheRound) {
  try {
    pad_cohort({1, 2, 3}, 2, 6);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "fedavg: round 7 sampled 3 clients, more than the 2 padded slots (a probability "
                 "below 1e-12 per round)");
  }
}

// The tool's code before the move, copied: the library samples and pads the same clients.
std::vector<int64_t> todays_cohort(bool poisson, int64_t clients, int64_t cohort, uint64_t seed,
                                   int64_t round) {
  const double rate = static_cast<double>(cohort) / static_cast<double>(clients);
  std::vector<int64_t> c = poisson ? sample_poisson_cohort(clients, rate, seed, round)
                                   : sample_cohort(clients, cohort, seed, round);
  const int64_t slots = poisson ? poisson_cohort_capacity(clients, rate) : cohort;
  c.resize(static_cast<size_t>(slots), c.empty() ? 0 : c[0]);
  return c;
}

TEST(Cohort, SampledAsTheToolSampledAndPadded) {
  const uint64_t seed = derive_seed(42, 3);
  for (int64_t round = 0; round < 20; ++round) {
    const PaddedCohort f = sample_padded_cohort(CohortSampling::fixed_size, 50, 7, seed, round);
    EXPECT_EQ(f.slots, todays_cohort(false, 50, 7, seed, round));
    EXPECT_EQ(f.real, 7);
    const PaddedCohort p = sample_padded_cohort(CohortSampling::poisson, 200, 10, seed, round);
    EXPECT_EQ(p.slots, todays_cohort(true, 200, 10, seed, round));
    EXPECT_EQ(p.real, static_cast<int64_t>(sample_poisson_cohort(200, 0.05, seed, round).size()));
    ASSERT_EQ(static_cast<int64_t>(p.slots.size()), poisson_cohort_capacity(200, 0.05));
    for (int64_t k = 1; k < p.real; ++k) EXPECT_LT(p.slots[k - 1], p.slots[k]);
  }
}

// Slots [2, 6) of a cohort with 3 sampled clients: slot 2 is real, 3..5 padding.
TEST(Cohort, PaddingSlotsWeighNothingAndMaskEverything) {
  Array mask(f32, {4, 2, 3});
  for (int64_t i = 0; i < mask.size(); ++i) mask.data<float>()[i] = 1.0f;
  const Array w = dp_participation(3, 2, 6, mask);
  ASSERT_EQ(w.shape(), (Shape{4}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 0, 0, 0}));
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(mask.data<float>()[k * 6 + j], k == 0 ? 1.0f : 0.0f) << "slot " << 2 + k;
  // Every slot real: the mask is left alone.
  Array ones(f32, {2, 1, 1});
  ones.data<float>()[0] = ones.data<float>()[1] = 1.0f;
  EXPECT_EQ(dp_participation(5, 0, 2, ones).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(ones.to_vector<float>(), (std::vector<float>{1, 1}));
  // A rank without slots.
  Array empty(f32, {0, 2, 3});
  EXPECT_EQ(dp_participation(3, 4, 4, empty).shape(), (Shape{0}));
}

TEST(Cohort, ParticipationChecksTheMask) {
  Array rows3(f32, {3, 2});
  EXPECT_THROW(dp_participation(1, 0, 2, rows3), Error);
  Array ints(DType::i32, {2, 2});
  EXPECT_THROW(dp_participation(1, 0, 2, ints), Error);
  EXPECT_THROW(dp_participation(1, 3, 2, rows3), Error);
}

}  // namespace
}  // namespace drx::data
