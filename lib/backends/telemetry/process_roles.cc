#include "backends/telemetry/process_roles.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <vector>

namespace gpuscope::internal {
namespace {

struct Roles {
  std::mutex mu;
  std::deque<int> workers;  // in the order added, newest last
  bool known = false;
  uint64_t generation = 0;  // 0: nothing added yet
};

// Leaked on purpose: read by the sampler, which may run during static
// destruction at exit.
Roles& GetRoles() {
  static Roles* roles = new Roles();
  return *roles;
}

std::atomic<int> training_thread{0};

}  // namespace

void AddLoaderWorkers(const std::vector<int>& pids) {
  Roles& r = GetRoles();
  std::lock_guard<std::mutex> lock(r.mu);
  bool changed = !r.known;
  r.known = true;
  for (int pid : pids) {
    if (pid <= 0 || std::find(r.workers.begin(), r.workers.end(), pid) != r.workers.end()) continue;
    r.workers.push_back(pid);
    if (r.workers.size() > kMaxLoaderWorkers) r.workers.pop_front();
    changed = true;
  }
  if (changed) ++r.generation;
}

bool LoaderWorkersSince(uint64_t* generation, std::vector<int>* pids, bool* known) {
  Roles& r = GetRoles();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.generation == *generation) return false;
  *generation = r.generation;
  pids->assign(r.workers.begin(), r.workers.end());
  std::sort(pids->begin(), pids->end());
  *known = r.known;
  return true;
}

void SetTrainingThread(int tid) { training_thread.store(tid, std::memory_order_relaxed); }

int TrainingThread() { return training_thread.load(std::memory_order_relaxed); }

void ResetProcessRolesForTest() {
  Roles& r = GetRoles();
  std::lock_guard<std::mutex> lock(r.mu);
  r.workers.clear();
  r.known = false;
  ++r.generation;
  training_thread.store(0, std::memory_order_relaxed);
}

}  // namespace gpuscope::internal
