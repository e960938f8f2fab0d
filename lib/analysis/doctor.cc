#include "gpuscope/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/host/host_stats.h"
#include "backends/nvml/nvml.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/text.h"
#include "gpuscope/version.h"

namespace gpuscope {
namespace {

using internal::GpuState;
using internal::HostPlacement;
using internal::HostSnapshot;

constexpr double kGiB = 1024.0 * 1024 * 1024;

bool Known(double v) { return !std::isnan(v); }

class Checks {
 public:
  explicit Checks(DoctorReport* r) : r_(r) {}
  void Add(std::string subject, std::string id, CheckStatus status, std::string value,
           std::string reason = "") {
    r_->checks.push_back(
        {std::move(subject), std::move(id), status, std::move(value), std::move(reason)});
  }
  void Fact(const std::string& key, std::string value) { r_->facts[key] = std::move(value); }

 private:
  DoctorReport* r_;
};

std::string Link(int gen, int width) { return absl::StrCat("Gen", gen, " x", width); }

// PCIe: a narrower link than the slot and card allow is a fault (reseat,
// riser, BIOS); a lower generation is normal at idle (GPUs save power by
// dropping it) but not under load.
void CheckPcieLink(const GpuState& g, const std::string& s, Checks& c) {
  if (g.pcie_gen > 0 && g.pcie_width > 0 && g.pcie_gen_max > 0 && g.pcie_width_max > 0) {
    const std::string value = absl::StrCat(Link(g.pcie_gen, g.pcie_width), " (max ",
                                           Link(g.pcie_gen_max, g.pcie_width_max), ")");
    // Facts: the width (it does not change at idle) and the maxima; the
    // current generation drops whenever the GPU idles, so it is not one.
    c.Fact(s + ".pcie_width", absl::StrCat("x", g.pcie_width));
    c.Fact(s + ".pcie_link_max", Link(g.pcie_gen_max, g.pcie_width_max));
    if (g.pcie_width < g.pcie_width_max) {
      c.Add(
          s, "pcie_link", CheckStatus::kFail, value,
          absl::StrCat("the link trained down to x", g.pcie_width, " of x", g.pcie_width_max,
                       ": host-device copies run at a fraction of their speed. Reseat the card or "
                       "riser, check the slot's BIOS setting, then confirm with nvidia-smi -q"));
    } else if (g.pcie_gen < g.pcie_gen_max) {
      // Normal at idle (the GPU lowers the link to save power): not a warning
      // on its own; telemetry during training shows it under load.
      c.Add(s, "pcie_link", CheckStatus::kOk,
            absl::StrCat(value, "; a lower generation at idle is normal"));
    } else {
      c.Add(s, "pcie_link", CheckStatus::kOk, value);
    }
  }
}

// Clocks now, and why they are held back.
void CheckClocks(const GpuState& g, const std::string& s, Checks& c) {
  if (Known(g.sm_clock_mhz) && Known(g.sm_clock_max_mhz)) {
    std::string value = absl::StrFormat("SM %.0f of %.0f MHz", g.sm_clock_mhz, g.sm_clock_max_mhz);
    if (g.clocks_event_reasons_known && g.clocks_event_reasons != 0) {
      absl::StrAppend(
          &value, "; ",
          absl::StrJoin(internal::ClocksEventReasonNames(g.clocks_event_reasons), ", "));
    }
    const uint64_t hw =
        internal::kHwSlowdown | internal::kHwPowerBrakeSlowdown | internal::kHwThermalSlowdown;
    if (g.clocks_event_reasons_known && (g.clocks_event_reasons & hw) != 0) {
      c.Add(s, "clocks", CheckStatus::kFail, value,
            "hardware slowdown: the GPU protects itself (overheating, power brake from the PSU or "
            "board). Check cooling, airflow and power delivery");
    } else if (g.clocks_event_reasons_known && internal::IsThrottling(g.clocks_event_reasons)) {
      c.Add(s, "clocks", CheckStatus::kWarn, value,
            "clocks capped by a power or thermal limit: check the power limit (nvidia-smi -q -d "
            "POWER), cooling and ambient temperature");
    } else {
      c.Add(s, "clocks", CheckStatus::kOk, value);
    }
  }
}

// Persistence mode: off costs each new process a GPU re-initialization.
void CheckPersistence(const GpuState& g, const std::string& s, Checks& c) {
  if (g.persistence_mode >= 0) {
    c.Fact(s + ".persistence", g.persistence_mode == 1 ? "on" : "off");
    if (g.persistence_mode == 1) {
      c.Add(s, "persistence", CheckStatus::kOk, "on");
    } else {
      c.Add(s, "persistence", CheckStatus::kWarn, "off",
            "each new process re-initializes the GPU (seconds); an administrator enables it with "
            "nvidia-smi -pm 1 (gpuscope never changes settings)");
    }
  }
}

// ECC memory errors since the driver loaded.
void CheckEcc(const GpuState& g, const std::string& s, Checks& c) {
  if (g.ecc_uncorrected >= 0) {
    const std::string value =
        absl::StrCat(g.ecc_uncorrected, " uncorrected, ", std::max<int64_t>(0, g.ecc_corrected),
                     " corrected (since the driver loaded)");
    if (g.ecc_uncorrected > 0) {
      c.Add(
          s, "ecc", CheckStatus::kFail, value,
          "uncorrected memory errors: results may be wrong and jobs may crash; drain the node and "
          "have the GPU checked");
    } else if (g.ecc_corrected > 0) {
      c.Add(s, "ecc", CheckStatus::kWarn, value,
            "corrected memory errors: watch whether they grow");
    } else {
      c.Add(s, "ecc", CheckStatus::kOk, value);
    }
  }
}

// Temperature: hot means thermal slowdown is near.
void CheckTemperature(const GpuState& g, const std::string& s, Checks& c) {
  if (Known(g.temperature_c)) {
    const std::string value = absl::StrFormat("%.0f C", g.temperature_c);
    if (g.temperature_c >= 85) {
      c.Add(s, "temperature", CheckStatus::kWarn, value,
            "hot: thermal slowdown is near; check cooling and airflow");
    } else {
      c.Add(s, "temperature", CheckStatus::kOk, value);
    }
  }
}

// Power draw against the power limit.
void CheckPower(const GpuState& g, const std::string& s, Checks& c) {
  if (Known(g.power_w) && Known(g.power_limit_w) && g.power_limit_w > 0) {
    const std::string value = absl::StrFormat("%.0f of %.0f W", g.power_w, g.power_limit_w);
    c.Fact(s + ".power_limit", absl::StrFormat("%.0f W", g.power_limit_w));
    if (g.power_w >= 0.98 * g.power_limit_w) {
      c.Add(s, "power", CheckStatus::kWarn, value,
            "at its power limit: clocks are capped; if the limit was lowered, an administrator can "
            "restore it (nvidia-smi -pl)");
    } else {
      c.Add(s, "power", CheckStatus::kOk, value);
    }
  }
}

// Compute mode (prohibited is a fault) and MIG mode.
void CheckComputeMode(const GpuState& g, const std::string& s, Checks& c) {
  if (g.compute_mode >= 0) {
    const char* names[] = {"default", "exclusive thread", "prohibited", "exclusive process"};
    const std::string mode =
        g.compute_mode < 4 ? names[g.compute_mode] : absl::StrCat(g.compute_mode);
    c.Fact(s + ".compute_mode", mode);
    if (g.compute_mode == 2) {
      c.Add(s, "compute_mode", CheckStatus::kFail, mode,
            "compute is prohibited on this GPU: no process can use it");
    } else {
      c.Add(s, "compute_mode", CheckStatus::kOk, mode);
    }
  }
  if (g.mig_mode >= 0) {
    c.Fact(s + ".mig", g.mig_mode == 1 ? "on" : "off");
    c.Add(s, "mig", CheckStatus::kOk,
          g.mig_mode == 1 ? "on (the process sees a MIG slice)" : "off");
  }
}

// NUMA: the process's CPUs should sit on the GPU's node.
void CheckNuma(const GpuState& g, const HostPlacement& placement, const std::string& sys_root,
               const std::string& s, Checks& c) {
  const int node = internal::PciNumaNode(sys_root, g.bus_id);
  if (node >= 0 && !placement.numa_nodes_of_allowed_cpus.empty()) {
    const auto& nodes = placement.numa_nodes_of_allowed_cpus;
    const std::string value =
        absl::StrCat("GPU on node ", node, "; process CPUs on node(s) ", absl::StrJoin(nodes, ","));
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
      c.Add(
          s, "numa", CheckStatus::kWarn, value,
          absl::StrCat("every host-device copy crosses sockets: run the process on the GPU's node "
                       "(numactl --cpunodebind=",
                       node, " --membind=", node, ")"));
    } else {
      c.Add(s, "numa", CheckStatus::kOk, value);
    }
  }
}

// One GPU's facts and checks, in report order.
void CheckGpu(const GpuState& g, const HostPlacement& placement, const std::string& sys_root,
              Checks& c) {
  const std::string s = absl::StrCat("gpu", g.index);
  c.Fact(s + ".name", g.name);
  if (!g.bus_id.empty()) c.Fact(s + ".bus_id", g.bus_id);

  CheckPcieLink(g, s, c);
  CheckClocks(g, s, c);
  CheckPersistence(g, s, c);
  CheckEcc(g, s, c);
  CheckTemperature(g, s, c);
  CheckPower(g, s, c);
  CheckComputeMode(g, s, c);
  CheckNuma(g, placement, sys_root, s, c);
}

void CheckHost(const DoctorOptions& o, const HostPlacement& p, Checks& c) {
  if (p.cpus_allowed > 0) {
    std::string value = absl::StrCat(p.cpus_allowed, " CPUs allowed");
    if (p.cpus_online > 0) absl::StrAppend(&value, " of ", p.cpus_online);
    if (p.cpus_online > 0) c.Fact("host.cpus_online", absl::StrCat(p.cpus_online));
    if (Known(p.cgroup_cpu_limit)) {
      absl::StrAppend(&value, absl::StrFormat("; container limit %.1f", p.cgroup_cpu_limit));
    }
    if (Known(p.cgroup_cpu_limit) && p.cgroup_cpu_limit < p.cpus_allowed) {
      c.Add("host", "cpus", CheckStatus::kWarn, value,
            absl::StrFormat(
                "the container may use %.1f CPUs but sees %d: size DataLoader num_workers "
                "for %.0f, not for what os.cpu_count() says",
                p.cgroup_cpu_limit, p.cpus_allowed, std::floor(p.cgroup_cpu_limit)));
    } else {
      c.Add("host", "cpus", CheckStatus::kOk, value);
    }
  }
  absl::StatusOr<HostSnapshot> h = internal::ReadHost(o.proc_root);
  if (!h.ok()) {
    c.Add("host", "proc", CheckStatus::kWarn, "unreadable", std::string(h.status().message()));
    return;
  }
  // Memory: the container's (or Slurm job's) limit when it is below the
  // host's memory, since that is where the OOM killer strikes.
  double mem_total = h->mem_total_bytes, mem_available = h->mem_available_bytes;
  const char* of_what = "";
  if (const internal::ContainerMemory cm =
          internal::ReadContainerMemory(o.cgroup_root, o.proc_root);
      Known(cm.limit_bytes) && (!Known(mem_total) || cm.limit_bytes < mem_total)) {
    mem_total = cm.limit_bytes;
    mem_available =
        Known(mem_available) ? std::min(mem_available, cm.available_bytes) : cm.available_bytes;
    of_what = " (container limit)";
  }
  const bool memory_short =
      Known(mem_total) && Known(mem_available) && mem_available < 0.1 * mem_total;
  if (Known(mem_total) && Known(mem_available) && mem_total > 0) {
    std::string value = absl::StrFormat("%.1f of %.1f GiB available%s", mem_available / kGiB,
                                        mem_total / kGiB, of_what);
    if (Known(h->memory_pressure_pct))
      absl::StrAppend(&value, absl::StrFormat("; pressure %.1f%%", h->memory_pressure_pct));
    if (memory_short || (Known(h->memory_pressure_pct) && h->memory_pressure_pct > 10)) {
      c.Add(
          "host", "memory", CheckStatus::kWarn, value,
          "little memory left, or tasks stall waiting for it: fewer or lighter DataLoader workers, "
          "smaller prefetch_factor");
    } else {
      c.Add("host", "memory", CheckStatus::kOk, value);
    }
  }
  if (Known(h->swap_total_bytes) && Known(h->swap_free_bytes)) {
    const double used = h->swap_total_bytes - h->swap_free_bytes;
    const std::string value =
        h->swap_total_bytes <= 0
            ? "none configured"
            : absl::StrFormat("%.1f of %.1f GiB used", used / kGiB, h->swap_total_bytes / kGiB);
    // Swap merely resident is harmless; swap while memory is short is not.
    const bool short_of_memory =
        (Known(h->memory_pressure_pct) && h->memory_pressure_pct > 1) || memory_short;
    if (h->swap_total_bytes > 0 && used > 0.1 * h->swap_total_bytes && short_of_memory) {
      c.Add("host", "swap", CheckStatus::kWarn, value,
            "swap in use while memory is short: pages the loader or the trainer touch may be on "
            "disk; free memory or reduce worker memory");
    } else {
      c.Add("host", "swap", CheckStatus::kOk, value);
    }
  }
  // Load is the whole host's: compare it with the host's CPUs.
  const int host_cpus = p.cpus_online > 0 ? p.cpus_online : p.cpus_allowed;
  if (Known(h->load1) && host_cpus > 0) {
    const std::string value = absl::StrFormat("%.2f on %d CPUs", h->load1, host_cpus);
    if (h->load1 > 1.5 * host_cpus) {
      c.Add("host", "load", CheckStatus::kWarn, value,
            "more runnable tasks than CPUs: the input pipeline and the trainer compete for them");
    } else {
      c.Add("host", "load", CheckStatus::kOk, value);
    }
  }
}

}  // namespace

