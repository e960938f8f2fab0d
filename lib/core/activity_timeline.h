// What device activity records (CUPTI, or the simulated device) say about one
// step: exact GPU busy and idle time per device, idle charged to its cause,
// and the per-step counts diagnosis needs (docs/definitions.md "Activity").
//
//   * Busy: the union of a device's activity intervals (kernels, copies,
//     memsets) clipped to the step's host window. Idle: the rest.
//   * Launch gaps: an idle gap between two pieces of device activity, inside
//     the window, shorter than the launch threshold, is charged to `launch`
//     (kernel-launch overhead); every other idle piece is charged to the
//     innermost host phase open over it (`other` when none).
//   * Host-wait gaps (HTA's test): a kernel whose launch call began after the
//     previous activity on its stream had ended, in the same step, found its
//     stream idle, waiting for the host. Counted with the time it waited.
//   * Per phase, the device time of the work it launched: the union of the
//     intervals whose launch call began inside one of its occurrences.
//   * Synchronizations (host calls that block on the device) are counted with
//     the host time they blocked; they are not device activity. Idle after a
//     sync: an idle piece (not a launch gap) in which a synchronization
//     returned is the sync's, from when the host began to wait (or the piece
//     began, if later) to the next device work: the sync drained the queue
//     and the GPU waits until the host launches again; not the parts of it
//     in which a data, h2d or comm phase was the innermost open (the loader,
//     copies or collectives held the host: their rules' idle). A sync
//     record's device is not always known (CUPTI's carry a context): each
//     applies to every device.
//   * Kernels by name: per (kernel name, innermost phase open at its
//     launch), the launches and summed durations of the kernels that began
//     in the window; the step keeps those of its kKernelNamesPerStep
//     largest names.
//   * Device time by category: each instant of a device's busy time in the
//     window goes to one category, by priority over the activity running
//     then: compute kernel > memcpy > memset > communication (collective
//     kernels). The categories sum to the busy time; idle is the rest.

#ifndef GPUSCOPE_LIB_CORE_ACTIVITY_TIMELINE_H_
#define GPUSCOPE_LIB_CORE_ACTIVITY_TIMELINE_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backends/activity_source.h"

namespace gpuscope::internal {

inline constexpr int64_t kDefaultLaunchThresholdNs = 20'000;

// One host phase occurrence in the step.
struct HostPhase {
  int phase_id = -1;
  int depth = 0;  // 0: top level
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct ActivityStepInput {
  int64_t begin_ns = 0;  // the step's host window
  int64_t end_ns = 0;
  std::vector<HostPhase> phases;  // any order
  // Activity that may concern the step (any order; intervals wholly outside
  // the window are used for launch-gap and host-wait tests only).
  std::span<const DeviceInterval> activity;
  int64_t launch_threshold_ns = kDefaultLaunchThresholdNs;
  // Devices that take part even without activity in the window (the
  // aggregator passes those that worked by the step's end, within the 10 s
  // before it): a step in which a GPU did nothing is 100 % idle on it.
  std::vector<int> known_devices;
};

struct ActivityDeviceResult {
  int device = 0;
  int64_t busy_ns = 0;
  int64_t idle_ns = 0;
  int64_t idle_launch_ns = 0;  // gaps shorter than the launch threshold
  int64_t idle_other_ns = 0;   // idle with no phase open
  // Busy time by category (they sum to busy_ns).
  int64_t kernel_ns = 0;  // a compute (non-collective) kernel ran
  int64_t memcpy_ns = 0;  // else a copy
  int64_t memset_ns = 0;  // else a memset
  int64_t comm_ns = 0;    // else only collectives
};

// Per-step counts (kernels, copies and syncs whose begin lies in the window).
struct ActivityCounts {
  int64_t kernels = 0;
  int64_t kernel_median_ns = 0;  // 0 without kernels
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  int64_t copies = 0;
  int64_t pageable_copies = 0;
  int64_t syncs = 0;
  int64_t sync_ns = 0;         // host time blocked in them
  int64_t host_wait_gaps = 0;  // kernels that found their stream idle, waiting for the host
  int64_t host_wait_ns = 0;
  int64_t sync_idle_ns = 0;  // idle after a sync returned (not in data/h2d/comm), summed
  // Kernel time (summed durations) by what the kernel names say.
  int64_t kernel_ns = 0;
  int64_t gemm_ns = 0;        // GEMMs in any precision
  int64_t gemm_fp32_ns = 0;   // of which FP32 on CUDA cores
  int64_t collective_ns = 0;  // NCCL kernels
  // Collective time in the window that no other activity on its device
  // overlapped, summed over devices.
  int64_t collective_exposed_ns = 0;
  int64_t pageable_h2d_copies = 0;
  // Busy time in the window by category (ActivityDeviceResult), summed over
  // devices: with idle, they sum to the window times the devices.
  int64_t busy_kernel_ns = 0;
  int64_t busy_memcpy_ns = 0;
  int64_t busy_memset_ns = 0;
  int64_t busy_comm_ns = 0;
};

// One kernel name's work in a step, by the phase that launched it.
struct KernelTally {
  int64_t ns = 0;         // summed durations
  uint32_t name = 0;      // InternKernelName()'s id
  uint32_t count = 0;     // launches
  int32_t phase_id = -1;  // the innermost phase open at its launch; -1: none, or launch unknown
  KernelClass kernel_class = KernelClass::kOther;
};

// What a step keeps for the summary's top kernels: its kKernelNamesPerStep
// kernel names with the most device time, with every phase they were
// launched in, at most kKernelsPerStep (name, phase) entries.
inline constexpr size_t kKernelNamesPerStep = 16;
inline constexpr size_t kKernelsPerStep = 32;

struct ActivityStepResult {
  int64_t window_ns = 0;
  // Per device with activity overlapping the window, or known, by ordinal.
  std::vector<ActivityDeviceResult> devices;
  // Sums over `devices`.
  int64_t busy_ns = 0;
  int64_t idle_ns = 0;
  int64_t idle_launch_ns = 0;
  int64_t idle_other_ns = 0;
  // Per entry of ActivityStepInput::phases: idle charged to it (summed over
  // devices) and the device time of the work launched in it (the union over
  // all of a phase id's occurrences is the aggregator's job).
  struct PerPhase {
    int64_t idle_ns = 0;
  };
  std::vector<PerPhase> phases;
  ActivityCounts counts;
  // The kernels that began in the window, by (name, launching phase), of
  // the kKernelNamesPerStep names with the most device time; largest first.
  std::vector<KernelTally> kernels;
};

// AnalyzeActivityStep()
ActivityStepResult AnalyzeActivityStep(const ActivityStepInput& in);

// LaunchedDeviceTime()
//
// The union length of the intervals in `activity` whose launch call began
// inside one of `ranges` (host intervals): the device time of the work a
// phase launched.
int64_t LaunchedDeviceTime(std::span<const DeviceInterval> activity,
                           const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_ACTIVITY_TIMELINE_H_
