#include "base/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "base/settings.h"

namespace nodus {
namespace {

LogLevel parseLevel(const std::string& s) {
  if (strcasecmp(s.c_str(), "NONE") == 0) return LogLevel::None;
  if (strcasecmp(s.c_str(), "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(s.c_str(), "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::Warn;
}

struct LogSink {
  LogLevel level;
  FILE* out = stderr;
  std::mutex mu;
  std::string host;

  LogSink() {
    // Once a process, from the environment; a value that does not parse
    // leaves the default (the communicator's init reports it).
    Settings env;
    (void)Settings::fromEnvironment(&env);
    level = parseLevel(env.get(param::kDebug));
    host = env.get(param::kHostId);
    if (host.empty() || host.find(',') != std::string::npos) {  // a per-rank list names no one host
      char buf[256] = {};
      if (gethostname(buf, sizeof(buf) - 1) != 0) strcpy(buf, "unknown");
      host = buf;
    }
    std::string path = env.get(param::kDebugFile);
    if (!path.empty()) {
      std::string expanded;
      for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'h') {
          expanded += host, ++i;
        } else if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
          expanded += std::to_string(getpid()), ++i;
        } else {
          expanded += path[i];
        }
      }
      if (FILE* f = fopen(expanded.c_str(), "a")) out = f;
    }
  }
};

LogSink& sink() {
  static LogSink s;  // the log configuration, read once per process
  return s;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

LogLevel logLevel() { return sink().level; }

const char* hostName() { return sink().host.c_str(); }

void logLine(LogLevel level, int rank, const char* fmt, ...) {
  LogSink& s = sink();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(s.mu);
  if (rank >= 0)
    fprintf(s.out, "%s:%d:%d nodus %s %s\n", s.host.c_str(), static_cast<int>(getpid()), rank,
            levelName(level), msg);
  else
    fprintf(s.out, "%s:%d nodus %s %s\n", s.host.c_str(), static_cast<int>(getpid()),
            levelName(level), msg);
  fflush(s.out);
}

}  // namespace nodus
