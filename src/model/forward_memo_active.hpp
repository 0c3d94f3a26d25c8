// The one question the forward pass (forward.cpp) asks of the memo's thread-scoped switch (forward_memo.cpp):
// private to the library, see vocablens/forward_memo.hpp for ForwardMemoScope.
#pragma once
#include "vocablens/forward_memo.hpp"

namespace vocablens {
namespace forward_memo_detail {
/// This thread's innermost open scope, or null (what the forward pass asks).
ForwardMemoScope* active() noexcept;
}  // namespace forward_memo_detail
}  // namespace vocablens
