#include "checkpoint.hpp"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace fs = std::filesystem;
using flx::CheckpointError;
using flx::State;

namespace flx_train {

namespace {

// Metadata keys of checkpoint.safetensors (and of model.safetensors).
constexpr const char* kFormat = "flx-train.checkpoint";
constexpr const char* kFormatVersion = "1";
constexpr const char* kEpoch = "epoch";
constexpr const char* kStep = "step";
constexpr const char* kPrecision = "precision";
constexpr const char* kLossScale = "loss_scale";
constexpr const char* kGoodSteps = "loss_scale_good_steps";
// Tensors and metadata of the two parts are prefixed with their part's name.
constexpr const char* kModel = "model.";
constexpr const char* kOptimiser = "optimiser.";

void add_part(State& all, const std::string& prefix, const State& part) {
  for (const auto& [name, t] : part) all.insert(prefix + name, t);
  for (const auto& [k, v] : part.metadata()) all.metadata()[prefix + k] = v;
}

State take_part(const State& all, const std::string& prefix) {
  State part;
  for (const auto& [name, t] : all)
    if (name.starts_with(prefix)) part.insert(name.substr(prefix.size()), t);
  for (const auto& [k, v] : all.metadata())
    if (k.starts_with(prefix)) part.metadata()[k.substr(prefix.size())] = v;
  return part;
}

// The metadata value `key` as a whole number in [lo, hi].
int64_t whole_number(const State& s, const std::string& path, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& meaning) {
  const std::string expected = "; expected " + meaning + ", a whole number from " + std::to_string(lo) + " to " +
                               std::to_string(hi) +
                               ". The file was edited or not written by flx-train: train without --resume to start "
                               "over, or restore the checkpoint from a copy";
  auto it = s.metadata().find(key);
  if (it == s.metadata().end()) throw CheckpointError(path + ": the metadata has no \"" + key + "\"" + expected);
  const std::string& v = it->second;
  int64_t x = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || x < lo || x > hi)
    throw CheckpointError(path + ": metadata \"" + key + "\" is \"" + v + "\"" + expected);
  return x;
}

}  // namespace

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {}
std::string CheckpointDir::checkpoint_path() const { return (fs::path(dir_) / "checkpoint.safetensors").string(); }
std::string CheckpointDir::model_path() const { return (fs::path(dir_) / "model.safetensors").string(); }

Checkpoint CheckpointDir::load() const {
  Checkpoint c;
  c.path = checkpoint_path();
  std::error_code ec;
  if (!fs::exists(c.path, ec)) {
    std::string older = fs::exists(fs::path(dir_) / "optimiser.safetensors", ec)
                            ? " (model.safetensors + optimiser.safetensors pairs of older versions cannot be resumed)"
                            : "";
    throw flx::ArgumentError("--resume: no checkpoint in " + dir_ + " (expected " + c.path + ")" + older +
                             "; train without --resume first");
  }
  State all = flx::load(c.path);  // a CheckpointError naming the file on any defect
  auto format = all.metadata().find(kFormat);
  if (format == all.metadata().end() || format->second != kFormatVersion)
    throw CheckpointError(c.path + ": metadata \"" + kFormat + "\" is " +
                          (format == all.metadata().end() ? "missing" : "\"" + format->second + "\"") +
                          "; expected \"" + kFormatVersion + "\": this is not a checkpoint of this flx-train");
  c.at.epoch = int(whole_number(all, c.path, kEpoch, 1, INT_MAX - 1, "the last epoch trained"));
  c.at.step = whole_number(all, c.path, kStep, 0, INT64_MAX, "the number of optimiser steps taken");
  if (auto p = all.metadata().find(kPrecision); p != all.metadata().end()) {
    if (p->second != "f32" && p->second != "bf16" && p->second != "f16")
      throw CheckpointError(c.path + ": metadata \"" + kPrecision + "\" is \"" + p->second +
                            "\"; expected f32, bf16 or f16. The file was edited or not written by flx-train: train "
                            "without --resume to start over, or restore the checkpoint from a copy");
    c.at.precision = p->second;
  }
  if (auto ls = all.metadata().find(kLossScale); ls != all.metadata().end()) {
    const std::string& v = ls->second;
    double scale = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), scale);
    if (v.empty() || ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(scale) || !(scale > 0))
      throw CheckpointError(c.path + ": metadata \"" + kLossScale + "\" is \"" + v +
                            "\"; expected the loss scale, a finite number > 0. The file was edited or not written by "
                            "flx-train: train without --resume to start over, or restore the checkpoint from a copy");
    c.at.loss_scale = std::pair{scale, whole_number(all, c.path, kGoodSteps, 0, INT64_MAX,
                                                     "the loss scaler's good steps in a row")};
  }
  c.model = take_part(all, kModel);
  c.optimiser = take_part(all, kOptimiser);
  return c;
}

void CheckpointDir::prepare() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw flx::ArgumentError("cannot create the checkpoint directory " + dir_ + ": " + ec.message());
  for (const std::string& path : {checkpoint_path(), model_path()})
    for (const std::string& tmp : flx::interrupted_saves(path)) {
      if (fs::remove(tmp, ec); ec)
        throw flx::ArgumentError("cannot remove " + tmp + ", left by an interrupted run: " + ec.message());
      std::fprintf(stderr, "flx-train: removed %s, left by an interrupted run\n", tmp.c_str());
    }
}

namespace {
void add_run_point(State& s, const RunPoint& at) {
  s.metadata()[kEpoch] = std::to_string(at.epoch);
  s.metadata()[kStep] = std::to_string(at.step);
  s.metadata()[kPrecision] = at.precision;
  if (at.loss_scale) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.17g", at.loss_scale->first);  // reads back exactly
    s.metadata()[kLossScale] = scale;
    s.metadata()[kGoodSteps] = std::to_string(at.loss_scale->second);
  }
}
}  // namespace

void CheckpointDir::save(const State& model, const State& optimiser, const RunPoint& at) const {
  State all;
  add_part(all, kModel, model);
  add_part(all, kOptimiser, optimiser);
  all.metadata()[kFormat] = kFormatVersion;
  add_run_point(all, at);
  flx::save(checkpoint_path(), all);
  save_model(model, at);
}

void CheckpointDir::save_model(const State& model, const RunPoint& at) const {
  State alone = model;
  add_run_point(alone, at);
  flx::save(model_path(), alone);
}

}  // namespace flx_train
