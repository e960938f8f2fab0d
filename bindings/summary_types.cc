// gs.Summary and its parts: Python views over the C++ Summary.
//
// Every attribute that mirrors a field is defined from the field's one
// declaration (lib/export/summary_fields.h) by FieldProperties; the
// exceptions below, each commented, are where the Python API has always
// differed from the JSON. All times are in seconds.

#include <pybind11/pybind11.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bound_types.h"
#include "core/stalls.h"
#include "export/summary_fields.h"
#include "field_properties.h"
#include "gil_released.h"
#include "gpuscope/ranks.h"
#include "gpuscope/report.h"
#include "gpuscope/session.h"
#include "gpuscope/summary.h"
#include "hot_types.h"
#include "py_json.h"
#include "type_hints.h"
#include "value_or_throw.h"

namespace py = pybind11;

namespace gpuscope::python {
namespace {

constexpr char kQuantilesDoc[] =
    "A duration's distribution, in seconds (``count == 0``: all zeros): ``count``, ``mean``, "
    "``stddev``, ``min``, ``max``, ``p50``, ``p90``, ``p95``, ``p99``.";

constexpr char kPhaseStatsDoc[] =
    "One phase over the window; ``\"other\"`` is step time outside every top-level phase.\n\n"
    "``share`` is the phase's top-level time as a fraction of step time: the shares of all "
    "phases plus ``other`` sum to 1. ``inclusive_share`` counts its time at any depth (a nested "
    "phase has share 0 and inclusive_share > 0). ``p50``..``p99``, ``mean``, ``max`` are "
    "per-step times over the ``steps`` steps that contain it. ``device``: per-step GPU time "
    "(``Quantiles``) with a GPU source, else None; ``backlog_p50``: the median GPU lag when the "
    "phase began, else None; ``top_kernels``: the kernels it launched, by device time "
    "(``KernelStats``, CUPTI only, else empty).";

constexpr char kKernelStatsDoc[] =
    "One kernel by name over the window, from CUPTI's records (``Summary.top_kernels``, "
    "``PhaseStats.top_kernels``): ``name`` (as the profiler recorded it), ``kernel_class`` "
    "(``\"gemm_fp32\"``, ``\"gemm_reduced\"``, ``\"gemm\"``, ``\"collective\"``, "
    "``\"other\"``), ``phase`` (the phase that launched most of its time; ``\"\"``: none), "
    "``count_per_step``, ``time_per_step`` (s of device time per step and GPU) and ``share`` "
    "(of the window's kernel time).";

constexpr char kEfficiencyStatsDoc[] =
    "Model FLOPs utilization over the window for this process (``Summary.efficiency``, present "
    "with ``Session(flops_per_step=...)`` or ``flops_per_sample=...``; docs/mfu.md): "
    "``flops_per_second`` (model FLOPs this rank executed per second of step time), "
    "``peak_flops`` (one GPU's dense peak), ``peak_source`` (\"options\" or the table row), "
    "``precision``, ``mfu`` (0..1; None when the FLOPs or the peak are unknown) and ``reason`` "
    "(why ``mfu`` is None).";
constexpr char kWarmupStatsDoc[] =
    "The warm-up steps (``Session(warmup=N)``, ``s.reset(warmup=N)``) since the session started "
    "or was last reset (``Summary.warmup``): ``steps`` (how many so far), ``total`` and ``max`` "
    "(s). They are in no other number of the summary.";

constexpr char kDeviceStatsDoc[] =
    "One GPU's share of a session (``Summary.devices``): ``device`` (the CUDA ordinal), "
    "``gpu_steps`` (window steps it was timed in) and ``gpu_idle_pct`` (0..100 over those steps; "
    "a lower bound with ``\"events\"``).";

constexpr char kActivityStatsDoc[] =
    "Per-step means from activity records (``Summary.activity``, source ``\"cupti\"``): "
    "``kernels_per_step``, ``kernel_time_p50`` (s), ``h2d_bytes_per_step``, "
    "``d2h_bytes_per_step``, ``copies_per_step``, ``pageable_copies_per_step``, "
    "``syncs_per_step``, ``sync_time_per_step`` (s), ``host_wait_gaps_per_step`` and "
    "``host_wait_time_per_step`` (s: the GPU waited for a launch), ``kernel_time_per_step``, "
    "``gemm_time_per_step``, ``fp32_gemm_time_per_step`` (GEMMs on FP32 CUDA cores) and "
    "``collective_time_per_step`` (NCCL) and ``exposed_collective_time_per_step`` (the part no "
    "other work on its GPU overlapped), all in s per GPU, from kernel names; "
    "``pageable_h2d_copies_per_step``; device time by category, each instant of a step on a "
    "GPU going to compute kernels > memcpy > memset > communication (NCCL) > idle: "
    "``device_time_kernel``, ``device_time_memcpy``, ``device_time_memset``, "
    "``device_time_comm``, ``device_time_idle`` (s per step and GPU) and "
    "``device_share_kernel``, ``device_share_memcpy``, ``device_share_memset``, "
    "``device_share_comm``, ``device_share_idle`` (fractions of the GPUs' step time, summing to "
    "1; idle is ``gpu_idle_pct / 100``), None in summaries saved before them; "
    "``sync_idle_share`` (the part of that idle after a sync returned, until the host launched "
    "again; None before it existed); ``dropped_records``.";

constexpr char kOverheadStatsDoc[] =
    "What gpuscope itself cost (``Summary.overhead``): ``scope_ns`` (host ns one scope, begin "
    "and end, costs on this machine, measured once per process; None before), "
    "``records_per_step`` (a step and its phases), ``worker_cpu_s`` and ``worker_cpu_share`` "
    "(the background worker's CPU, process-wide), ``activity_buffers`` (CUPTI buffers read).";

constexpr char kGpuTelemetryDoc[] =
    "One GPU as NVML saw it over the window (``TelemetryStats.gpus``): ``index``, "
    "``utilization_pct`` (as nvidia-smi reports it), ``sm_clock_mhz``, ``sm_clock_max_mhz``, "
    "``mem_clock_mhz``, ``mem_clock_max_mhz``, ``power_w``, ``power_limit_w``, "
    "``temperature_c``, ``memory_used_bytes``, ``memory_total_bytes``, "
    "``pcie_rx_bytes_per_s``, ``pcie_tx_bytes_per_s`` (means; None where the GPU does not "
    "report it), ``clocks_event_reasons``, and at the last sample ``pcie_gen``, "
    "``pcie_gen_max``, ``pcie_width``, ``pcie_width_max``, ``ecc_corrected``, "
    "``ecc_uncorrected``, ``persistence_mode``, ``compute_mode``, ``mig_mode`` (None where not "
    "available).";

constexpr char kTelemetryStatsDoc[] =
    "Device and host state the worker sampled (``Summary.telemetry``): ``source``, ``steps`` "
    "(window steps covered), ``gpu_utilization_pct`` (as nvidia-smi reports it: not GPU busy), "
    "``sm_clock_ratio`` (the slowest GPU's clock over its maximum), ``throttled_steps`` (share "
    "of steps with a power or thermal cap), ``clocks_event_reasons``, ``host_cpu_pct``, "
    "``host_iowait_pct``, ``process_cores``, ``worker_cores`` (the data loader's worker "
    "processes; None until a loader names them), ``child_cores`` (other descendant processes), "
    "``cpu_wait_share`` (share of time the training thread waited for a CPU), "
    "``worker_cpu_wait_cores``, ``cpu_pressure_pct`` (PSI), ``steal_pct``, "
    "``cpu_throttled_pct`` (share of a container CPU limit's periods it was throttled in), "
    "``memory_available_bytes``, ``memory_pressure_pct`` (PSI), ``swap_pages_per_s``, "
    "``load1``, ``cpus_available`` (affinity cut by a container limit), "
    "``throttled_sm_clock_ratio`` (the clock ratio over the throttled steps only) and ``gpus`` "
    "(``GpuTelemetry``); None where not sampled.";

constexpr char kGpuMemoryDoc[] =
    "One GPU's memory as this process's allocator reported it over the window "
    "(``MemoryStats.gpus``), bytes: ``device``, ``allocated_bytes`` and ``reserved_bytes`` "
    "(at the last sample), ``peak_allocated_bytes`` and ``peak_reserved_bytes`` (the window's "
    "highest; ``peak_exact``: the allocator's own high-water mark, else the highest sample), "
    "``peak_step`` and ``peak_phase`` (where the peak was reached), ``min_allocated_bytes`` "
    "(what stays allocated between steps), ``fragmentation`` (1 - peak allocated / peak "
    "reserved), ``alloc_retries``, ``retry_steps`` and ``retry_time`` (seconds those steps "
    "took over the median step), ``ooms``, ``total_bytes`` and ``process_used_bytes`` "
    "(NVML's entry for this process); None where not reported.";

constexpr char kOomEventDoc[] =
    "The CUDA out-of-memory error that ended a step (``MemoryStats.oom``): ``step``, ``phase`` "
    "and ``phase_path`` (what was open), ``device``, ``requested_bytes``, ``allocated_bytes``, "
    "``reserved_bytes``, ``total_bytes`` (None where unknown), ``message`` (the error's first "
    "line) and ``snapshot`` (the allocator snapshot saved for it, or \"\").";

constexpr char kStallDoc[] =
    "A step, or a phase outside steps, that stayed open past its stall limit "
    "(``Summary.stalls``, ``Session(stall_after=...)``; docs/definitions.md \"Stalls\"): "
    "``step`` (0-based; -1: a phase outside steps), ``phase`` and ``phase_path`` (the innermost "
    "phase open, and its parents: ``\"forward/attention\"``), ``began`` (Unix time), "
    "``seconds`` (how long it was open: its duration once it ended), ``phase_seconds`` (how long "
    "the innermost phase had been), ``limit`` (seconds), ``ongoing``, ``last_gpu_work_seconds`` "
    "(since the last GPU work gpuscope saw finish; None where it cannot tell), "
    "``gpu_utilization_pct`` (NVML's, which counts a kernel waiting in a collective as busy; "
    "None unsampled) and ``gpu`` (that state in words).";

constexpr char kMemoryStatsDoc[] =
    "What this process's GPU memory did over the window (``Summary.memory``): ``source`` (the "
    "allocator: ``\"torch.cuda\"``, ``\"application\"``, ``\"simulated\"``), ``samples``, "
    "``steps`` (window steps sampled), ``gpus`` (``GpuMemory``), ``peak_by_phase`` (phase -> "
    "the fullest GPU's peak bytes in it) and ``oom`` (``OomEvent`` or None).";

constexpr char kRankIdentityDoc[] =
    "A process's place in a distributed job (``Summary.rank``): ``rank``, ``local_rank``, "
    "``world_size``, ``host``.";

constexpr char kRankPhaseDoc[] =
    "One phase of one rank's window in a rank record: ``name``, ``host_p50`` and "
    "``device_p50`` (s per step, the median over the steps it occurred in; ``device_p50`` None "
    "without a GPU source), ``share`` of step time.";

constexpr char kRankRecordDoc[] =
    "One rank's window as the other ranks see it (``Summary.ranks.ranks``): ``rank``, "
    "``local_rank``, ``world_size``, ``host``, ``steps``, ``step_p50``/``step_p95`` (s), "
    "``gpu_idle_pct``, ``samples_per_second``, ``tokens_per_second``, ``sm_clock_ratio``, "
    "``throttled_steps``, ``host_cpu_pct``, ``compute_time`` (CUPTI: kernel time per step less "
    "collectives', s) (None where unknown) and ``phases`` (its 16 largest, ``RankPhase``).";

constexpr char kStragglerDoc[] =
    "A rank slow in one phase: ``rank``, ``host``, ``phase``, ``device`` (scored on device "
    "time), ``score`` (the others' median over its time), ``slowdown`` (its time over the "
    "others' median), ``excess`` (s per step it adds), ``others_wait_share`` (that over the "
    "others' step p50).";

constexpr char kRanksStatsDoc[] =
    "What the last exchange of rank records said (``Summary.ranks``): a sequence of the "
    "``RankRecord`` of each rank heard from, by rank (``len()``, iteration, indexing; also "
    "``ranks``, the same as a list), ``missing`` (ranks not heard from), "
    "``stragglers`` (``Straggler``, most time added first), ``exchanges`` (completed so far), "
    "``age`` (s since the last), and ``straggler_exchanges`` of the ``recent_exchanges`` that "
    "found the first straggler's rank slow (chronic when most).";

constexpr char kPeriodicSpikeDoc[] =
    "Slow steps that recur every ``period_steps`` steps (``Summary.periodic_spikes``): "
    "``phase`` (the phase that grew most in them; ``\"other\"``: time outside every phase), "
    "``period_steps``, ``occurrences`` (in the window; consecutive slow steps count once), "
    "``last_step`` (the completed-step number where the last began), ``excess`` (s each adds "
    "over the median step, mean) and ``share`` (of the window's step time).";

constexpr char kSummaryDoc[] =
    "What a session knows at one moment (``Session.summary()``).\n\n"
    "``steps``: completed steps in the window; ``total_steps``: steps measured since the start "
    "or the last ``reset()``; ``warmup``: the warm-up steps left out of every other number "
    "(``WarmupStats``); ``step_time``: exact quantiles over the window; "
    "``phases``: name -> ``PhaseStats`` in breakdown order; ``gpu_idle_pct``: 0..100 or None "
    "without a GPU timeline source (a lower bound with ``\"events\"``), over the ``gpu_steps`` "
    "window steps whose GPU data is in (``pending_steps`` still wait for the GPU); "
    "``idle_by_cause``: cause -> percent of step time, summing to ``gpu_idle_pct``; "
    "``devices``: a ``DeviceStats`` per GPU timed (with several, ``gpu_idle_pct`` is their "
    "mean); ``activity``: per-step counts from CUPTI (``ActivityStats``) or None; "
    "``telemetry``: sampled GPU and host state (``TelemetryStats``) or None; "
    "``memory``: this process's GPU memory from its allocator (``MemoryStats``) or None; "
    "``device_step_time``: per-step GPU span (or None); ``throughput``: samples/s or None; "
    "``efficiency``: model FLOP/s and MFU (``EfficiencyStats``) or None without FLOPs; "
    "``source``: ``\"cupti\"``, ``\"events\"`` or ``\"host\"``; ``simulated``: True when the GPU "
    "numbers come from gpuscope's simulated device (``simulated_device=``, "
    "``GPUSCOPE_SIMULATE=1``), not a GPU; ``rank``: the process's place in a distributed job "
    "(``RankIdentity``) or None; ``ranks``: the last exchange with the other ranks "
    "(``RanksStats``) or None; ``periodic_spikes``: work every N steps that makes those steps "
    "far slower (``PeriodicSpike``, largest share first); ``top_kernels``: the kernels with the "
    "most device time (``KernelStats``, CUPTI only, else empty); ``stalls``: steps (or phases "
    "outside steps) that stayed open past their stall limit (``Stall``, oldest first, the one "
    "in progress last); ``step_in_progress``: seconds the step open at this summary had been "
    "open (0: none).\n\n"
    "``Summary(json_text)`` is ``Summary.from_json(json_text)``.";

// The public types live in the package's namespace, as before (and pickle
// looks them up there).
template <typename T>
py::class_<T> Class(py::module_& m, const char* name, const char* doc) {
  py::class_<T> cls(m, name, doc);
  cls.attr("__module__") = "gpuscope";
  return cls;
}

// A part of a summary: pickled as its JSON object, read back with the same
// checks as inside a summary.
template <typename T>
py::class_<T> Part(py::module_& m, const char* name, const char* doc) {
  py::class_<T> cls = Class<T>(m, name, doc);
  cls.def(py::pickle([](const T& part) { return py::make_tuple(internal::PartToJson(part)); },
                     [](const py::tuple& state) {
                       return ValueOrThrow(internal::PartFromJson<T>(state[0].cast<std::string>()));
                     }));
  return cls;
}

// The attributes of a struct's fields, but for the `exceptions` the caller
// defines; their names, in declaration order.
template <typename T>
std::vector<std::string> DefineFields(py::class_<T>& cls,
                                      std::initializer_list<std::string_view> exceptions = {}) {
  FieldProperties<T> properties(cls, exceptions);
  internal::FieldsOf(properties, properties.prototype());
  return properties.Finish();
}

// `names` with `lead` moved to the front, the rest in their order.
std::vector<std::string> LeadWith(std::vector<std::string> names,
                                  std::initializer_list<std::string_view> lead) {
  std::vector<std::string> out(lead.begin(), lead.end());
  for (const std::string& name : out) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      throw std::logic_error("gpuscope bindings: no field '" + name + "' to list first");
    }
  }
  for (std::string& name : names) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  return out;
}

