// Helpers for the test suite: the devices the conformance tests run on,
// closeness checks, and finite-difference gradient checks in Float64.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "flx/flx.hpp"

namespace flx::testing {

// What `os << x` prints: a layer's, a tensor's one-line form.
template <class T>
std::string shown(const T& x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// Whether `part` occurs in `s` (an error message, a program's output).
inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Devices the conformance suite runs on: the CPU always; every other device
// of a functional backend once backends beyond the CPU exist.
std::vector<Device> conformance_devices();
// The same without the CPU: the devices whose results are compared with it.
std::vector<Device> accelerator_devices();

// Expect `t` (any device) to hold `expected` (column-major) within tol.
inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6,
                          const std::string& what = "") {
  auto v = t.to(Device::cpu()).to_vector<double>();
  ASSERT_EQ(v.size(), expected.size()) << what;
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(v[i], expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << what << " at index " << i;
}

inline void expect_close(const Tensor& a, const Tensor& b, double tol = 1e-6, const std::string& what = "") {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  expect_values(a, b.to(Device::cpu()).to_vector<double>(), tol, what);
}

// Check the gradient of f (a scalar function of several tensors) against
// central differences. Inputs should be Float64.
inline void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                            double tol = 1e-6, double h = 1e-6, const std::string& what = "") {
  auto grads = std::get<0>(gradient([&](const std::vector<Tensor>& xs) { return f(xs); }, inputs));
  ASSERT_EQ(grads.size(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<double> base = inputs[k].to_vector<double>();
    std::vector<double> numeric(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      auto eval = [&](double delta) {
        std::vector<double> p = base;
        p[i] += delta;
        std::vector<Tensor> xs = inputs;
        xs[k] = tensor(p, inputs[k].shape()).to(inputs[k].dtype()).to(inputs[k].device());
        return f(xs).item<double>();
      };
      numeric[i] = (eval(h) - eval(-h)) / (2 * h);
    }
    if (!grads[k].defined()) {
      for (double v : numeric) EXPECT_NEAR(v, 0.0, tol) << what << ": no gradient flowed to input " << k;
      continue;
    }
    EXPECT_EQ(grads[k].shape(), inputs[k].shape()) << what << " input " << k;
    EXPECT_EQ(grads[k].dtype(), inputs[k].dtype()) << what << " input " << k;
    expect_values(grads[k], numeric, tol, what + ": d/d input " + std::to_string(k));
  }
}

inline Tensor rand64(std::initializer_list<int64_t> dims, double lo = -1, double hi = 1) {
  return rand(Float64, Shape(dims)) * (hi - lo) + lo;
}

// Run fn and return what it wrote to stderr.
inline std::string capture_stderr(const std::function<void()>& fn) {
  ::testing::internal::CaptureStderr();
  fn();
  return ::testing::internal::GetCapturedStderr();
}

// A fresh directory for one test, removed after it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int n = 0;  // several per test are fine
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? info->name() : "";
    for (char& c : name)
      if (c == '/') c = '_';  // parameterised tests: "Name/OpenCL0"
    path = std::filesystem::temp_directory_path() /
           ("flx_test_" + std::to_string(::getpid()) + "_" + name + "_" + std::to_string(++n));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& f) const { return (path / f).string(); }
  size_t count() const {
    return size_t(std::distance(std::filesystem::directory_iterator(path), std::filesystem::directory_iterator()));
  }
};

// Limits the address space of this process to what it maps now plus extra
// bytes, so that a large allocation fails (death tests of out-of-memory paths;
// useless under ASan, which maps terabytes of shadow memory).
inline void limit_address_space(uint64_t extra) {
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  rlimit lim{};
  ::getrlimit(RLIMIT_AS, &lim);
  lim.rlim_cur = rlim_t(pages * uint64_t(::sysconf(_SC_PAGESIZE)) + extra);
  ::setrlimit(RLIMIT_AS, &lim);
}

// The body of an out-of-memory death test: runs fn under an address-space
// limit of 1 GiB more than the process maps now, prints the message of the E
// it throws and exits 0; exits 1 when a std::bad_alloc escapes instead (what
// a typed error must replace), 2 when fn returns. cleanup runs first.
template <class E>
[[noreturn]] void exit_after_out_of_memory(const std::function<void()>& fn, const std::function<void()>& cleanup) {
  limit_address_space(1ull << 30);
  int code = 2;
  try {
    fn();
  } catch (const E& e) {
    std::fprintf(stderr, "%s\n", e.what());
    code = 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "std::bad_alloc escaped\n");
    code = 1;
  }
  cleanup();
  std::_Exit(code);
}

// The message of the E that fn throws, or "(no error)".
template <class E = Error>
std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

// sum(y .* w) for a fixed random w of y's shape: a loss whose gradient is w.
inline Tensor weighted(const Tensor& y, uint64_t seed) {
  set_seed(seed);
  return sum(y * rand(Float64, y.shape()).to(y.dtype()).to(y.device()));
}

// Every tensor of a model as doubles, in walk order.
std::vector<double> values_of(const auto& model) {
  std::vector<double> out;
  for (const Tensor& t : leaves(model))
    for (double v : t.to(Device::cpu()).to_vector<double>()) out.push_back(v);
  return out;
}

// The names of a state (state(model)), in order.
inline std::vector<std::string> names_of(const State& s) {
  std::vector<std::string> out;
  for (const auto& [name, t] : s) out.push_back(name);
  return out;
}

}  // namespace flx::testing
