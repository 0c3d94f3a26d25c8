// vocablens/detail/hook_readonly.hpp — hooks that only read: the forward passes them the activation
// itself instead of a copy (not a stable interface).
//
// A hook point copies its activation before running its hooks (vocablens/hooks.hpp), so that a hook
// writing in place changes what the rest of the pass sees and nothing else: the same tensor may be the
// previous block's recorded resid_post or the caller's. At long T the copy is one more [B, T, d_model]
// tensor alive through the block (256 MiB at T = 32 768, d = 2048). A caller whose hooks never write
// into the tensor they are given (the logit lens normalises each layer's residual into its own stack)
// declares so for the passes it runs on this thread, and the copy is skipped:
//
//   {
//     vocablens::hook_detail::ReadOnlyHooks read_only;   // this thread, until the end of the scope
//     vocablens::run_with_hooks(model, ids, hooks, vocablens::CacheSpec{}, false);
//   }
//
// Guarantee asked of the caller: inside the scope, no hook modifies its tensor's values in place (a
// hook may still replace the tensor it was given by assigning another one; that never reaches the
// caller's tensor). Scopes nest; each restores what was in force before it.
#pragma once

namespace vocablens {
namespace hook_detail {

class ReadOnlyHooks {
 public:
  ReadOnlyHooks();
  ~ReadOnlyHooks();
  ReadOnlyHooks(const ReadOnlyHooks&) = delete;
  ReadOnlyHooks& operator=(const ReadOnlyHooks&) = delete;

 private:
  bool before_;
};

/// Whether a ReadOnlyHooks scope is in force on this thread.
bool hooks_read_only();

}  // namespace hook_detail
}  // namespace vocablens
