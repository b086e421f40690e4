// flx-train's learning-rate schedule (apps/flx-train/schedule.hpp) step by
// step: the warm-up's first and last steps, a warm-up that is not a whole
// number of steps or shorter than one (never above the peak), and the
// schedules after it. The end-to-end tests read only each epoch's last
// rate, which a warm-up one step late leaves unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "schedule.hpp"

using flx_train::Args;
using flx_train::learning_rate;

namespace {
Args recipe(double lr, double warmup, int epochs, const char* schedule = "cosine") {
  Args a;
  a.lr = lr;
  a.warmup = warmup;
  a.epochs = epochs;
  a.schedule = schedule;
  return a;
}
// The rate of the run's step t (0-based) with s steps per epoch.
double rate_at(const Args& a, int64_t t, int64_t s) { return learning_rate(a, int(t / s) + 1, t % s, s); }
}  // namespace

TEST(Schedule, WarmUpRisesLinearlyFromTheFirstStepToThePeak) {
  const Args a = recipe(1e-3, 1, 4);  // one epoch of 10 steps: 10 warm-up steps
  EXPECT_DOUBLE_EQ(rate_at(a, 0, 10), 1e-3 / 10);  // the first step already moves
  EXPECT_DOUBLE_EQ(rate_at(a, 1, 10), 2e-3 / 10);
  EXPECT_DOUBLE_EQ(rate_at(a, 4, 10), 5e-3 / 10);
  EXPECT_DOUBLE_EQ(rate_at(a, 9, 10), 1e-3);  // the last warm-up step reaches the peak
  // Then the cosine over the run's 40 steps, from step 10.
  EXPECT_DOUBLE_EQ(rate_at(a, 10, 10), 1e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 10 / 40)));
  EXPECT_DOUBLE_EQ(rate_at(a, 39, 10), 1e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 39 / 40)));
  // exp: lr · decay^(epoch - 1) after the warm-up.
  Args e = recipe(2e-3, 1, 3, "exp");
  e.decay = 0.5;
  EXPECT_DOUBLE_EQ(rate_at(e, 0, 4), 2e-3 / 4);
  EXPECT_DOUBLE_EQ(rate_at(e, 3, 4), 2e-3);
  EXPECT_DOUBLE_EQ(rate_at(e, 4, 4), 1e-3);
  EXPECT_DOUBLE_EQ(rate_at(e, 8, 4), 0.5e-3);
  // No warm-up: the peak from step 0.
  EXPECT_DOUBLE_EQ(rate_at(recipe(1e-3, 0, 2, "exp"), 0, 10), 1e-3);
}

TEST(Schedule, AFractionalWarmUpNeverPassesThePeak) {
  // 0.25 epochs of 10 steps: 2.5 steps; steps 0, 1 and 2 are in it.
  const Args a = recipe(1e-3, 0.25, 2);
  EXPECT_DOUBLE_EQ(rate_at(a, 0, 10), 1e-3 / 2.5);
  EXPECT_DOUBLE_EQ(rate_at(a, 1, 10), 2e-3 / 2.5);
  EXPECT_DOUBLE_EQ(rate_at(a, 2, 10), 1e-3);  // 3 / 2.5 of the peak before the fix
  EXPECT_DOUBLE_EQ(rate_at(a, 3, 10), 1e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 3 / 20)));
  // The CNN recipe (3e-3, 0.3 epochs) with one step per epoch (--limit 64):
  // 0.3 of a step; the first step's rate was 3.3 times the peak.
  const Args cnn = recipe(3e-3, 0.3, 5);
  EXPECT_DOUBLE_EQ(rate_at(cnn, 0, 1), 3e-3);
  EXPECT_DOUBLE_EQ(rate_at(cnn, 1, 1), 3e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 1 / 5)));
  // And every step of a few shapes of run stays within (0, peak].
  for (double warmup : {0.01, 0.3, 0.999, 1.0, 1.5, 2.7})
    for (int64_t s : {1, 2, 3, 7, 938})
      for (int64_t t = 0; t < 3 * s; ++t) {
        const double r = rate_at(recipe(3e-3, warmup, 3), t, s);
        ASSERT_GT(r, 0) << "warmup " << warmup << ", " << s << " steps an epoch, step " << t;
        ASSERT_LE(r, 3e-3) << "warmup " << warmup << ", " << s << " steps an epoch, step " << t;
      }
}

TEST(Schedule, AWarmUpShorterThanAStepGivesThePeak) {
  // --warmup 1e-300 gave lr · 1e300: NaN from the first step.
  for (const char* schedule : {"cosine", "exp"}) {
    const Args a = recipe(1e-3, 1e-300, 1, schedule);
    EXPECT_DOUBLE_EQ(rate_at(a, 0, 938), 1e-3) << schedule;
    EXPECT_DOUBLE_EQ(rate_at(a, 0, 1), 1e-3) << schedule;
    EXPECT_TRUE(std::isfinite(rate_at(recipe(1e-3, 5e-324, 1, schedule), 0, 1))) << schedule;
  }
}
