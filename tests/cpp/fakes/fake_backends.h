// Test doubles for the backend seams (Kineto's MockCuptiActivities idea):
// each records how it was called and answers as configured.

#ifndef GPUSCOPE_TESTS_CPP_FAKES_FAKE_BACKENDS_H_
#define GPUSCOPE_TESTS_CPP_FAKES_FAKE_BACKENDS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/record.h"
#include "session/sources.h"

namespace gpuscope::testing {

// Records annotations as text: "push step 0", "push data", "pop".
class RecordingAnnotator final : public internal::Annotator {
 public:
  struct Log {
    std::mutex mu;
    std::map<uint16_t, std::string> names;
    std::vector<std::string> calls;
  };

  explicit RecordingAnnotator(std::shared_ptr<Log> log) : log_(std::move(log)) {}

  void RegisterName(uint16_t id, std::string_view name) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->names[id] = std::string(name);
  }
  void PushStep(uint64_t step_index) noexcept override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->calls.push_back("push step " + std::to_string(step_index));
  }
  void PushPhase(uint16_t id) noexcept override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->calls.push_back("push " + log_->names[id]);
  }
  void Pop() noexcept override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->calls.push_back("pop");
  }

 private:
  std::shared_ptr<Log> log_;
};

// An activity source whose Start() answers `start_status`. Calls are counted
// in `calls`, which outlives the fake (a session owns and destroys it).
class FakeActivitySource final : public internal::ActivitySource {
 public:
  struct Calls {
    int starts = 0;
    int stops = 0;
  };
  explicit FakeActivitySource(absl::Status start_status,
                              std::shared_ptr<Calls> calls = std::make_shared<Calls>())
      : start_status_(std::move(start_status)), calls_(std::move(calls)) {}
  absl::string_view name() const override { return "fake-cupti"; }
  absl::Status Start() override {
    ++calls_->starts;
    return start_status_;
  }
  int64_t Drain(std::vector<internal::DeviceInterval>*, bool) override { return 0; }
  uint64_t records() const override { return 0; }
  uint64_t dropped() const override { return 0; }
  void Stop() override { ++calls_->stops; }

 private:
  absl::Status start_status_;
  std::shared_ptr<Calls> calls_;
};

// A device timer whose Start() answers `start_status`; records nothing.
class FakeDeviceTimer final : public internal::DeviceTimer {
 public:
  explicit FakeDeviceTimer(absl::Status start_status) : start_status_(std::move(start_status)) {}
  absl::string_view name() const override { return "fake-events"; }
  absl::Status Start() override { return start_status_; }
  uint32_t Record(internal::StreamHandle) noexcept override { return internal::kNoEvent; }
  uint16_t LaneOf(uint32_t) const override { return 0; }
  int LaneDevice(uint16_t) const override { return 0; }
  internal::MarkerState Query(uint32_t, int64_t*) override { return internal::MarkerState::kLost; }
  void Release(uint32_t) override {}
  absl::Status Maintain() override { return absl::OkStatus(); }
  int64_t accuracy_ns() const override { return 0; }
  void Stop() override {}

 private:
  absl::Status start_status_;
};

}  // namespace gpuscope::testing

#endif  // GPUSCOPE_TESTS_CPP_FAKES_FAKE_BACKENDS_H_
