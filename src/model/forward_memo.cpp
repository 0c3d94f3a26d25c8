// The memo of forward passes (see vocablens/forward_memo.hpp): its bounded LRU of records and the thread's
// scope. Recording and replaying a pass are forward_replay.cpp's; the forward pass (forward.cpp) asks active().
#include "vocablens/forward_memo.hpp"
#include "model/forward_memo_active.hpp"

#include <utility>

namespace vocablens {
namespace {
thread_local ForwardMemoScope* t_scope = nullptr;
}  // namespace

std::shared_ptr<const ForwardRecord> ForwardMemo::find(const std::vector<int64_t>& ids, const void* weights) {
  std::lock_guard<std::mutex> l(m_);
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if ((*it)->weights == weights && (*it)->ids == ids) {
      items_.splice(items_.begin(), items_, it);
      return items_.front();
    }
  return nullptr;
}

void ForwardMemo::put(std::shared_ptr<const ForwardRecord> r) {
  std::lock_guard<std::mutex> l(m_);
  if (max_records_ == 0 || r->bytes > max_bytes_) {
    ++not_kept_;
    return;
  }
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if ((*it)->weights == r->weights && (*it)->ids == r->ids) {
      bytes_ -= (*it)->bytes;
      items_.erase(it);
      break;
    }
  bytes_ += r->bytes;
  items_.push_front(std::move(r));
  while (!items_.empty() && (items_.size() > max_records_ || bytes_ > max_bytes_)) {
    bytes_ -= items_.back()->bytes;
    items_.pop_back();
  }
}

bool ForwardMemo::would_keep(size_t bytes) {
  std::lock_guard<std::mutex> l(m_);
  if (max_records_ > 0 && bytes <= max_bytes_) return true;
  ++not_kept_;
  return false;
}

void ForwardMemo::count(bool replayed) {
  std::lock_guard<std::mutex> l(m_);
  ++(replayed ? replayed_ : recorded_);
}

ForwardMemo::Stats ForwardMemo::stats() const {
  std::lock_guard<std::mutex> l(m_);
  Stats s;
  s.records = items_.size();
  s.bytes = bytes_;
  s.max_records = max_records_;
  s.max_bytes = max_bytes_;
  s.replayed = replayed_;
  s.recorded = recorded_;
  s.not_kept = not_kept_;
  return s;
}

ForwardMemoScope::ForwardMemoScope(ForwardMemo& memo) noexcept : memo_(memo), outer_(t_scope) { t_scope = this; }
ForwardMemoScope::~ForwardMemoScope() { t_scope = outer_; }

void ForwardMemoScope::count(bool replayed) {
  ++(replayed ? replayed_ : recorded_);
  memo_.count(replayed);
}

namespace forward_memo_detail {
ForwardMemoScope* active() noexcept { return t_scope; }
}  // namespace forward_memo_detail

}  // namespace vocablens