// MisuseCounts as the dict of counts Summary.misuse has always been.
struct CountsDict {
  py::typing::Dict<py::str, py::int_> out;
  void Int(std::string_view key, int64_t v, internal::Range, bool = true) {
    out[Str(key)] = py::int_(v);
  }
};

void AddSummaryParts(py::module_& m) {
  // The hashable ones are those the old types were hashable by value.
  auto quantiles = Part<Quantiles>(m, "Quantiles", kQuantilesDoc);
  AddValueMethods(quantiles, DefineFields(quantiles), /*hashable=*/true);

  auto warmup = Part<WarmupStats>(m, "WarmupStats", kWarmupStatsDoc);
  AddValueMethods(warmup, DefineFields(warmup), /*hashable=*/true);

  auto efficiency = Part<EfficiencyStats>(m, "EfficiencyStats", kEfficiencyStatsDoc);
  AddValueMethods(efficiency, DefineFields(efficiency), /*hashable=*/true);

  auto device = Part<DeviceStats>(m, "DeviceStats", kDeviceStatsDoc);
  AddValueMethods(device, DefineFields(device), /*hashable=*/true);

  auto activity = Part<ActivityStats>(m, "ActivityStats", kActivityStatsDoc);
  AddValueMethods(activity, DefineFields(activity), /*hashable=*/false);

  auto overhead = Part<OverheadStats>(m, "OverheadStats", kOverheadStatsDoc);
  AddValueMethods(overhead, DefineFields(overhead), /*hashable=*/true);

  // GpuTelemetry and TelemetryStats keep their short reprs.
  auto gpu = Part<GpuTelemetry>(m, "GpuTelemetry", kGpuTelemetryDoc);
  AddValueMethods(gpu, DefineFields(gpu), /*hashable=*/false, /*repr=*/false);
  gpu.def("__repr__", [](py::object self) {
    return py::str("GpuTelemetry(index={}, utilization_pct={})")
        .format(self.attr("index"), self.attr("utilization_pct"));
  });
  auto telemetry = Part<TelemetryStats>(m, "TelemetryStats", kTelemetryStatsDoc);
  AddValueMethods(telemetry, DefineFields(telemetry), /*hashable=*/false, /*repr=*/false);
  telemetry.def("__repr__", [](py::object self) {
    return py::str("TelemetryStats(source={!r}, steps={})")
        .format(self.attr("source"), self.attr("steps"));
  });

  auto gpu_memory = Part<GpuMemory>(m, "GpuMemory", kGpuMemoryDoc);
  AddValueMethods(gpu_memory, DefineFields(gpu_memory), /*hashable=*/false, /*repr=*/false);
  gpu_memory.def("__repr__", [](py::object self) {
    return py::str("GpuMemory(device={}, peak_allocated_bytes={}, peak_phase={!r})")
        .format(self.attr("device"), self.attr("peak_allocated_bytes"), self.attr("peak_phase"));
  });
  auto oom = Part<OomEvent>(m, "OomEvent", kOomEventDoc);
  AddValueMethods(oom, DefineFields(oom), /*hashable=*/false);
  auto stall = Part<Stall>(m, "Stall", kStallDoc);
  AddValueMethods(stall, DefineFields(stall), /*hashable=*/false, /*repr=*/false);
  stall.def("__repr__", [](py::object self) {
    return py::str("Stall(step={}, phase_path={!r}, seconds={}, ongoing={})")
        .format(self.attr("step"), self.attr("phase_path"), self.attr("seconds"),
                self.attr("ongoing"));
  });
  auto memory = Part<MemoryStats>(m, "MemoryStats", kMemoryStatsDoc);
  AddValueMethods(memory, DefineFields(memory), /*hashable=*/false, /*repr=*/false);
  memory.def("__repr__", [](py::object self) {
    return py::str("MemoryStats(source={!r}, gpus={})")
        .format(self.attr("source"), self.attr("gpus"));
  });

  auto spike = Part<PeriodicSpike>(m, "PeriodicSpike", kPeriodicSpikeDoc);
  AddValueMethods(spike, DefineFields(spike), /*hashable=*/true);

  auto identity = Part<RankIdentity>(m, "RankIdentity", kRankIdentityDoc);
  AddValueMethods(identity, DefineFields(identity), /*hashable=*/true);
  auto rank_phase = Part<RankPhase>(m, "RankPhase", kRankPhaseDoc);
  AddValueMethods(rank_phase, DefineFields(rank_phase), /*hashable=*/false);
  auto record = Part<RankRecord>(m, "RankRecord", kRankRecordDoc);
  AddValueMethods(record, DefineFields(record), /*hashable=*/false, /*repr=*/false);
  record.def("__repr__", [](py::object self) {
    return py::str("RankRecord(rank={}, host={!r}, steps={}, step_p50={})")
        .format(self.attr("rank"), self.attr("host"), self.attr("steps"), self.attr("step_p50"));
  });
  auto straggler = Part<Straggler>(m, "Straggler", kStragglerDoc);
  AddValueMethods(straggler, DefineFields(straggler), /*hashable=*/true);
  auto ranks = Part<RanksStats>(m, "RanksStats", kRanksStatsDoc);
  AddValueMethods(ranks, DefineFields(ranks), /*hashable=*/false, /*repr=*/false);
  ranks.def("__repr__", [](const RanksStats& r) {
    return py::str("RanksStats(ranks={}, missing={}, stragglers={}, exchanges={})")
        .format(r.ranks.size(), r.missing.size(), r.stragglers.size(), r.exchanges);
  });
  // A sequence of the ranks heard from (``summary.ranks`` is "a list, one
  // entry per rank"): len(), iteration and indexing over ``.ranks``, whose
  // list it reads; the exchange's other attributes stay beside it. An
  // exchange is truthy even when it heard from no rank: it happened.
  ranks.def("__len__", [](const RanksStats& r) { return r.ranks.size(); })
      .def("__iter__",
           [](py::object self) {
             return Typed<py::typing::Iterator<RankRecord>>(py::iter(self.attr("ranks")));
           })
      .def(
          "__getitem__",
          [](py::object self, py::object index) {
            // The list first, owned here: an item accessor does not keep
            // the object it indexes alive.
            const py::object list = self.attr("ranks");
            return py::object(list[index]);
          },
          py::arg("index"))
      .def("__bool__", [](const RanksStats&) { return true; });

  auto kernel = Part<KernelStats>(m, "KernelStats", kKernelStatsDoc);
  AddValueMethods(kernel, DefineFields(kernel), /*hashable=*/true);
  auto phase = Part<PhaseStats>(m, "PhaseStats", kPhaseStatsDoc);
  const std::vector<std::string> names = DefineFields(phase, {"device", "backlog_p50"});
  // Exception: without device data for the phase (no GPU source, or not in
  // yet), its device numbers are zeros that mean "not measured": None.
  phase.def_property_readonly("device", [](const PhaseStats& p) {
    return Typed<py::typing::Optional<Quantiles>>(p.device.count != 0 ? py::cast(p.device)
                                                                      : py::none());
  });
  phase.def_property_readonly("backlog_p50", [](const PhaseStats& p) {
    return Typed<py::typing::Optional<py::float_>>(
        p.device.count != 0 ? py::object(py::float_(p.backlog_p50)) : py::none());
  });
  // Exception: the repr leads with the fields the dataclass this type
  // replaces listed first (the shares are what people look for).
  AddValueMethods(phase,
                  LeadWith(names, {"name", "share", "inclusive_share", "top_level", "builtin"}),
                  /*hashable=*/true);
  // Python only: the per-step time's quantiles, read through.
  phase.def_property_readonly("p50", [](const PhaseStats& p) { return p.time.p50; })
      .def_property_readonly("p90", [](const PhaseStats& p) { return p.time.p90; })
      .def_property_readonly("p95", [](const PhaseStats& p) { return p.time.p95; })
      .def_property_readonly("p99", [](const PhaseStats& p) { return p.time.p99; })
      .def_property_readonly("mean", [](const PhaseStats& p) { return p.time.mean; })
      .def_property_readonly("max", [](const PhaseStats& p) { return p.time.max; });
}

