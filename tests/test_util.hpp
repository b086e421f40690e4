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
#include <type_traits>
#include <utility>
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


// ---- shared by the layer tests (tests/layers/) ------------------------------------

// Tensors of the given values and shape, as the tests spell them: Float64
// (t64, vec) and Int64 indices (ints).
inline Tensor t64(std::vector<double> v, Shape s) { return tensor(v, s); }
inline Tensor vec(std::vector<double> v, Shape s) { return tensor(v, s); }
inline Tensor ints(std::vector<int64_t> v, Shape s) { return tensor(v, s); }

// The names of a model's state (state(model)), in order.
template <class M>
  requires(!std::is_same_v<M, State>)
std::vector<std::string> names_of(const M& m) {
  return names_of(state(m));
}

// The message of the E that f throws; "wrong exception type: ..." for any
// other exception, "(no error)" when f returns.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "(no error)";
}

// f throws an E whose message holds `part`.
template <class E, class F>
void expect_message(F&& f, const std::string& part) {
  const std::string m = message_of<E>(std::forward<F>(f));
  EXPECT_TRUE(has(m, part)) << "expected \"" << part << "\" in: " << m;
}

// f throws an E whose message holds every one of `parts`.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// Saved, loaded into a copy whose tensors were zeroed: the same tensors.
template <class M>
void expect_round_trip(const M& m) {
  TempDir dir;
  save(dir / "m.safetensors", m);
  M blank = fmap([](const Tensor& t) { return zeros(t.dtype(), t.shape()); }, m);
  loadmodel(blank, load(dir / "m.safetensors"));
  const auto a = leaves(blank), b = leaves(m);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) expect_close(a[k], b[k], 0, "leaf " + std::to_string(k));
}

// The state's names are `names`; saved, loaded into a copy whose tensors were
// zeroed (and so differ): the same values.
template <class M>
void expect_checkpoint_round_trip(const M& m, const std::vector<std::string>& names) {
  EXPECT_EQ(names_of(state(m)), names);
  TempDir dir;
  save(dir / "m.safetensors", m);
  const M blank = fmap([](const Tensor& t) { return zeros(t.dtype(), t.shape()); }, m);
  EXPECT_NE(values_of(blank), values_of(m));
  loadmodel(blank, load(dir / "m.safetensors"));
  EXPECT_EQ(values_of(blank), values_of(m));
}

// One step of Descent(0.1) on sum(m(x)): every trainable leaf moves by -0.1 × its gradient.
template <class M, class... X>
void expect_one_step_moves_every_leaf(M& m, const X&... x) {
  const std::vector<Tensor> before = leaves(m, true);
  std::vector<std::vector<double>> old;
  for (const Tensor& t : before) old.push_back(t.to_vector<double>());
  auto opt = setup(Descent(0.1), m);
  auto [g] = gradient([&](const M& mm) { return weighted(mm(x...), 11); }, m);
  const std::vector<Tensor> grads = leaves(g, true);
  ASSERT_EQ(grads.size(), before.size());
  update(opt, m, g);
  const std::vector<Tensor> after = leaves(m, true);
  ASSERT_EQ(after.size(), before.size());
  for (size_t k = 0; k < after.size(); ++k) {
    const auto now = after[k].to_vector<double>(), gk = grads[k].to_vector<double>();
    bool moved = false;
    for (size_t i = 0; i < now.size(); ++i) {
      EXPECT_NEAR(now[i], old[k][i] - 0.1 * gk[i], 1e-6) << "leaf " << k << " element " << i;
      moved = moved || now[i] != old[k][i];
    }
    EXPECT_TRUE(moved) << "leaf " << k << " did not move";
  }
}

}  // namespace flx::testing
