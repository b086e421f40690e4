// Other settings of the [Flux] table of LocalPreferences.toml (the file
// found from the working directory upwards, as for gpu_backend). Not
// installed.
#pragma once

#include <optional>
#include <string>

namespace flx::detail {

// The boolean [Flux] `key`, or nullopt when the file or the key is absent;
// *source names the file. ArgumentError when the value is not a boolean.
std::optional<bool> preference_bool(const std::string& key, std::string* source);

}  // namespace flx::detail