Summary FromJson(std::string_view text) { return ValueOrThrow(SummaryFromJson(text)); }

void AddSummary(py::module_& m) {
  auto summary = Class<Summary>(m, "Summary", kSummaryDoc);
  const std::vector<std::string> names =
      DefineFields(summary, {"phases", "device_step_time", "misuse"});
  // Exception: JSON keeps the breakdown as an array; Python looks phases up
  // by name, so `phases` is a dict in breakdown order.
  summary.def_property_readonly("phases", [](const Summary& s) {
    py::typing::Dict<py::str, PhaseStats> out;
    for (const PhaseStats& p : s.phases) out[Str(p.name)] = py::cast(p);
    return out;
  });
  // Exception: with no GPU step timed, the device step time is zeros that
  // mean "not measured": None.
  summary.def_property_readonly("device_step_time", [](const Summary& s) {
    return Typed<py::typing::Optional<Quantiles>>(s.gpu_steps != 0 ? py::cast(s.device_step_time)
                                                                   : py::none());
  });
  // Exception: the misuse counts are a dict (name -> count), not an object.
  summary.def_property_readonly("misuse", [](const Summary& s) {
    CountsDict counts;
    internal::FieldsOf(counts, s.misuse);
    return counts.out;
  });
  // Exception: samples_per_second is also `throughput`, the name the
  // Python API has always used for it.
  summary.def_property_readonly("throughput", [](const Summary& s) {
    return Typed<py::typing::Optional<py::float_>>(
        s.samples_per_second.has_value() ? py::object(py::float_(*s.samples_per_second))
                                         : py::none());
  });
  AddValueMethods(summary, names, /*hashable=*/false, /*repr=*/false);

  summary.def(py::init(&FromJson), py::arg("json_text"))
      .def_static(
          "from_json", &FromJson, py::arg("json_text"),
          "Reads a summary written by ``to_json()`` (by any process). Raises ``ValueError`` for "
          "text that is not a summary, ``GpuscopeError`` for another schema version.")
      .def_static(
          "_from_dict",
          [](Hinted<"dict[str, typing.Any]"> data) {
            absl::StatusOr<internal::JsonValue> doc = JsonValueFromPython(data);
            if (!doc.ok()) {
              ThrowIfError(absl::InvalidArgumentError(std::string("not a gpuscope summary: ") +
                                                      std::string(doc.status().message())));
            }
            return ValueOrThrow(internal::SummaryFromJsonValue(*doc));
          },
          py::arg("data"),
          "Reads a summary from plain data (a run file's \"summary\" as json.loads returned it), "
          "checked as from_json() checks text.")
      .def(
          "to_json", [](const Summary& s) { return ToJson(s); },
          "The summary as versioned JSON, exactly as the C++ core writes it.")
      // The plain-data view: exactly what json.loads reads from to_json()
      // (integral numbers as int), as it has always been.
      .def(
          "to_dict",
          [](const Summary& s) {
            return Typed<py::typing::Dict<py::str, Hinted<"typing.Any">>>(
                py::module_::import("json").attr("loads")(ToJson(s)));
          },
          "The summary as plain data (the JSON schema, docs/json-schema.md); a new copy each call.")
      .def(
          "report",
          [](const Summary& s, bool color) {
            return FormatReport(s, ReportOptions{.color = color});
          },
          py::arg("color") = false,
          "The human report for this summary, findings included (``color=True``: ANSI colours, for "
          "a "
          "terminal).")
      .def("__str__", [](const Summary& s) { return FormatReport(s); })
      .def("__repr__",
           [](const Summary& s) {
             return py::str("<gpuscope.Summary steps={} source={!r} p50={:.3f}ms p95={:.3f}ms>")
                 .format(s.steps, Str(SourceName(s.source)), s.step_time.p50 * 1e3,
                         s.step_time.p95 * 1e3);
           })
      .def(py::pickle(
          [](const Summary& s) { return py::make_tuple(ToJson(s)); },
          [](const py::tuple& state) { return FromJson(state[0].cast<std::string>()); }));
}

}  // namespace

