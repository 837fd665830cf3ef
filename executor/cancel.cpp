#include "executor/cancel.h"

#include <utility>

namespace kiln {

namespace {
thread_local std::shared_ptr<CancelToken> current_token;
}  // namespace

bool CancelToken::cancel(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return false;
  reason_ = reason;
  cancelled_.store(true, std::memory_order_release);
  return true;
}

bool CancelToken::stop_requested(std::string* why) const {
  if (cancelled_.load(std::memory_order_acquire)) {
    if (why) {
      std::lock_guard<std::mutex> lock(mu_);
      *why = reason_;
    }
    return true;
  }
  if (!deadline_passed()) return false;
  if (why) *why = "its deadline passed";
  return true;
}

bool CancelToken::poll_and_check(std::string* why) {
  std::string reason;
  if (poll_ && !cancelled() && poll_(&reason)) cancel(reason);
  return stop_requested(why);
}

CancelScope::CancelScope(std::shared_ptr<CancelToken> token)
    : previous_(std::exchange(current_token, std::move(token))) {}

CancelScope::~CancelScope() { current_token = std::move(previous_); }

const std::shared_ptr<CancelToken>& current_cancel_token() { return current_token; }

}  // namespace kiln
