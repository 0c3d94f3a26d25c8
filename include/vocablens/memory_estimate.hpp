// vocablens/memory_estimate.hpp — the peak memory a forward pass (and the logit lens on it) will need,
// computed from shapes before any work (the CLI's `--dry-run`).
//
//   auto e = vocablens::estimate_forward_memory(model, 1, T, spec, /*compute_logits=*/false);
//   e.add_phase("lens: normalised stack", n * T * d * 4);   // after the forward, not during it
//   fmt::print("{}", e.table());              // one row per item, then the total, in MiB
//   if (e.total() > vocablens::available_memory()) ...
//
// Items (bytes): the process's fixed part (LibTorch, OpenBLAS, the program: measured at about 180 MiB
// resident), the weights as stored (every distinct storage the model's tensors view: for a memory-mapped
// checkpoint, the pages the forward reads), the largest working set of one block (projections, the
// blocked-attention tile or, where the forward materialises, the [B, H, T, T] scores, softmax and its
// input; the MLP's intermediates, in blocks of 1024 rows without grad; for a long block that streams by
// rows, docs/runner.md "Long inputs", its input, k, v and output buffer plus one row block's working set),
// the recorded cache (the stream between blocks counted once: resid_post.l and resid_pre.l+1 are one
// tensor) and the logits. It follows the forward's own rules (vocablens/attention.hpp); the forward's block
// and the lens's stack are phases that follow one another (the larger counts). An estimate, not a bound: on
// the long-context bench it was 3.5 to 4.7 % above the measured peak RSS at T = 4096, 8192 and 32 768
// (docs/benchmarks.md, "Long context").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/cache_spec.hpp"

namespace vocablens {

class Model;

struct MemoryEstimate {
  struct Item {
    std::string what;
    double bytes = 0;
  };
  std::vector<Item> items;   ///< resident together for the whole run
  std::vector<Item> phases;  ///< working sets of phases that follow one another: the largest counts
  void add(std::string what, double bytes) { items.push_back({std::move(what), bytes}); }
  void add_phase(std::string what, double bytes) { phases.push_back({std::move(what), bytes}); }
  /// Sum of `items` plus the largest of `phases`.
  double total() const;
  /// "item  MiB" rows, the phases (the largest marked), and a total row.
  std::string table() const;
};

/// Peak memory of Model::forward over a [B, T] batch without grad, recording what `spec` asks for.
MemoryEstimate estimate_forward_memory(const Model& m, int64_t B, int64_t T, const CacheSpec& spec, bool compute_logits);

/// The memory the kernel says is available now (MemAvailable of /proc/meminfo), in bytes; -1 if unknown.
double available_memory();

}  // namespace vocablens
