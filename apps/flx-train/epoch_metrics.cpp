#include "epoch_metrics.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace flx_train {

std::string printed(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

namespace {

// A number in JSON, which has no NaN or infinity: null for those (a
// diverged run's loss), as JavaScript's JSON.stringify writes them.
std::string json_number(double v) { return std::isfinite(v) ? printed(v) : "null"; }

}  // namespace

std::string EpochMetrics::json() const {
  std::string s = "{\"epoch\":" + std::to_string(epoch) + ",\"step\":" + std::to_string(step) +
                  ",\"loss\":" + json_number(loss) + ",\"test_accuracy\":" + json_number(test_accuracy) +
                  ",\"samples\":" + std::to_string(samples) + ",\"train_seconds\":" + json_number(train_seconds) +
                  ",\"samples_per_second\":" + json_number(samples_per_second) +
                  ",\"learning_rate\":" + json_number(learning_rate) + ",\"device\":\"" + device + "\"";
  if (workers > 0) s += ",\"workers\":" + std::to_string(workers);
  return s + "}";
}

std::vector<std::pair<std::string, double>> EpochMetrics::scalars() const {
  auto as_printed = [](double v) { return std::strtod(printed(v).c_str(), nullptr); };
  return {{"loss", as_printed(loss)},
          {"test_accuracy", as_printed(test_accuracy)},
          {"learning_rate", as_printed(learning_rate)},
          {"samples_per_second", as_printed(samples_per_second)},
          {"epoch", double(epoch)}};
}

}  // namespace flx_train
