// Cooperative interruption (see vocablens/interrupt.hpp): a counter of open scopes and the first signal.
#include "vocablens/interrupt.hpp"
#include "vocablens/detail/interrupt_signal.hpp"

#include <atomic>

namespace vocablens {
namespace {
std::atomic<int> g_scopes{0};
std::atomic<int> g_signal{0};
thread_local const std::atomic<bool>* t_cancel = nullptr;
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler touches these");
}  // namespace

InterruptScope::InterruptScope() noexcept { g_scopes.fetch_add(1); }
InterruptScope::~InterruptScope() {
  if (g_scopes.fetch_sub(1) == 1) g_signal.store(0);
}

int interrupt_signal() noexcept { return g_signal.load(); }

CancelScope::CancelScope(const std::atomic<bool>* flag) noexcept : outer_(t_cancel) { t_cancel = flag; }
CancelScope::~CancelScope() { t_cancel = outer_; }

bool cancel_requested() noexcept { return t_cancel && t_cancel->load(std::memory_order_relaxed); }

void throw_cancelled(const char* where) {
  throw Interrupted(0, std::string("cancelled: the client went away (") + (where ? where : "") + ")");
}

namespace detail {
bool record_interrupt(int sig) noexcept {
  if (g_scopes.load() <= 0) return false;
  int expected = 0;
  return g_signal.compare_exchange_strong(expected, sig);  // a second signal: exit now
}
void clear_interrupt() noexcept { g_signal.store(0); }
}  // namespace detail

}  // namespace vocablens
