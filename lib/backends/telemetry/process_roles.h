// What the host sampler is told about the process by those who know it: which
// child processes are the data loader's workers (the Python package reads
// them from a torch DataLoader's iterator; a C++ trainer names its own with
// gpuscope::AddLoaderWorkers()), and which thread is the training thread (a
// session's recording thread, named when it claims it). Process-wide, like
// the sampler itself; every function is thread-safe and never blocks for
// long (one small mutex).

#ifndef GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_ROLES_H_
#define GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_ROLES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuscope::internal {

// Loader workers kept at most: the newest win (a job that starts a new
// DataLoader every epoch leaves dead pids behind; a dead pid counts for
// nothing, since only live descendants of the process are measured).
inline constexpr size_t kMaxLoaderWorkers = 256;

// Adds `pids` to the loader's workers and marks them known, even when
// `pids` is empty (a loader without worker processes: its work is the
// process's own). Negative and zero pids are ignored.
void AddLoaderWorkers(const std::vector<int>& pids);

// The loader's workers, when they changed since `*generation` (which is
// then advanced): true and `*pids` (sorted, unique) and `*known` set;
// false and both untouched otherwise. Start with *generation = 0.
bool LoaderWorkersSince(uint64_t* generation, std::vector<int>* pids, bool* known);

// The training thread (a Linux thread id); 0 until a session names one.
void SetTrainingThread(int tid);
int TrainingThread();

// Forgets both (tests).
void ResetProcessRolesForTest();

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_TELEMETRY_PROCESS_ROLES_H_
