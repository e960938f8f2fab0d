// Helpers shared by the C++ tests: sessions on a ManualClock, so that every
// duration in a test is exact, and finding look-ups.

#ifndef GPUSCOPE_TESTS_CPP_TEST_UTIL_H_
#define GPUSCOPE_TESTS_CPP_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gpuscope/gpuscope.h"

namespace gpuscope::testing {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kUs = 1'000;

// A scratch directory tree (fake /proc, /sys, cgroup roots), removed with it.
class TempTree {
 public:
  TempTree() {
    char tmpl[] = "/tmp/gpuscope_tree_XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~TempTree() { std::filesystem::remove_all(root_); }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  // Writes `text` to `rel` below the root, making the directories on the way.
  void Write(const std::string& rel, const std::string& text) const {
    const std::filesystem::path p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string Path(const std::string& rel) const {
    return (std::filesystem::path(root_) / rel).string();
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

struct ClockedSession {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<Session> session;

  explicit ClockedSession(Options options = {}) {
    options.clock = clock;
    session = std::make_unique<Session>(std::move(options));
  }
  Session& operator*() { return *session; }
  Session* operator->() { return session.get(); }

  // Runs `ns` of simulated work inside phase `phase`.
  template <typename P>
  void Phase(P phase, int64_t ns) {
    PhaseScope p(*session, phase);
    clock->Advance(ns);
  }
};

// The finding `id` among `fs`, or nullptr.
inline const Finding* Find(const std::vector<Finding>& fs, const std::string& id) {
  for (const Finding& f : fs) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

// The ids of `fs`, for a failure message.
inline std::string Ids(const std::vector<Finding>& fs) {
  std::string ids;
  for (const Finding& f : fs) ids += f.id + " ";
  return ids;
}

}  // namespace gpuscope::testing

#endif  // GPUSCOPE_TESTS_CPP_TEST_UTIL_H_
