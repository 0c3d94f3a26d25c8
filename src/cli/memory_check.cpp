// --dry-run and the up-front memory check of every model command (memory_check.hpp).
#include "cli/memory_check.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "vocablens/cache.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"

namespace vocablens::cli {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

double memory_limit() {
  const char* env = std::getenv("VOCABLENS_MEMORY_LIMIT");
  if (!env || !*env) return available_memory();
  const std::string s = env;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  double mult = 1;
  if (end && *end) {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K': mult = 1024.0; break;
      case 'M': mult = kMiB; break;
      case 'G': mult = kMiB * 1024.0; break;
      default: mult = 0;
    }
    ++end;
    if (*end == 'i' || *end == 'I') ++end;
    if (*end == 'b' || *end == 'B') ++end;
  }
  if (end == s.c_str() || errno != 0 || mult == 0 || (end && *end) || !(v > 0))
    throw UsageError("VOCABLENS_MEMORY_LIMIT='" + s + "' is not a positive size in bytes (e.g. 4000000000, 512M, 4G)");
  return v * mult;
}

std::optional<int> check_memory(const std::string& command, const std::string& what, const MemoryEstimate& e, bool dry_run,
                                const std::string& reduce, const std::string& computed) {
  const double limit = memory_limit();
  const bool fits = limit <= 0 || e.total() <= limit;
  if (dry_run) {
    fmt::print("vocablens {} --dry-run: {}\nexpected peak memory:\n{}", command, what, e.table());
    if (limit > 0)
      fmt::print("available now: {:.1f} MiB{} — {}\n", limit / kMiB,
                 std::getenv("VOCABLENS_MEMORY_LIMIT") ? " (VOCABLENS_MEMORY_LIMIT)" : "",
                 fits ? "it fits" : "it would NOT fit (the run would be refused): " + reduce);
    if (computed.empty()) fmt::print("(dry run: nothing was computed)\n");
    else fmt::print("(dry run: {})\n", computed);
    std::fflush(stdout);
    return 0;
  }
  if (!fits)
    throw Error(
        fmt::format("{} needs about {:.0f} MiB, {:.0f} MiB are available{} (`vocablens {} ... --dry-run` shows "
                    "the estimate): {}",
                    what, e.total() / kMiB, limit / kMiB,
                    std::getenv("VOCABLENS_MEMORY_LIMIT") ? " (VOCABLENS_MEMORY_LIMIT)" : "", command, reduce));
  return std::nullopt;
}

std::optional<int> check_memory(const std::string& command, const AnalysisEstimate& e, bool dry_run) {
  // when it would not fit, what fits in the limit, when the analysis can say
  const double limit = e.reduce_within ? memory_limit() : 0;
  const bool refused = limit > 0 && e.memory.total() > limit;
  auto rc = check_memory(command, e.what, e.memory, dry_run, refused ? e.reduce_within(limit) : e.reduce, e.computed);
  if (dry_run && !e.note.empty()) fmt::print("{}\n", e.note);
  return rc;
}

}  // namespace vocablens::cli
