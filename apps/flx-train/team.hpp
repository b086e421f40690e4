// Who trains: this process alone (SoloTeam), or with --distributed every
// rank of an MPI job (MpiTeam, team_mpi.hpp). train() in main.cpp takes
// either; what it asks of them:
//
//   rank(), size(), leader()      the leader (rank 0) prints and writes files
//   device()                      where this process trains
//   rule(r)                       the optimiser rule: r, or r after averaging
//                                 the ranks' gradients (DistributedOptimizer)
//   share(data)                   this process's observations of data
//   sum(v), all(ok)               over the ranks (collectives: every rank calls)
//   synchronize(model, opt, ...)  every rank takes the leader's values
//   fail(message)                 a failure at run time: exit status 1 here;
//                                 the end of the whole job for MpiTeam
//   fail_to_start(message)        the same when the team could not be made
#pragma once

#include <flx/flx.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include "args.hpp"

namespace flx_train {

class SoloTeam {
 public:
  static constexpr bool distributed = false;
  explicit SoloTeam(const Args& a)
      : device_(a.device.empty() ? flx::get_device() : flx::get_device(a.device, a.ordinal)) {}

  int rank() const { return 0; }
  int size() const { return 1; }
  bool leader() const { return true; }
  flx::Device device() const { return device_; }
  template <class R>
  const R& rule(const R& r) const {
    return r;
  }
  template <class D>
  D share(D data) const {
    return data;
  }
  double sum(double v) const { return v; }
  bool all(bool ok) const { return ok; }
  template <class M>
  void synchronize(M&, flx::OptState&, int&, int64_t&) const {}
  int fail(const std::string& message) const { return fail_to_start(message); }
  static int fail_to_start(const std::string& message) {
    std::fprintf(stderr, "flx-train: %s\n", message.c_str());
    return 1;
  }
  std::string describe() const { return ""; }

 private:
  flx::Device device_;
};

}  // namespace flx_train
