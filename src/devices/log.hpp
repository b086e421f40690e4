// Julia-style log lines on stderr: "[ Info: ..." and boxed warnings.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace flx::detail {

inline void log_info(const std::string& msg) { std::fprintf(stderr, "[ Info: %s\n", msg.c_str()); }

// Julia's boxed message: "┌ Info: first", "│ middle", and "└ last" (info)
// or "└ @ flx" closing a warning, as Julia shows the source location.
inline void log_box(const char* level, const std::vector<std::string>& lines, bool location) {
  for (size_t i = 0; i < lines.size(); ++i) {
    bool last = i + 1 == lines.size() && !location && i > 0;
    const char* lead = i == 0 ? "┌ " : last ? "└ " : "│ ";
    std::fprintf(stderr, "%s%s%s\n", lead, i == 0 ? level : "", lines[i].c_str());
  }
  if (location) std::fprintf(stderr, "└ @ flx\n");
}
inline void log_info_box(const std::vector<std::string>& lines) { log_box("Info: ", lines, false); }
inline void log_warn_box(const std::vector<std::string>& lines) { log_box("Warning: ", lines, true); }

}  // namespace flx::detail
