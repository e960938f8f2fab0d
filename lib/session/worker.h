// The process's one background worker. Every recording session registers
// with it; every flush interval (sooner while queues fill fast) it drains
// each session's queue into that session's aggregator (and, with GPU
// sources, resolves device data and samples telemetry). With no session
// registered it sleeps until one is. The hot path never waits for it.
//
// fork(): the parent's worker is held between passes across the fork (so the
// child never inherits it mid-pass); then a pthread_atfork child handler bumps
// `g_fork_generation` and forgets (leaks) the parent's worker, whose thread
// does not exist in the child. Sessions compare the generation they were born in with the current
// one and stop recording in the child; a session created in the child gets a
// fresh worker.

#ifndef GPUSCOPE_LIB_SESSION_WORKER_H_
#define GPUSCOPE_LIB_SESSION_WORKER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "base/fork.h"

namespace gpuscope::internal {

// What the worker drives. Implemented by SessionImpl.
class Pumpable {
 public:
  virtual ~Pumpable() = default;
  // Drains and assembles pending records. Called with the worker's lock
  // held. Returns how full its queue was, 0..1, so that the worker can come
  // back sooner when records arrive faster than its interval allows.
  virtual double Pump() = 0;
  virtual int flush_interval_ms() const = 0;
};

class Worker {
 public:
  // This process's worker (created on first use; a forked child gets its own).
  static Worker& Get();

  // Starts pumping `p` (and the thread, on first use). Thread-safe. False if
  // the thread could not be started (process limits): `p` is then not
  // registered and must be drained by its readers.
  bool Register(Pumpable* p);

  // Stops pumping `p`; once this returns the worker never touches `p` again
  // (it waits for a pass in progress). Thread-safe.
  void Unregister(Pumpable* p);

  // pthread_atfork handlers: the parent holds its worker between passes
  // across fork(); the child abandons it.
  static void OnForkPrepare();
  static void OnForkParent();

  // Passes made so far (tests: the worker sleeps while no session is open).
  uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }
  // The worker thread's CPU time as of its last pass, and the time since it
  // started, in seconds (0 before it started): gpuscope's own background
  // cost, process-wide.
  double cpu_seconds() const {
    return 1e-9 * static_cast<double>(cpu_ns_.load(std::memory_order_relaxed));
  }
  double alive_seconds() const;
  // The wait between passes when queues run light: the finest flush
  // interval of the sessions registered (tests).
  std::chrono::milliseconds interval();

 private:
  Worker() = default;
  void Run();

  // Protects sessions_, interval_ and started_, and is held for a whole pass,
  // so that Unregister() returning means no pass is using the session.
  // Lock order: this lock, then a session's aggregator lock.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pumpable*> sessions_;
  std::chrono::milliseconds interval_{10};  // the finest flush interval of the sessions
  bool started_ = false;
  bool new_session_ = false;            // Register() since the last pass: restart with short waits
  bool running_ = false;                // the thread has entered its loop
  std::condition_variable running_cv_;  // signals running_
  std::thread thread_;                  // never joined: the worker lives until the process ends
  std::atomic<int64_t> cpu_ns_{0};      // the thread's CPU time at its last pass
  std::atomic<int64_t> started_ns_{0};  // CLOCK_MONOTONIC when the thread started
  std::atomic<uint64_t> passes_{0};
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_WORKER_H_
