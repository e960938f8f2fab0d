// The hot path allocates nothing: a counting global operator new, armed only
// on the recording thread, sees zero allocations across thousands of scopes.

#include <atomic>
#include <cstdlib>
#include <new>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

namespace {

thread_local bool g_counting = false;
std::atomic<int64_t> g_allocations{0};

void* Allocate(std::size_t n) {
  if (g_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return Allocate(n); }
void* operator new[](std::size_t n) { return Allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace gpuscope {
namespace {

TEST(AllocationTest, ScopesAllocateNothing) {
  Session session(Options{.window = 64, .queue_capacity = 1 << 16});
  const PhaseId custom = session.RegisterPhase("custom").value();
  {
    // First use of a name registers it (allowed to allocate, once).
    StepScope step(session);
    PhaseScope p(session, "by-name");
  }
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 5000; ++i) {
    StepScope step(session, {.samples = 4});
    {
      PhaseScope p(session, Phase::kData);
    }
    {
      PhaseScope p(session, custom);
      PhaseScope q(session, "by-name");
    }
    // Misuse paths are on the hot path too.
    StepScope nested(session);
    PhaseScope bad(session, "");
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0);
  EXPECT_EQ(session.Summarize().total_steps, 5001);
}

TEST(AllocationTest, CounterSeesAllocations) {
  // The instrument works: an allocation on this thread is counted.
  g_allocations = 0;
  g_counting = true;
  auto* p = new int(3);
  g_counting = false;
  delete p;
  EXPECT_EQ(g_allocations.load(), 1);
}

}  // namespace
}  // namespace gpuscope
