// backend_common/env_switch.hpp: the environment's on/off switches and
// choices (FLX_DENSE_FUSED, FLX_CPU_F32_GEMM, ...) take their words, fall
// back to the default when unset or empty, and say so on stderr, naming
// the variable, the value and the words, when the value is none of them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend_common/env_switch.hpp"

namespace {

using flx::backend_common::env_choice;
using flx::backend_common::env_switch;

constexpr const char* kName = "FLX_TEST_ENV_SWITCH";

// env_switch(kName, fallback) with kName set to `value` (nullptr: unset),
// and what it printed on stderr.
std::pair<bool, std::string> switch_with(const char* value, bool fallback) {
  if (value) setenv(kName, value, 1);
  else unsetenv(kName);
  testing::internal::CaptureStderr();
  const bool on = env_switch(kName, fallback);
  const std::string said = testing::internal::GetCapturedStderr();
  unsetenv(kName);
  return {on, said};
}

TEST(EnvSwitch, OnOffWordsAndTheDefault) {
  for (bool fallback : {false, true}) {
    EXPECT_EQ(switch_with(nullptr, fallback), std::make_pair(fallback, std::string()));
    EXPECT_EQ(switch_with("", fallback), std::make_pair(fallback, std::string()));
    EXPECT_EQ(switch_with("1", fallback), std::make_pair(true, std::string()));
    EXPECT_EQ(switch_with("true", fallback), std::make_pair(true, std::string()));
    EXPECT_EQ(switch_with("0", fallback), std::make_pair(false, std::string()));
    EXPECT_EQ(switch_with("false", fallback), std::make_pair(false, std::string()));
  }
}

TEST(EnvSwitch, AnyOtherValueIsReportedAndIgnored) {
  for (const char* bad : {"yes", "off", "01", " 0", "2"}) {
    for (bool fallback : {false, true}) {
      const auto [on, said] = switch_with(bad, fallback);
      EXPECT_EQ(on, fallback) << bad;
      EXPECT_EQ(said, std::string("flx: ignoring FLX_TEST_ENV_SWITCH=\"") + bad +
                          "\": expected 1, 0, true or false\n");
    }
  }
}

TEST(EnvSwitch, ChoiceNamesTheWords) {
  setenv(kName, "openblas", 1);
  EXPECT_EQ(env_choice(kName, {"onednn", "openblas"}, 0), 1);
  setenv(kName, "onednn", 1);
  EXPECT_EQ(env_choice(kName, {"onednn", "openblas"}, 1), 0);
  setenv(kName, "OpenBLAS", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(env_choice(kName, {"onednn", "openblas"}, 0), 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "flx: ignoring FLX_TEST_ENV_SWITCH=\"OpenBLAS\": expected onednn or openblas\n");
  unsetenv(kName);
}

}  // namespace
