// src/cli/memory_check.hpp — `--dry-run` and the up-front memory check shared by every command that
// loads a model (the estimate itself: vocablens/memory_estimate.hpp).
//
//   sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);            // when registering
//   ...
//   auto e = vocablens::cli::model_memory(m);                // runtime + weights as stored
//   e.add_phase("heads: E+ and one tile", bytes);            // what the command adds
//   if (auto rc = vocablens::cli::check_memory("heads", "the circuits of 4 layers", e, o.dry_run,
//                                              "--layer/--head (fewer circuits)"))
//     return *rc;                                            // --dry-run: printed, exit 0, nothing run
//
// With --dry-run: the table (one row per item, the phases, the total), the memory available and whether
// the run would fit go to stdout; the command returns 0 without running. Without it: when the estimate
// exceeds the limit the command is refused before any work (vocablens::Error, exit 1) with one line
// naming the option that reduces it — never an out-of-memory kill mid-run. The limit is
// VOCABLENS_MEMORY_LIMIT (bytes, or with a K/M/G suffix, e.g. 512M; for tests and for sharing a machine)
// or else MemAvailable of /proc/meminfo; unknown = no check.
#pragma once
#include <optional>
#include <string>

#include "vocablens/analysis_estimate.hpp"
#include "vocablens/memory_estimate.hpp"

namespace vocablens {
class Model;
}

namespace vocablens::cli {

inline constexpr const char* kDryRunHelp =
    "Print the peak memory the run is expected to need (weights resident, activations, cache, logit blocks) "
    "and what the machine has available, then stop without running (exit 0)";

/// The limit the estimate is checked against, in bytes: VOCABLENS_MEMORY_LIMIT if set (a bad value is a
/// UsageError naming it), else MemAvailable; -1 when unknown.
double memory_limit();

/// The part every command has: the runtime and the model's weights as stored (no activations).
using vocablens::model_memory;

/// --dry-run: prints `e` (for "vocablens COMMAND: WHAT") and returns 0, its last line saying what the estimate
/// computed (`computed`; empty: nothing). Otherwise throws vocablens::Error when e.total() exceeds
/// memory_limit() ("... needs about N MiB, M MiB are available: REDUCE"), and returns nullopt (run) when it
/// fits or the limit is unknown.
std::optional<int> check_memory(const std::string& command, const std::string& what, const MemoryEstimate& e, bool dry_run,
                                const std::string& reduce, const std::string& computed = "");

/// The same for a declared analysis's estimate (vocablens/analysis_estimate.hpp): its what and reduce, and its
/// note printed after a dry run.
std::optional<int> check_memory(const std::string& command, const AnalysisEstimate& e, bool dry_run);

}  // namespace vocablens::cli
