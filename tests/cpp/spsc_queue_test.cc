#include "base/spsc_queue.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

TEST(SpscQueueTest, KeepsOrderAndRefusesWhenFull) {
  SpscQueue<int> q(5);  // rounds up to 8
  EXPECT_EQ(q.capacity(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(q.TryPush(i));
  EXPECT_FALSE(q.TryPush(99));
  std::vector<int> got;
  EXPECT_EQ(q.Drain([&](int v) { got.push_back(v); }), 8u);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(q.TryPush(8));  // space again after draining
  EXPECT_EQ(q.SizeApprox(), 1u);
}

// One producer, one consumer, a small ring: every element arrives once, in
// order. ThreadSanitizer runs this.
TEST(SpscQueueTest, ConcurrentProducerAndConsumerLoseNothing) {
  SpscQueue<uint64_t> q(64);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount;) {
      if (q.TryPush(i)) {
        ++i;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint64_t expected = 0;
  bool in_order = true;
  while (expected < kCount) {
    q.Drain([&](uint64_t v) {
      in_order = in_order && v == expected;
      ++expected;
    });
  }
  producer.join();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(expected, kCount);
}

}  // namespace
}  // namespace gpuscope::internal
