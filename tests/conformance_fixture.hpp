// The device conformance suite's fixture, shared by its files
// (test_conformance.cpp: ops, layers and losses; test_conformance_state.cpp:
// optimiser steps, random numbers, memory and moving models): a test runs
// once per (device besides the CPU, element type), or once as a skip that
// says why when no such device is functional.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

namespace flx::testing {

struct Param {
  Device device;
  DType dtype;
};

inline void PrintTo(const Param& p, std::ostream* os) { *os << p.device << " " << p.dtype; }

class Conformance : public ::testing::TestWithParam<Param> {};

inline std::vector<Param> params() {
  std::vector<Param> p;
  for (const auto& d : accelerator_devices())
    for (DType t : {Float32, Float64, Float16, BFloat16}) p.push_back({d, t});
  if (p.empty()) p.push_back({Device::cpu(), Float32});  // placeholder: skips with the reason
  return p;
}

inline std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  if (info.param.device.is_cpu()) return "no_accelerator";
  return std::string(info.param.device.backend()) + std::to_string(info.param.device.ordinal()) + "_" +
         std::string(dtype_name(info.param.dtype));
}

// GTEST_SKIP with the reasons when p is the placeholder (it returns from
// this helper only: callers check IsSkipped()).
inline void skip_without_accelerator(const Param& p) {
  if (p.device.is_cpu()) {
    std::string why;
    for (const auto& name : supported_devices())
      if (name != "CPU") why += "\n  " + name + ": " + backend_status(name).reason;
    GTEST_SKIP() << "no device besides the CPU is functional, so there is nothing to compare with it:" << why;
  }
}

inline bool is_half(DType t) { return t == Float16 || t == BFloat16; }

// Float32 and Float64: relative tolerances (halves: ulps, per case).
inline double tolerance(DType t) { return t == Float64 ? 1e-10 : 2e-5; }

}  // namespace flx::testing
