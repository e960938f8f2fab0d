#include "backends/host/clock.h"

namespace gpuscope {

int64_t MonotonicNowNs() noexcept { return internal::ReadMonotonicNs(); }

}  // namespace gpuscope
