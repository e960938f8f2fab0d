#include "core/top_kernels.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "backends/kernel_names.h"
#include "core/quantiles.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {
namespace {

struct Sum {
  double ns = 0;  // per device
  int64_t count = 0;
  KernelClass kernel_class = KernelClass::kOther;
};

// The entries of `sums` (by any key), largest first, at most `n`, as
// KernelStats with `phase` set by the caller.
template <typename Key>
std::vector<std::pair<Key, Sum>> Largest(const std::map<Key, Sum>& sums, size_t n) {
  std::vector<std::pair<Key, Sum>> v(sums.begin(), sums.end());
  const auto larger = [](const auto& a, const auto& b) {
    return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
  };
  const size_t kept = std::min(v.size(), n);
  std::partial_sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(kept), v.end(), larger);
  v.resize(kept);
  return v;
}

KernelStats Stats(uint32_t name, const Sum& sum, double steps, double kernel_ns) {
  KernelStats k;
  k.name = name == kNoKernelName ? "(unnamed)" : KernelName(name);
  k.kernel_class = std::string(KernelClassName(sum.kernel_class));
  k.count_per_step = static_cast<double>(sum.count) / steps;
  k.time_per_step = sum.ns * kNsToSeconds / steps;
  k.share = kernel_ns > 0 ? std::min(1.0, sum.ns / kernel_ns) : 0;
  return k;
}

}  // namespace

void FillTopKernels(const WindowView& window, const std::vector<std::string>& phase_names,
                    Summary* out) {
  out->top_kernels.clear();
  for (PhaseStats& p : out->phases) p.top_kernels.clear();
  std::map<std::pair<uint32_t, int>, Sum> by_phase;  // (name, phase id)
  double kernel_ns = 0;                              // every kernel's, per device
  int64_t steps = 0;
  window.ForEachStep([&](const StepRecord& s, const StepDevices* devices) {
    if (s.device_busy_ns < 0 || devices == nullptr) return;
    ++steps;
    const double per_device = 1.0 / std::max<double>(1, s.num_devices);
    kernel_ns += static_cast<double>(devices->activity.kernel_ns) * per_device;
    for (size_t i = 0; i < devices->num_kernels; ++i) {
      const KernelTally& t = devices->kernels[i];
      Sum& sum = by_phase[{t.name, t.phase_id}];
      sum.ns += static_cast<double>(t.ns) * per_device;
      sum.count += t.count;
      sum.kernel_class = t.kernel_class;
    }
  });
  if (steps == 0) return;
  const auto n = static_cast<double>(steps);
  std::map<uint32_t, Sum> by_name;
  std::map<uint32_t, std::map<int, double>> phases_of;  // name -> phase -> ns
  std::map<int, std::map<uint32_t, Sum>> in_phase;      // phase -> name -> sum
  for (const auto& [key, sum] : by_phase) {
    Sum& total = by_name[key.first];
    total.ns += sum.ns;
    total.count += sum.count;
    total.kernel_class = sum.kernel_class;
    phases_of[key.first][key.second] += sum.ns;
    in_phase[key.second][key.first] = sum;
  }
  const auto phase_name = [&](int id) {
    return id >= 0 && static_cast<size_t>(id) < phase_names.size()
               ? phase_names[static_cast<size_t>(id)]
               : std::string(kOtherPhaseName);
  };
  for (const auto& [name, sum] : Largest(by_name, kMaxTopKernels)) {
    KernelStats k = Stats(name, sum, n, kernel_ns);
    const auto& launched = phases_of[name];
    const auto most = std::max_element(launched.begin(), launched.end(), [](auto& a, auto& b) {
      return std::tie(a.second, b.first) < std::tie(b.second, a.first);
    });
    k.phase = most->first >= 0 ? phase_name(most->first) : "";
    out->top_kernels.push_back(std::move(k));
  }
  for (PhaseStats& p : out->phases) {
    for (const auto& [id, sums] : in_phase) {
      if (phase_name(id) != p.name) continue;
      for (const auto& [name, sum] : Largest(sums, kMaxPhaseTopKernels)) {
        KernelStats k = Stats(name, sum, n, kernel_ns);
        k.phase = p.name;
        p.top_kernels.push_back(std::move(k));
      }
    }
  }
}

}  // namespace gpuscope::internal
