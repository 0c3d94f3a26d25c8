// src/serve/answer_cache.hpp — answers kept per (analysis, resolved options), so that a click on a cell of
// the current prompt, or a reload, costs no forward pass.
//
//   AnswerCache cache(32);                       // 32 answers, at most 64 MB, none over 1 MB
//   if (auto hit = cache.get(key)) return *hit;  // most recently used first
//   cache.put(key, std::make_shared<const std::string>(body));
//
// Thread-safe; least recently used answers leave first. An answer over the per-answer limit is never kept:
// the page's answers are a few kB to a few hundred kB, and a multi-MB one (a client asking for thousands of
// tokens per cell) would otherwise stay resident after its client left — the server's memory after a burst of
// such requests must return to about where it started (docs/serve.md, "Never dies").
#pragma once
#include <algorithm>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace vocablens::serve {

class AnswerCache {
 public:
  explicit AnswerCache(size_t entries, size_t bytes = size_t(64) << 20, size_t per_answer = size_t(1) << 20)
      : max_entries_(entries), max_bytes_(bytes), max_answer_(per_answer) {}
  struct Stats {
    size_t entries = 0, bytes = 0, max_entries = 0, max_bytes = 0, max_answer_bytes = 0;
  };
  Stats stats() {
    std::lock_guard<std::mutex> l(m_);
    return {items_.size(), bytes_, max_entries_, max_bytes_, max_answer_};
  }
  std::shared_ptr<const std::string> get(const std::string& key) {
    std::lock_guard<std::mutex> l(m_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        items_.splice(items_.begin(), items_, it);  // most recently used first
        return it->second;
      }
    return nullptr;
  }
  void put(const std::string& key, std::shared_ptr<const std::string> v) {
    if (max_entries_ == 0 || v->size() > std::min(max_bytes_, max_answer_)) return;
    std::lock_guard<std::mutex> l(m_);
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        bytes_ -= it->second->size();
        items_.erase(it);
        break;
      }
    bytes_ += v->size();
    items_.emplace_front(key, std::move(v));
    while (!items_.empty() && (items_.size() > max_entries_ || bytes_ > max_bytes_)) {
      bytes_ -= items_.back().second->size();
      items_.pop_back();
    }
  }

 private:
  std::mutex m_;
  std::list<std::pair<std::string, std::shared_ptr<const std::string>>> items_;
  size_t max_entries_, max_bytes_, max_answer_, bytes_ = 0;
};

}  // namespace vocablens::serve
