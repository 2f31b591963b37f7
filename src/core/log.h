// Logging to stderr: "[time level] message". Level from PAGODA_LOG_LEVEL
// (parse_log_level's names, default info) or set_log_level() (the commands'
// --log-level).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string_view>

namespace pagoda {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// debug, info, warning (or warn), error, off; nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view name);
void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_write(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_write(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kWarn) log_write(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kError) log_write(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace pagoda
