#include "session/worker.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "backends/host/clock.h"
#include "backends/host/tsc.h"
#include "base/log.h"

namespace gpuscope::internal {

void ResetLogAfterFork();  // base/log.cc

namespace {

std::atomic<Worker*> g_worker{nullptr};
Worker* g_quiesced_for_fork = nullptr;  // only touched by the forking thread

}  // namespace

// Before fork(), in the forking thread: wait for a pass in progress and hold
// the worker still, so that the child never inherits a worker stopped in the
// middle of a pass (holding an allocator lock, say, that a non-fork-safe
// allocator such as a sanitizer's would never release in the child).
void Worker::OnForkPrepare() {
  Worker* w = g_worker.load(std::memory_order_acquire);
  if (w == nullptr) return;
  w->mu_.lock();
  g_quiesced_for_fork = w;
}

void Worker::OnForkParent() {
  if (g_quiesced_for_fork == nullptr) return;
  g_quiesced_for_fork->mu_.unlock();
  g_quiesced_for_fork = nullptr;
}

namespace {

void OnForkChild() {
  // Only the forking thread exists in the child. The parent's worker thread
  // is gone, and its mutex may be locked forever: never touch it again.
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  g_worker.store(nullptr, std::memory_order_relaxed);
  g_quiesced_for_fork = nullptr;  // its lock stays held: the old worker is abandoned
  ResetLogAfterFork();
}

}  // namespace

Worker& Worker::Get() {
  static const bool registered_atfork = [] {
    pthread_atfork(&Worker::OnForkPrepare, &Worker::OnForkParent, &OnForkChild);
    return true;
  }();
  (void)registered_atfork;
  Worker* w = g_worker.load(std::memory_order_acquire);
  if (w != nullptr) return *w;
  // Leaked on purpose: sessions may be destroyed during static destruction
  // at exit, and the thread is never joined.
  auto* fresh = new Worker();
  if (g_worker.compare_exchange_strong(w, fresh, std::memory_order_acq_rel)) return *fresh;
  delete fresh;  // another thread won; its worker has no thread yet or is running
  return *w;
}

bool Worker::Register(Pumpable* p) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error& e) {
      LogOnce("worker-thread", LogLevel::kError,
              absl::StrCat("could not start the background thread (", e.what(),
                           "): summaries still work, but records beyond the queue's capacity "
                           "between two summaries are dropped"));
      return false;
    }
    thread_.detach();
    started_ = true;
    // Wait until the thread is in its loop: a fork() from now on finds it
    // either waiting or held by the prepare handler, never half-started
    // (inside the allocator, say, which the child would inherit locked).
    running_cv_.wait(lock, [this] { return running_; });
  }
  sessions_.push_back(p);
  interval_ = std::chrono::milliseconds(p->flush_interval_ms());
  for (Pumpable* s : sessions_) {
    interval_ = std::min(interval_, std::chrono::milliseconds(s->flush_interval_ms()));
  }
  // A new session's rate is unknown: start with short waits (a tight loop
  // fills the default queue in about 10 ms), lengthened as queues run light.
  new_session_ = true;
  cv_.notify_one();
  return true;
}

void Worker::Unregister(Pumpable* p) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), p), sessions_.end());
  // The finest interval of the sessions left: a closed 1 ms session must not
  // keep the worker waking every 1 ms for a session that asked for 1 s.
  if (sessions_.empty()) return;
  interval_ = std::chrono::milliseconds(sessions_.front()->flush_interval_ms());
  for (Pumpable* s : sessions_) {
    interval_ = std::min(interval_, std::chrono::milliseconds(s->flush_interval_ms()));
  }
}

std::chrono::milliseconds Worker::interval() {
  std::lock_guard<std::mutex> lock(mu_);
  return interval_;
}

double Worker::alive_seconds() const {
  const int64_t started = started_ns_.load(std::memory_order_relaxed);
  return started == 0 ? 0.0 : 1e-9 * static_cast<double>(ReadMonotonicNs() - started);
}

void Worker::Run() {
  const TscClock* tsc = TscClock::Get();
  std::unique_lock<std::mutex> lock(mu_);
  started_ns_.store(ReadMonotonicNs(), std::memory_order_relaxed);
  running_ = true;
  running_cv_.notify_all();
  // The wait between passes: the sessions' flush interval, shortened (down
  // to 1 ms) while a pass finds a queue filling faster than that interval
  // drains it, and none at all while a queue stays over half full, so that a
  // burst of records is taken in before the queue is full; lengthened back
  // once the queues run light again.
  std::chrono::microseconds wait = interval_;
  for (;;) {
    if (sessions_.empty()) {
      // Nothing to pump: sleep until a session registers (no wake-ups).
      cv_.wait(lock, [this] { return !sessions_.empty(); });
      wait = interval_;
    } else {
      cv_.wait_for(lock, wait);
    }
    if (new_session_) {
      new_session_ = false;
      wait = std::chrono::milliseconds(1);
    }
    passes_.fetch_add(1, std::memory_order_relaxed);
    if (tsc != nullptr) tsc->Refine();
    double fullest = 0;
    for (Pumpable* p : sessions_) fullest = std::max(fullest, p->Pump());
    timespec cpu{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
      cpu_ns_.store(int64_t{cpu.tv_sec} * 1'000'000'000 + cpu.tv_nsec, std::memory_order_relaxed);
    }
    if (fullest > 0.5) {
      // Falling behind a burst: pump again at once (the wait still releases
      // the lock, so that Register() and Unregister() get in).
      wait = std::chrono::microseconds(0);
    } else if (fullest > 0.25) {
      wait = std::max<std::chrono::microseconds>(wait / 2, std::chrono::milliseconds(1));
    } else if (fullest < 0.0625) {
      wait = std::min<std::chrono::microseconds>(
          std::max<std::chrono::microseconds>(wait * 2, std::chrono::milliseconds(1)), interval_);
    }
    wait = std::min<std::chrono::microseconds>(wait, interval_);
  }
}

}  // namespace gpuscope::internal