std::string_view CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kOk: return "OK";
    case CheckStatus::kWarn: return "WARN";
    case CheckStatus::kFail: return "FAIL";
  }
  return "OK";
}

bool DoctorReport::has_failures() const {
  return std::any_of(checks.begin(), checks.end(),
                     [](const DoctorCheck& c) { return c.status == CheckStatus::kFail; });
}

DoctorReport RunDoctor(const DoctorOptions& options) {
  DoctorReport r;
  r.version = GPUSCOPE_VERSION;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) r.hostname = host;
  Checks c(&r);
  const HostPlacement placement = internal::ReadPlacement(
      options.sys_root, options.cgroup_root,
      options.allowed_cpus.empty() ? nullptr : &options.allowed_cpus, options.proc_root);
  absl::StatusOr<std::unique_ptr<internal::Nvml>> nvml = internal::Nvml::Open();
  if (!nvml.ok()) {
    c.Add("host", "gpus", CheckStatus::kWarn, "no NVIDIA GPU found",
          absl::StrCat("NVML is not usable (", nvml.status().message(),
                       "): no GPU checks; if this node should have GPUs, check the driver and the "
                       "container runtime (nvidia-smi)"));
    c.Fact("gpu_count", "0");
  } else {
    r.driver_version = (*nvml)->driver_version();
    r.cuda_driver_version = (*nvml)->cuda_driver_version();
    r.gpu_count = (*nvml)->device_count();
    const std::string cuda =
        r.cuda_driver_version > 0
            ? absl::StrCat(r.cuda_driver_version / 1000, ".", r.cuda_driver_version % 1000 / 10)
            : "unknown";
    c.Add("host", "driver", CheckStatus::kOk,
          absl::StrCat("driver ", r.driver_version, ", CUDA ", cuda));
    c.Fact("driver_version", r.driver_version);
    c.Fact("cuda_driver_version", absl::StrCat(r.cuda_driver_version));
    c.Fact("gpu_count", absl::StrCat(r.gpu_count));
    if (r.gpu_count == 0) {
      c.Add("host", "gpus", CheckStatus::kWarn, "0 GPUs",
            "the driver sees no GPU: check nvidia-smi and the container runtime");
    }
    for (int i = 0; i < r.gpu_count; ++i)
      CheckGpu((*nvml)->Read(i), placement, options.sys_root, c);
  }
  CheckHost(options, placement, c);
  return r;
}

std::vector<std::string> DoctorBaselineDiff(const DoctorReport& baseline, const DoctorReport& now) {
  std::vector<std::string> diffs;
  // The baseline is a file from elsewhere: what it says is escaped, so that
  // it cannot rewrite the terminal it is printed on.
  const auto safe = [](const std::string& text) { return internal::TerminalSafe(text); };
  for (const auto& [key, was] : baseline.facts) {
    const auto it = now.facts.find(key);
    if (it == now.facts.end()) {
      diffs.push_back(absl::StrCat(safe(key), ": ", safe(was), " -> (missing)"));
    } else if (it->second != was) {
      diffs.push_back(absl::StrCat(safe(key), ": ", safe(was), " -> ", safe(it->second)));
    }
  }
  return diffs;
}

}  // namespace gpuscope