void AddSummaryTypes(py::module_& m) {
  AddSummaryParts(m);
  AddSummary(m);

  m.def(
      "summarize",
      [](Hinted<"_Session"> session) {
        Session* s = SessionOf(session.ptr());
        if (s == nullptr) throw py::error_already_set();
        Summary summary;
        {
          // Other threads (a training loop, when a monitor asks) run while
          // the session computes; the caller's reference keeps it alive.
          GilReleased released;
          summary = s->Summarize();
        }
        return summary;
      },
      py::arg("session"), "A gpuscope.Session's summary now (Session.summary()).");
  // The stall watch's Python side (python/gpuscope/_stalls.py).
  m.def(
      "_current_stall", [](Hinted<"_Session"> session)->Hinted<"Stall | None"> {
        Session* s = SessionOf(session.ptr());
        if (s == nullptr) throw py::error_already_set();
        std::optional<Stall> stall = s->CurrentStall();
        return Hinted<"Stall | None">(stall.has_value() ? py::cast(*std::move(stall)) : py::none());
      },
      py::arg("session"), "The stall in progress (Session::CurrentStall()), or None.");
  m.def(
      "_recording_thread",
      [](Hinted<"_Session"> session) {
        Session* s = SessionOf(session.ptr());
        if (s == nullptr) throw py::error_already_set();
        return s->RecordingThreadId();
      },
      py::arg("session"),
      "The kernel thread id (threading's native_id) of the thread that records, 0 before the "
      "first scope.");
  m.def(
      "_describe_stall", [](const Stall& stall) { return internal::DescribeStall(stall); },
      py::arg("stall"), "A stall in one line, as the log and the report say it.");
  m.def(
      "_format_duration", [](double seconds) { return internal::StallDuration(seconds); },
      py::arg("seconds"), "\"4.2 s\", \"3 min 05 s\", \"2 h 07 min\": a stall's durations.");
  // The exchange of rank records (python/gpuscope/_ranks.py moves the bytes).
  m.attr("RANK_RECORD_BYTES") = kRankRecordBytes;
  m.def(
      "_set_rank",
      [](Hinted<"_Session"> session, int rank, int local_rank, int world_size,
         const std::string& host) {
        Session* s = SessionOf(session.ptr());
        if (s == nullptr) throw py::error_already_set();
        ThrowIfError(s->SetRank(RankIdentity{rank, local_rank, world_size, host}));
      },
      py::arg("session"), py::arg("rank"), py::arg("local_rank"), py::arg("world_size"),
      py::arg("host"));
  m.def(
      "_rank_record",
      [](const Summary& summary) {
        if (!summary.rank.has_value()) {
          throw py::value_error("the summary has no rank: set the session's rank first");
        }
        return py::bytes(EncodeRankRecord(RankRecordOf(summary, *summary.rank)));
      },
      py::arg("summary"), "This rank's record of `summary` (its window), as the bytes exchanged.");
  m.def(
      "_decode_rank_record",
      [](py::bytes data) { return ValueOrThrow(DecodeRankRecord(std::string(data))); },
      py::arg("data"), "The RankRecord `data` holds; ValueError when it holds none.");
  m.def(
      "_set_rank_records",
      [](Hinted<"_Session"> session, const py::typing::List<py::bytes>& records,
         double straggler_score, double min_excess_share) {
        Session* s = SessionOf(session.ptr());
        if (s == nullptr) throw py::error_already_set();
        std::vector<RankRecord> decoded;
        int refused = 0;
        for (py::handle item : records) {
          if (!py::isinstance<py::bytes>(item)) {
            ++refused;
            continue;
          }
          if (absl::StatusOr<RankRecord> r =
                  DecodeRankRecord(std::string(py::bytes(item.cast<py::bytes>())));
              r.ok()) {
            decoded.push_back(*std::move(r));
          } else {
            ++refused;
          }
        }
        absl::Status status;
        {
          GilReleased released;
          status =
              s->SetRankRecords(std::move(decoded), RankOptions{straggler_score, min_excess_share});
        }
        ThrowIfError(status);
        return refused;
      },
      py::arg("session"), py::arg("records"), py::arg("straggler_score") = 0.75,
      py::arg("min_excess_share") = 0.05,
      "Compares the records (bytes) of one exchange and keeps the result in the session; returns "
      "how many were not records.");
  m.def(
      "format_report",
      [](const Summary& s, bool color) { return FormatReport(s, ReportOptions{.color = color}); },
      py::arg("summary"), py::arg("color") = false,
      "The human report for a summary (ANSI colours with color=True).");
  m.def(
      "prometheus_text",
      [](const Summary& s, const py::iterable& labels, int max_phases) {
        PrometheusOptions options{.max_phases = max_phases};
        for (const py::handle pair : labels) {
          const auto t = py::reinterpret_borrow<py::tuple>(pair);
          if (t.size() != 2) throw py::value_error("labels are (name, value) pairs");
          options.labels.emplace_back(t[0].cast<std::string>(), t[1].cast<std::string>());
        }
        absl::StatusOr<std::string> text = ToPrometheus(s, options);
        if (!text.ok()) throw py::value_error(std::string(text.status().message()));
        return *std::move(text);
      },
      py::arg("summary"), py::arg("labels") = py::tuple(), py::arg("max_phases") = 32,
      "The Prometheus text exposition for a summary: `labels` ((name, value) pairs) on every "
      "sample, at most `max_phases` phases named (the rest as \"_rest\"); ValueError for a label "
      "Prometheus refuses.");
}

}  // namespace gpuscope::python
