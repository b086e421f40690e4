// The message of the flx::NotImplemented that f throws; a test failure (and
// "") when it throws nothing or something else. For the tests of what a
// backend lacks (test_op_tables.cpp, plugins/test_plugin_comm.cpp).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "flx/error.hpp"

namespace flx::testing {

template <class F>
std::string not_implemented(F&& f) {
  try {
    f();
  } catch (const flx::NotImplemented& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a NotImplemented: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

}  // namespace flx::testing
