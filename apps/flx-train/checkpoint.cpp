#include "checkpoint.hpp"

#include <charconv>
#include <climits>
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
  c.epoch = int(whole_number(all, c.path, kEpoch, 1, INT_MAX - 1, "the last epoch trained"));
  c.step = whole_number(all, c.path, kStep, 0, INT64_MAX, "the number of optimiser steps taken");
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

void CheckpointDir::save(const State& model, const State& optimiser, int epoch, int64_t step) const {
  State all;
  add_part(all, kModel, model);
  add_part(all, kOptimiser, optimiser);
  all.metadata()[kFormat] = kFormatVersion;
  all.metadata()[kEpoch] = std::to_string(epoch);
  all.metadata()[kStep] = std::to_string(step);
  flx::save(checkpoint_path(), all);
  save_model(model, epoch, step);
}

void CheckpointDir::save_model(const State& model, int epoch, int64_t step) const {
  State alone = model;
  alone.metadata()[kEpoch] = std::to_string(epoch);
  alone.metadata()[kStep] = std::to_string(step);
  flx::save(model_path(), alone);
}

}  // namespace flx_train
