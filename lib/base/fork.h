// The fork generation: how many fork()s separate this process from the one
// gpuscope's threads were started in.
//
// The worker's pthread_atfork child handler bumps it (session/worker.cc).
// Anything that owns a thread or a device handle remembers the generation it
// was created in and, finding it changed, knows it is in a forked child where
// that thread or handle does not exist.

#ifndef GPUSCOPE_LIB_BASE_FORK_H_
#define GPUSCOPE_LIB_BASE_FORK_H_

#include <atomic>
#include <cstdint>

namespace gpuscope::internal {

// Bumped in every forked child.
inline std::atomic<uint32_t> g_fork_generation{0};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_FORK_H_
