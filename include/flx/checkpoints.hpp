// Checkpoints: models and optimiser states as safetensors files.
//
//   save("model.safetensors", model);            // from any device, atomically
//   State s = load("model.safetensors");          // CPU tensors by name
//   loadmodel(model, s);                          // into a model on any device
//   save("opt.safetensors", opt_state);           // optimiser state too, so
//   loadmodel(opt_state, load("opt.safetensors"));  // training resumes exactly
//
// Names are the model's dotted paths ("layers.0.weight", field names from
// FLX_FUNCTOR). Files hold flx's shapes with row-major bytes, as the format
// requires: a Dense weight (out, in) is [out, in] in the file, like PyTorch's
// nn.Linear.weight. Loading validates the whole header before allocating.
#pragma once

#include <map>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flx/functor.hpp"
#include "flx/optimisers.hpp"
#include "flx/tensor.hpp"

namespace flx {

// A named set of tensors (in insertion order) with string metadata: what a
// checkpoint file holds.
class State {
 public:
  using Entry = std::pair<std::string, Tensor>;
  State() = default;

  // Adds a tensor; an empty or repeated name is an ArgumentError.
  void insert(const std::string& name, const Tensor& t);
  bool contains(const std::string& name) const;
  // The tensor called name; a CheckpointError naming it when there is none.
  const Tensor& at(const std::string& name) const;
  size_t size() const { return entries_.size(); }
  const std::vector<Entry>& entries() const { return entries_; }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  std::map<std::string, std::string>& metadata() { return metadata_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};
std::ostream& operator<<(std::ostream& os, const State& s);

namespace detail {
// Every tensor of a model with its name (a bare tensor is called "tensor").
template <class M>
std::vector<State::Entry> named_tensors(const M& model) {
  std::vector<State::Entry> out;
  auto visit = [&](const std::string& path, const Tensor& t) {
    if (t.defined()) out.emplace_back(path.empty() ? "tensor" : path, t);
  };
  walk<false>(visit, "", model);
  return out;
}
// Check every name, shape and dtype of `targets` against s (nothing extra,
// nothing missing), then copy the values in place, on the targets' devices.
void load_into(const std::vector<State::Entry>& targets, const State& s, const char* what);
// load_into for a model: also refuses an optimiser state with a clear word.
void load_model(const std::vector<State::Entry>& targets, const State& s);
// load() on bytes in memory; origin names them in errors (fuzzing, tests).
State load_bytes(std::span<const uint8_t> bytes, const std::string& origin);
}  // namespace detail

// The named tensors of a model (shared storage, on the model's device).
template <class M>
State state(const M& model) {
  State s;
  for (const auto& [name, t] : detail::named_tensors(model)) s.insert(name, t);
  return s;
}
// An optimiser state's tensors and step counts, named after its parameters
// ("layers.0.weight.state.t0"), with the rule in the metadata.
State state(const OptState& opt);

// Writes a safetensors file atomically (a temporary file in the same
// directory, fsync, rename): a crash leaves the old file or the new one.
void save(const std::string& path, const State& s);
inline void save(const std::string& path, const OptState& opt) { save(path, state(opt)); }
template <class M>
void save(const std::string& path, const M& model) {
  save(path, state(model));
}

// Reads a safetensors file into CPU tensors (CheckpointError on any defect).
State load(const std::string& path);

// Copies a state into a model on any device, in place. Every tensor of the
// model must be in the state with the same shape and element type, and the
// state must hold nothing else; otherwise a CheckpointError names the key and
// nothing is changed.
template <class M>
const M& loadmodel(const M& model, const State& s) {
  detail::load_model(detail::named_tensors(model), s);
  return model;
}
// Restores an optimiser state saved with save(path, opt_state) into one
// made by setup() with the same rule for the same model. The learning rate
// is the rule's (adjust() it as the run that saved it did).
void loadmodel(OptState& opt, const State& s);

}  // namespace flx
