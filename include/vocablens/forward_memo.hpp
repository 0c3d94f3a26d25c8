// vocablens/forward_memo.hpp — keep the forward pass of a prompt, so that the next analysis of the same prompt
// reads its activations instead of running the model again.
//
// A server answering several analyses of one prompt (the explorer: the lens of the prompt, then one click per
// cell, each the direct logit attribution of one token at one position) pays one forward pass per prompt
// with this. While a ForwardMemoScope is open on a thread, every single-sequence forward pass that thread
// runs (run_forward / run_with_hooks / Model::forward with one row of ids, no grad) is either
//   * replayed: the memo holds the forward of the same ids with the same weights, and the pass asks only for
//     what a record holds (hooks and cache entries on resid_pre.L, z.L, resid_mid.L, mlp_out.L,
//     resid_post.L, final_norm; logits, computed from the recorded final_norm as the forward computes
//     them). Its hooks run on the recorded tensors in forward order and its cache is filled from them; no
//     block runs. Or
//   * run as usual, with the memo's recording hooks after its own, and kept (least recently used records
//     leave first; a pass whose record would exceed the byte budget is not recorded at all).
// A record holds the tensors the recorded pass computed, so an analysis gets the same numbers, to the bit,
// whether its pass ran or was replayed (`serve_api` compares a replayed attribution with the CLI's).
//
// Only for analyses that READ activations: a hook that writes (ablation, patching, steering) changes what
// follows it, which a replay cannot redo, and its pass is not the prompt's forward. The caller opens a scope
// around such analyses only (the explorer: lens and attribute).
//
//   vocablens::ForwardMemo memo(4, size_t(512) << 20);         // 4 prompts, 512 MB at most
//   { vocablens::ForwardMemoScope s(memo); auto l = vocablens::logit_lens(model, ids); }            // runs, keeps
//   { vocablens::ForwardMemoScope s(memo); auto a = vocablens::attribute_logit(model, ids, o); }    // replayed
//   // s.replayed() == 1 inside the second scope; memo.stats(): records, bytes, replayed, recorded
//
// Memory of one record: (3 L + 2) T d_model + L T H d_head floats (gpt2-small, 64 tokens: 9.8 MB; its
// 1024-token context: 157 MB). Thread-safe: records are shared, read-only, between threads.
#pragma once
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vocablens {

/// One recorded forward pass of one sequence: activations by short hook name ("resid_pre.0", "z.3", ...),
/// each [1, T, ...] float32, as the pass computed them.
struct ForwardRecord {
  std::vector<int64_t> ids;
  const void* weights = nullptr;  ///< the ModelWeights it was computed with: a record serves that model only
  std::map<std::string, at::Tensor> acts;
  size_t bytes = 0;
};

class ForwardMemo {
 public:
  explicit ForwardMemo(size_t max_records = 4, size_t max_bytes = size_t(512) << 20)
      : max_records_(max_records), max_bytes_(max_bytes) {}
  /// The record of these ids computed with `weights`, most recently used first; null when none.
  std::shared_ptr<const ForwardRecord> find(const std::vector<int64_t>& ids, const void* weights);
  /// Keeps r (replacing a record of the same ids); never one above max_bytes; evicts the least recently used.
  void put(std::shared_ptr<const ForwardRecord> r);
  /// Whether a record of `bytes` would be kept: the forward pass does not record a pass that would not
  /// (a long prompt of a large model is not held twice during its pass only to be dropped), and counts it.
  bool would_keep(size_t bytes);
  /// Counters of what the scopes did (replays and recordings of passes run under them).
  void count(bool replayed);

  struct Stats {
    size_t records = 0, bytes = 0, max_records = 0, max_bytes = 0;
    uint64_t replayed = 0;  ///< forward passes answered from a record
    uint64_t recorded = 0;  ///< forward passes run and recorded
    uint64_t not_kept = 0;  ///< passes not recorded: larger than max_bytes (or max_records == 0)
  };
  Stats stats() const;

 private:
  mutable std::mutex m_;
  std::list<std::shared_ptr<const ForwardRecord>> items_;  ///< most recently used first
  size_t max_records_, max_bytes_, bytes_ = 0;
  uint64_t replayed_ = 0, recorded_ = 0, not_kept_ = 0;
};

/// While alive, the single-sequence forward passes of this thread go through `memo` (see above). Scopes nest
/// (the innermost is used). replayed() / recorded(): this scope's passes.
class ForwardMemoScope {
 public:
  explicit ForwardMemoScope(ForwardMemo& memo) noexcept;
  ~ForwardMemoScope();
  ForwardMemoScope(const ForwardMemoScope&) = delete;
  ForwardMemoScope& operator=(const ForwardMemoScope&) = delete;
  ForwardMemo& memo() const { return memo_; }
  int64_t replayed() const { return replayed_; }
  int64_t recorded() const { return recorded_; }
  void count(bool replayed);

 private:
  ForwardMemo& memo_;
  ForwardMemoScope* outer_;
  int64_t replayed_ = 0, recorded_ = 0;
};

}  // namespace vocablens
