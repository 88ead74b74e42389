// One logging facility. NODUS_DEBUG=WARN|INFO|TRACE (default WARN), lines go
// to stderr (or NODUS_DEBUG_FILE, where %h is the host and %p the pid),
// prefixed "host:pid:rank nodus LEVEL".
#pragma once

namespace nodus {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel logLevel();
// rank < 0 when the line belongs to no communicator.
void logLine(LogLevel level, int rank, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// The name this host goes by in logs and for transport selection
// (NODUS_HOSTID, else the hostname).
const char* hostName();

}  // namespace nodus

#define NODUS_LOG(level, rank, ...)                                             \
  do {                                                                          \
    if (::nodus::logLevel() >= ::nodus::LogLevel::level)                        \
      ::nodus::logLine(::nodus::LogLevel::level, (rank), __VA_ARGS__);          \
  } while (0)
#define NODUS_WARN(rank, ...) NODUS_LOG(Warn, rank, __VA_ARGS__)
#define NODUS_INFO(rank, ...) NODUS_LOG(Info, rank, __VA_ARGS__)
#define NODUS_TRACE(rank, ...) NODUS_LOG(Trace, rank, __VA_ARGS__)
