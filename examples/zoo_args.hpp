// The command line and the result line the model zoo's character-level
// examples share.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>

namespace zoo {

struct Args {
  int steps = 300;
  int64_t batch = 32, seq = 64;
  uint64_t seed = 1;
  std::string device;  // empty: get_device()
  std::string precision = "f32";  // f32, bf16 or f16 (an example that takes --precision)
  int64_t dim = 64, heads = 4, layers = 2;  // a transformer's width, heads and blocks (with_size)
  std::string tb;  // --tb DIR: a TensorBoard log directory (an example that takes it: with_tb)
};

// --steps N --batch N --seq N --seed N --device NAME, --precision
// f32|bf16|f16 for an example that trains in low precision (with_precision),
// and --dim N --heads N --layers N for one whose size is chosen (with_size),
// --tb DIR for one that logs to TensorBoard (with_tb); `defaults` holds the
// example's own defaults. Anything else prints the usage and exits with
// status 2.
inline Args parse_args(int argc, char** argv, const char* name, bool with_precision = false,
                       bool with_size = false, const Args& defaults = Args{}, bool with_tb = false) {
  Args a = defaults;
  auto usage = [&] {
    std::fprintf(stderr, "usage: %s [--steps N] [--batch N] [--seq N] [--seed N] [--device NAME]%s%s%s\n", name,
                 with_precision ? " [--precision f32|bf16|f16]" : "",
                 with_size ? " [--dim N] [--heads N] [--layers N]" : "", with_tb ? " [--tb DIR]" : "");
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage();
    const std::string v = argv[++i];
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    const bool number = !v.empty() && *end == '\0' && n >= 1;
    if (f == "--device") a.device = v;
    else if (f == "--tb" && with_tb) a.tb = v;
    else if (f == "--precision" && with_precision && (v == "f32" || v == "bf16" || v == "f16")) a.precision = v;
    else if (!number) usage();
    else if (f == "--steps") a.steps = int(n);
    else if (f == "--batch") a.batch = n;
    else if (f == "--seq") a.seq = n;
    else if (f == "--seed") a.seed = uint64_t(n);
    else if (with_size && f == "--dim") a.dim = n;
    else if (with_size && f == "--heads") a.heads = n;
    else if (with_size && f == "--layers") a.layers = n;
    else usage();
  }
  return a;
}

// One JSON object: {"model":..., "steps":..., "seconds":..., "val_loss":..., "sample":"..."}.
inline std::string result_json(const std::string& model, int steps, double seconds, double val_loss,
                               const std::string& sample) {
  std::ostringstream js;
  js << "{\"model\":\"" << model << "\",\"steps\":" << steps << ",\"seconds\":" << seconds
     << ",\"val_loss\":" << std::setprecision(8) << val_loss << ",\"sample\":\"";
  for (unsigned char c : sample) {
    if (c == '"' || c == '\\') js << '\\' << c;
    else if (c == '\n') js << "\\n";
    else if (c < 0x20 || c >= 0x7f) js << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(c) << std::dec;
    else js << c;
  }
  js << "\"}";
  return js.str();
}

// One JSON object of an image model: {"model":..., "steps":..., "seconds":..., "<metric>":...}.
inline std::string metric_json(const std::string& model, int steps, double seconds, const std::string& metric,
                               double value) {
  std::ostringstream js;
  js << "{\"model\":\"" << model << "\",\"steps\":" << steps << ",\"seconds\":" << seconds << ",\"" << metric
     << "\":" << std::setprecision(8) << value << "}";
  return js.str();
}

}  // namespace zoo
