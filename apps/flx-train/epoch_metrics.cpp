#include "epoch_metrics.hpp"

#include <cstdlib>
#include <sstream>

namespace flx_train {

std::string printed(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string EpochMetrics::json() const {
  std::string s = "{\"epoch\":" + std::to_string(epoch) + ",\"step\":" + std::to_string(step) +
                  ",\"loss\":" + printed(loss) + ",\"test_accuracy\":" + printed(test_accuracy) +
                  ",\"samples\":" + std::to_string(samples) + ",\"train_seconds\":" + printed(train_seconds) +
                  ",\"samples_per_second\":" + printed(samples_per_second) +
                  ",\"learning_rate\":" + printed(learning_rate) + ",\"device\":\"" + device + "\"";
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
