// Renaming a checkpoint's keys for loading into a model whose names differ
// (checkpoints of PyTorch and other libraries). Internal; the public side is
// rename() and loadmodel(model, s, key_map) in flx/checkpoints.hpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "flx/checkpoints.hpp"

namespace flx::detail {

// rename(s, key_map), also recording for each new name the key it came from.
State rename_recording(const State& s, const KeyMap& key_map, std::map<std::string, std::string>& from);

// The end of the message when a model's names and a checkpoint's have nothing
// in common: how to map them, with the exact loadmodel call when the
// checkpoint's keys are numbered modules ("0.weight", "2.bias": PyTorch's
// nn.Sequential) that pair up in order with a Chain's layers. "" when some
// names agree (then it is a checkpoint of another model, not another library).
std::string foreign_names_hint(const std::vector<State::Entry>& targets, const State& s);

}  // namespace flx::detail
