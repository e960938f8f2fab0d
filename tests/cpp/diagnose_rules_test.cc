// The playbook's rules, table-driven: each fires on a summary built to
// trigger it (with the severity its threshold gives) and stays silent on a
// near miss; a healthy loop gets only "gpu-bound"; findings are ranked by
// the step time they explain. Every DiagnoseOptions threshold moves its
// rule's verdict, and an invalid one is rejected by Validate() and replaced
// by its default (with a notice) in Diagnose().

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/summary.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::Find;
using ::testing::HasSubstr;
using testing::Ids;
using ::testing::Not;

void SetPhase(Summary& s, const std::string& name, double inclusive_share) {
  auto it = std::find_if(s.phases.begin(), s.phases.end(),
                         [&](const PhaseStats& p) { return p.name == name; });
  if (it == s.phases.end()) {
    PhaseStats p;
    p.name = name;
    it = s.phases.insert(s.phases.end(), p);
  }
  it->builtin = true;
  it->top_level = true;
  it->steps = s.steps;
  it->count = s.steps;
  it->share = inclusive_share;
  it->inclusive_share = inclusive_share;
  it->total = inclusive_share * s.window_time;
  it->time.count = s.steps;
  it->time.p50 = it->time.p95 = it->time.mean =
      inclusive_share * s.window_time / static_cast<double>(s.steps);
}

// A healthy CUPTI-timed loop: 100 steps of 100 ms, the GPU 95 % busy, a
// fast loader, pinned copies, bf16 GEMMs, no collectives, cool full-speed
// GPU on a full-width link, spare CPUs.
Summary Healthy() {
  Summary s;
  s.source = Source::kCupti;
  s.window = s.steps = s.total_steps = s.gpu_steps = 100;
  s.window_time = 10.0;
  s.step_time.count = 100;
  s.step_time.mean = s.step_time.p50 = 0.1;
  s.step_time.p95 = 0.101;
  SetPhase(s, "data", 0.02);
  SetPhase(s, "h2d", 0.01);
  SetPhase(s, "forward", 0.35);
  SetPhase(s, "backward", 0.55);
  SetPhase(s, "optimizer", 0.07);
  s.gpu_idle_pct = 5;
  s.idle_by_cause = {{"data", 2}, {"h2d", 1}, {"launch", 1}, {"other", 1}};
  ActivityStats a;
  a.kernels_per_step = 400;
  a.kernel_time_p50 = 80e-6;
  a.h2d_bytes_per_step = 50e6;
  a.copies_per_step = 2;
  a.kernel_time_per_step = 0.095;
  a.gemm_time_per_step = 0.06;
  a.fp32_gemm_time_per_step = 0.001;
  s.activity = a;
  TelemetryStats t;
  t.source = "test";
  t.steps = 100;
  t.gpu_utilization_pct = 100;
  t.sm_clock_ratio = 1.0;
  t.host_cpu_pct = 30;
  t.host_iowait_pct = 0.5;
  t.process_cores = 1.0;
  t.worker_cores = 3.0;
  t.cpus_available = 16;
  GpuTelemetry g;
  g.index = 0;
  g.utilization_pct = 100;
  g.temperature_c = 60;
  g.power_w = 500;
  g.power_limit_w = 700;
  g.pcie_gen = g.pcie_gen_max = 5;
  g.pcie_width = g.pcie_width_max = 16;
  t.gpus = {g};
  s.telemetry = t;
  return s;
}

TEST(DiagnoseRulesTest, AHealthyLoopIsGpuBoundAndNothingElse) {
  const std::vector<Finding> fs = Diagnose(Healthy());
  ASSERT_EQ(fs.size(), 1u) << Ids(fs);
  EXPECT_EQ(fs[0].id, "gpu-bound");
  EXPECT_EQ(fs[0].severity, Severity::kInfo);
}

struct RuleCase {
  const char* name;
  std::function<void(Summary&)> fire;    // makes the rule fire
  std::function<void(Summary&)> silent;  // a near miss: it must not
  std::string id;
  Severity severity;
  std::string in_title;           // the title says what it is
  std::string in_recommendation;  // and the fix names a concrete knob
};

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

class DiagnoseRuleTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(DiagnoseRuleTest, FiresWhenTriggeredAndStaysSilentOnANearMiss) {
  const RuleCase& c = GetParam();
  Summary fire = Healthy();
  c.fire(fire);
  const std::vector<Finding> fs = Diagnose(fire);
  const Finding* f = Find(fs, c.id);
  ASSERT_NE(f, nullptr) << c.id << " did not fire; got: " << Ids(fs);
  EXPECT_EQ(f->severity, c.severity);
  EXPECT_THAT(f->title, HasSubstr(c.in_title));
  EXPECT_THAT(f->recommendation, HasSubstr(c.in_recommendation));
  EXPECT_FALSE(f->evidence.empty());
  EXPECT_FALSE(f->confidence.empty());
  EXPECT_FALSE(f->source.empty());
  EXPECT_GE(f->share, 0.0);
  EXPECT_LE(f->share, 1.0);
  EXPECT_EQ(Find(fs, "gpu-bound"), nullptr)
      << "not healthy when " << c.id << " fires at moderate or above";

  Summary quiet = Healthy();
  c.silent(quiet);
  EXPECT_EQ(Find(Diagnose(quiet), c.id), nullptr)
      << c.id << " fired on the near miss: " << Ids(Diagnose(quiet));
}

void Data(Summary& s, double share) {
  SetPhase(s, "data", share);
  s.idle_by_cause["data"] = 100 * share;
  s.gpu_idle_pct = 100 * share + 3;
}

// Work every 50 steps in `phase` (4 times in the window, 1.2 s each) that
// costs `share` of step time.
void Spike(Summary& s, const std::string& phase, double share) {
  s.periodic_spikes = {PeriodicSpike{.phase = phase,
                                     .period_steps = 50,
                                     .occurrences = 4,
                                     .last_step = 190,
                                     .excess = 1.2,
                                     .share = share}};
}

INSTANTIATE_TEST_SUITE_P(
    Rules, DiagnoseRuleTest,
    ::testing::Values(
        RuleCase{"input_unknown_cause", [](Summary& s) { Data(s, 0.25); },
                 [](Summary& s) { Data(s, 0.04); }, "input-bound", Severity::kHigh,
                 "25% of step time", "num_workers"},
        RuleCase{"input_moderate", [](Summary& s) { Data(s, 0.08); },
                 [](Summary& s) { Data(s, 0.04); }, "input-bound", Severity::kModerate, "8%",
                 "prefetch_factor"},
        // 14 worker cores + 1 of 16 available: the CPUs are the limit.
        RuleCase{"input_cpu",
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores = 14;
                 },
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores = 6;
                 },
                 "input-bound.cpu", Severity::kHigh, "using 15.0 of 16.0 CPUs", "DALI"},
        // Where no loader named its workers, the child processes count as the
        // loader's (the best guess); named, unrelated children do not.
        RuleCase{"input_cpu_children_of_unknown_role",
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores.reset();
                   s.telemetry->child_cores = 14;
                 },
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores = 0;  // num_workers=0
                   s.telemetry->child_cores = 14;  // someone's CPU-burning subprocesses
                 },
                 "input-bound.cpu", Severity::kHigh, "of 16.0 CPUs", "pre-resize"},
        // The training thread waited for a CPU a quarter of the time, the host
        // busy with other work.
        RuleCase{"cpu_contention_others",
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.25;
                   s.telemetry->host_cpu_pct = 100;
                 },
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.04;
                   s.telemetry->host_cpu_pct = 100;
                 },
                 "cpu-contention", Severity::kHigh,
                 "training thread waited for a CPU 25% of the time; other processes keep the "
                 "host's CPUs 100% busy",
                 "dedicated cores"},
        // The job's own processes use 15.5 of its 16 CPUs.
        RuleCase{"cpu_contention_self",
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.10;
                   s.telemetry->worker_cores = 14.5;
                 },
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.04;
                   s.telemetry->worker_cores = 14.5;
                 },
                 "cpu-contention", Severity::kModerate, "own processes use 15.5 of its 16.0 CPUs",
                 "set_num_threads"},
        // The loader's workers, 2 cores' worth running and 2 waiting: half
        // their ready time lost, on a loader that costs 25 % of step time.
        RuleCase{"cpu_contention_loader",
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores = 2;
                   s.telemetry->worker_cpu_wait_cores = 2;
                 },
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->worker_cores = 2;
                   s.telemetry->worker_cpu_wait_cores = 0.2;  // 9 % of 25 %: 2.3 %
                 },
                 "cpu-contention", Severity::kModerate,
                 "loader's workers 50% of the time they were ready to run", "Slurm"},
        RuleCase{"cpu_contention_steal",
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.10;
                   s.telemetry->steal_pct = 12;
                 },
                 [](Summary& s) { s.telemetry->steal_pct = 12; }, "cpu-contention",
                 Severity::kModerate, "the hypervisor takes 12%", "dedicated or larger instance"},
        // A container limited to 2 CPUs, throttled in 40 % of its periods:
        // the training thread waits out the rest of each period. Throttling
        // that costs the training thread no wait is no finding.
        RuleCase{"cpu_contention_container_limit",
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.30;
                   s.telemetry->cpus_available = 2;
                   s.telemetry->process_cores = 1.9;
                   s.telemetry->cpu_throttled_pct = 40;
                 },
                 [](Summary& s) {
                   s.telemetry->cpu_wait_share = 0.02;
                   s.telemetry->cpus_available = 2;
                   s.telemetry->process_cores = 1.9;
                   s.telemetry->cpu_throttled_pct = 40;
                 },
                 "cpu-contention", Severity::kHigh,
                 "the container's CPU limit throttled it in 40% of the limit's periods (2.0 CPUs "
                 "available)",
                 "Raise the limit"},
        // The GPU only copies 30 % of step time (no kernel running), most
        // bytes device to host: a per-step .cpu() of a large tensor. Quiet:
        // the copies run under the kernels (6 % alone).
        RuleCase{"copy_exposed_to_host",
                 [](Summary& s) {
                   s.activity->device_share_memcpy = 0.30;
                   s.activity->d2h_bytes_per_step = 400e6;
                 },
                 [](Summary& s) {
                   s.activity->device_share_memcpy = 0.06;
                   s.activity->d2h_bytes_per_step = 400e6;
                 },
                 "copy-exposed", Severity::kHigh,
                 "the GPU only copied memory 30% of step time (50 MB a step host to device, 400 "
                 "MB device to host)",
                 "reduce them on the GPU first"},
        RuleCase{"copy_exposed_to_device",
                 [](Summary& s) { s.activity->device_share_memcpy = 0.15; },
                 [](Summary& s) { s.activity->device_share_memcpy = 0.0; }, "copy-exposed",
                 Severity::kModerate, "15% of step time", "pin_memory=True"},
        // iowait 20 % while the CPUs are 10 % busy: storage.
        RuleCase{"input_storage",
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->host_iowait_pct = 20;
                   s.telemetry->host_cpu_pct = 10;
                 },
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.telemetry->host_iowait_pct = 20;
                   s.telemetry->host_cpu_pct = 90;
                 },
                 "input-bound.storage", Severity::kHigh, "iowait", "local NVMe"},
        RuleCase{"h2d_pageable",
                 [](Summary& s) {
                   s.idle_by_cause["h2d"] = 12;
                   s.activity->pageable_h2d_copies_per_step = 2;
                 },
                 [](Summary& s) {
                   s.idle_by_cause["h2d"] = 4;
                   s.activity->pageable_h2d_copies_per_step = 2;
                 },
                 "h2d-bound", Severity::kModerate, "pageable", "pin_memory=True"},
        // A pageable copy keeps the GPU busy copying while it blocks the host;
        // a pageable D2H copy (loss.item()) is not an input copy.
        RuleCase{"h2d_pageable_blocks_the_host",
                 [](Summary& s) {
                   SetPhase(s, "h2d", 0.10);
                   s.activity->pageable_h2d_copies_per_step = 1;
                 },
                 [](Summary& s) {
                   SetPhase(s, "h2d", 0.10);
                   s.activity->pageable_copies_per_step = 1;
                 },
                 "h2d-bound", Severity::kModerate, "pageable", "pin_memory=True"},
        RuleCase{"h2d_host_source",
                 [](Summary& s) {
                   s.source = Source::kHost;
                   s.idle_by_cause.clear();
                   s.gpu_idle_pct.reset();
                   s.activity.reset();
                   SetPhase(s, "h2d", 0.25);
                 },
                 [](Summary& s) {
                   s.source = Source::kHost;
                   s.idle_by_cause.clear();
                   s.gpu_idle_pct.reset();
                   s.activity.reset();
                   SetPhase(s, "h2d", 0.03);
                 },
                 "h2d-bound", Severity::kHigh, "25%", "non_blocking=True"},
        // Two syncs a step, 25 ms of the GPU waiting for the host, 22 % idle in forward.
        RuleCase{"sync",
                 [](Summary& s) {
                   s.activity->syncs_per_step = 2;
                   s.activity->host_wait_time_per_step = 0.025;
                   s.idle_by_cause["forward"] = 22;
                 },
                 [](Summary& s) {
                   s.activity->syncs_per_step = 0;
                   s.activity->host_wait_time_per_step = 0.025;
                   s.idle_by_cause["forward"] = 22;
                 },
                 "sync-bound", Severity::kHigh, ".item()", "set_sync_debug_mode"},
        // The same waits, but the idle is the loader's: input-bound, not sync-bound.
        RuleCase{"sync_not_when_the_loader_explains_it",
                 [](Summary& s) {
                   s.activity->syncs_per_step = 2;
                   s.activity->host_wait_time_per_step = 0.025;
                   s.idle_by_cause["forward"] = 6;
                 },
                 [](Summary& s) {
                   Data(s, 0.25);
                   s.activity->syncs_per_step = 2;
                   s.activity->host_wait_time_per_step = 0.025;
                 },
                 "sync-bound", Severity::kModerate, "7%",
                 "every N steps"},  // 6 % in forward, 1 % other
        RuleCase{"sync_phase_events",
                 [](Summary& s) {
                   s.source = Source::kEvents;
                   s.activity.reset();
                   s.idle_by_cause["sync"] = 7;
                 },
                 [](Summary& s) {
                   s.source = Source::kEvents;
                   s.activity.reset();
                   s.idle_by_cause["sync"] = 4;
                 },
                 "sync-bound", Severity::kModerate, "7%", "every N steps"},
        RuleCase{"launch_tiny_kernels",
                 [](Summary& s) {
                   s.idle_by_cause["launch"] = 18;
                   s.activity->kernel_time_p50 = 8e-6;
                 },
                 [](Summary& s) {
                   s.idle_by_cause["launch"] = 2;
                   s.activity->kernel_time_p50 = 8e-6;
                 },
                 "launch-bound", Severity::kHigh, "batch may be too small", "CUDA graphs"},
        RuleCase{"launch_moderate", [](Summary& s) { s.idle_by_cause["launch"] = 5; },
                 [](Summary& s) { s.idle_by_cause["launch"] = 2.9; }, "launch-bound",
                 Severity::kModerate, "gaps between kernels", "torch.compile"},
        RuleCase{"precision", [](Summary& s) { s.activity->fp32_gemm_time_per_step = 0.05; },
                 [](Summary& s) { s.activity->fp32_gemm_time_per_step = 0.02; }, "precision",
                 Severity::kHigh, "without tensor cores", "bfloat16"},
        RuleCase{"precision_small_gemm_share",
                 [](Summary& s) {
                   s.activity->gemm_time_per_step = 0.012;
                   s.activity->fp32_gemm_time_per_step = 0.01;
                 },
                 [](Summary& s) {
                   s.activity->gemm_time_per_step = 0.008;
                   s.activity->fp32_gemm_time_per_step = 0.008;
                 },
                 "precision", Severity::kModerate, "FP32", "allow_tf32"},
        // 20 ms of NCCL a step, none of it hidden under compute; the near miss
        // runs the same all-reduce overlapped with backward (DDP).
        RuleCase{"comm",
                 [](Summary& s) {
                   s.activity->collective_time_per_step =
                       s.activity->exposed_collective_time_per_step = 0.02;
                 },
                 [](Summary& s) {
                   s.activity->collective_time_per_step = 0.02;
                   s.activity->exposed_collective_time_per_step = 0.001;
                 },
                 "comm-bound", Severity::kHigh, "20%", "bucket_cap_mb"},
        RuleCase{"comm_phase_host",
                 [](Summary& s) {
                   s.source = Source::kHost;
                   s.idle_by_cause.clear();
                   s.gpu_idle_pct.reset();
                   s.activity.reset();
                   SetPhase(s, "comm", 0.12);
                 },
                 [](Summary& s) {
                   s.source = Source::kHost;
                   s.idle_by_cause.clear();
                   s.gpu_idle_pct.reset();
                   s.activity.reset();
                   SetPhase(s, "comm", 0.08);
                 },
                 "comm-bound", Severity::kModerate, "12%", "straggler"},
        // Evaluation every 50 steps adding 1.2 s, 18 % of step time.
        RuleCase{"periodic_eval", [](Summary& s) { Spike(s, "eval", 0.18); },
                 [](Summary& s) { Spike(s, "eval", 0.04); }, "periodic-spike", Severity::kModerate,
                 "Every 50 steps, phase \"eval\" adds 1.20 s: 18%", "eval_iters"},
        RuleCase{"periodic_checkpoint", [](Summary& s) { Spike(s, "save_ckpt", 0.25); },
                 [](Summary& s) { Spike(s, "save_ckpt", 0.04); }, "periodic-spike", Severity::kHigh,
                 "phase \"save_ckpt\"", "async_save"},
        RuleCase{"periodic_loader", [](Summary& s) { Spike(s, "data", 0.08); },
                 [](Summary& s) { Spike(s, "data", 0.04); }, "periodic-spike", Severity::kModerate,
                 "phase \"data\"", "prefetch_factor"},
        // Micro-batches as steps: the optimizer step every N of them.
        RuleCase{"periodic_accumulation", [](Summary& s) { Spike(s, "optimizer", 0.30); },
                 [](Summary& s) { Spike(s, "optimizer", 0.04); }, "periodic-spike", Severity::kHigh,
                 "phase \"optimizer\"", "gradient accumulation"},
        RuleCase{"periodic_untimed", [](Summary& s) { Spike(s, "other", 0.06); },
                 [](Summary& s) { Spike(s, "other", 0.04); }, "periodic-spike", Severity::kModerate,
                 "untimed work", "logging that calls .item()"},
        RuleCase{"throttling_power",
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0.5;
                   s.telemetry->clocks_event_reasons = {"sw_power_cap"};
                   s.telemetry->sm_clock_ratio = 0.7;
                 },
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0.05;
                   s.telemetry->clocks_event_reasons = {"sw_power_cap"};
                 },
                 "throttling", Severity::kModerate, "sw_power_cap", "power limit"},
        RuleCase{"throttling_thermal",
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0.3;
                   s.telemetry->clocks_event_reasons = {"sw_thermal_slowdown"};
                   s.telemetry->sm_clock_ratio = 0.9;
                 },
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0.05;
                   s.telemetry->clocks_event_reasons = {"sw_thermal_slowdown"};
                 },
                 "throttling", Severity::kModerate, "sw_thermal_slowdown", "airflow"},
        RuleCase{"throttling_hardware",
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0.2;
                   s.telemetry->clocks_event_reasons = {"hw_slowdown"};
                   s.telemetry->sm_clock_ratio = 0.5;
                 },
                 [](Summary& s) {
                   s.telemetry->throttled_steps = 0;
                   s.telemetry->clocks_event_reasons = {"gpu_idle"};
                 },
                 "throttling", Severity::kHigh, "hw_slowdown", "drain the node"},
        RuleCase{"pcie_narrow", [](Summary& s) { s.telemetry->gpus[0].pcie_width = 8; },
                 [](Summary& s) {
                   s.telemetry->gpus[0].pcie_gen = 1;
                   s.telemetry->gpus[0].utilization_pct = 5;
                 },  // idle downshift
                 "pcie-link", Severity::kHigh, "Gen5 x8 of Gen5 x16", "lspci"},
        RuleCase{"pcie_slow_gen_under_load", [](Summary& s) { s.telemetry->gpus[0].pcie_gen = 3; },
                 [](Summary& s) {
                   s.telemetry->gpus[0].pcie_gen = 3;
                   s.telemetry->gpus[0].utilization_pct = 10;
                 },
                 "pcie-link", Severity::kModerate, "Gen3 x16 of Gen5 x16", "reseat"},
        RuleCase{"utilization_lies",
                 [](Summary& s) {
                   Data(s, 0.6);
                   s.telemetry->gpu_utilization_pct = 95;
                 },
                 [](Summary& s) {
                   Data(s, 0.6);
                   s.telemetry->gpu_utilization_pct = 45;
                 },
                 "utilization-lies", Severity::kInfo, "nvidia-smi reports 95%", "busy time"}),
    [](const ::testing::TestParamInfo<RuleCase>& p) { return std::string(p.param.name); });

TEST(DiagnoseRulesTest, GpuBoundOnlyWhenTheGpuIsBusyAndNothingElseMatters) {
  Summary s = Healthy();
  s.gpu_idle_pct = 15;  // busy 85 %: not quite
  EXPECT_EQ(Find(Diagnose(s), "gpu-bound"), nullptr);
  s = Healthy();
  s.source = Source::kHost;
  s.gpu_idle_pct.reset();  // not measured: no claim
  EXPECT_EQ(Find(Diagnose(s), "gpu-bound"), nullptr);
}

TEST(DiagnoseRulesTest, APowerCapAtFullClockIsANoticeNotAProblem) {
  // Datacenter GPUs run into their power cap at full load; with the clocks
  // near their maximum that is a notice, and the loop is still GPU-bound.
  Summary s = Healthy();
  s.telemetry->throttled_steps = 0.9;
  s.telemetry->clocks_event_reasons = {"sw_power_cap"};
  s.telemetry->sm_clock_ratio = 0.93;
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "throttling");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kInfo);
  EXPECT_NE(Find(fs, "gpu-bound"), nullptr) << Ids(fs);
}

TEST(DiagnoseRulesTest, APowerCapIsJudgedByTheClocksOfTheStepsItCapped) {
  // Capped in 20 % of steps, at half clock there: the window's mean clock
  // (0.9) hides it, the throttled steps' does not.
  Summary s = Healthy();
  s.telemetry->throttled_steps = 0.2;
  s.telemetry->clocks_event_reasons = {"sw_power_cap"};
  s.telemetry->sm_clock_ratio = 0.9;
  s.telemetry->throttled_sm_clock_ratio = 0.5;
  std::vector<Finding> fs = Diagnose(s);
  ASSERT_NE(Find(fs, "throttling"), nullptr);
  EXPECT_EQ(Find(fs, "throttling")->severity, Severity::kModerate);
  // Clocks unknown (NVML gave no maximum): not taken for full speed.
  s.telemetry->sm_clock_ratio.reset();
  s.telemetry->throttled_sm_clock_ratio.reset();
  fs = Diagnose(s);
  ASSERT_NE(Find(fs, "throttling"), nullptr);
  EXPECT_EQ(Find(fs, "throttling")->severity, Severity::kModerate);
}

TEST(DiagnoseRulesTest, APeriodicSpikeFindingNamesTheLargestAndAddsTheOthersFixes) {
  // A saved summary may list them in any order; one under the moderate line
  // is left out of the advice.
  Summary s = Healthy();
  s.periodic_spikes = {
      PeriodicSpike{
          .phase = "eval", .period_steps = 50, .occurrences = 4, .excess = 1.2, .share = 0.08},
      PeriodicSpike{
          .phase = "checkpoint", .period_steps = 200, .occurrences = 3, .excess = 9, .share = 0.3},
      PeriodicSpike{
          .phase = "other", .period_steps = 10, .occurrences = 20, .excess = 0.01, .share = 0.02}};
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "periodic-spike");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_EQ(f->severity, Severity::kHigh);
  EXPECT_DOUBLE_EQ(f->share, 0.3);
  EXPECT_THAT(f->title, HasSubstr("Every 200 steps, phase \"checkpoint\" adds 9.00 s: 30%"));
  EXPECT_THAT(f->recommendation, HasSubstr("Also every 50 steps, phase \"eval\" adds 1.20 s"));
  EXPECT_THAT(f->recommendation, Not(HasSubstr("untimed")));
}

TEST(DiagnoseRulesTest, EventsCannotShowAGpuBusyEnoughToCallItGpuBound) {
  Summary s = Healthy();
  s.source = Source::kEvents;  // idle 5 % is only a lower bound
  s.activity.reset();
  EXPECT_EQ(Find(Diagnose(s), "gpu-bound"), nullptr);
}

TEST(DiagnoseRulesTest, FindingsAreRankedByTheStepTimeTheyExplain) {
  Summary s = Healthy();
  Data(s, 0.25);                               // 25 %
  s.idle_by_cause["launch"] = 8;               // 8 %
  s.activity->fp32_gemm_time_per_step = 0.05;  // 50 %
  s.telemetry->gpu_utilization_pct = 99;       // a notice (explains no time)
  const std::vector<Finding> fs = Diagnose(s);
  ASSERT_GE(fs.size(), 3u) << Ids(fs);
  EXPECT_EQ(fs[0].id, "precision");
  EXPECT_EQ(fs[1].id, "input-bound");
  EXPECT_EQ(fs[2].id, "launch-bound");
  for (size_t i = 1; i < fs.size(); ++i) EXPECT_GE(fs[i - 1].share, fs[i].share) << Ids(fs);
}

TEST(DiagnoseRulesTest, RulesNeedTheirDataSource) {
  // Launch gaps, precision and collectives need CUPTI's records; nothing
  // fires from a summary without them.
  Summary s = Healthy();
  s.source = Source::kEvents;
  s.activity.reset();
  s.idle_by_cause = {{"data", 2}};
  s.telemetry.reset();
  const std::vector<Finding> fs = Diagnose(s);
  for (const char* id :
       {"launch-bound", "precision", "comm-bound", "throttling", "pcie-link", "utilization-lies"}) {
    EXPECT_EQ(Find(fs, id), nullptr) << id;
  }
}

// A copy to the device that h2d-bound already charges (the GPU idle while
// the host copies from pageable memory) is not reported twice.
TEST(DiagnoseRulesTest, ACopyToTheDeviceThatH2dBoundExplainsIsNotCountedTwice) {
  Summary s = Healthy();
  s.activity->device_share_memcpy = 0.15;
  s.idle_by_cause["h2d"] = 15;
  const std::vector<Finding> fs = Diagnose(s);
  EXPECT_NE(Find(fs, "h2d-bound"), nullptr) << Ids(fs);
  EXPECT_EQ(Find(fs, "copy-exposed"), nullptr) << Ids(fs);
  // Device to host is not h2d-bound's: both are reported.
  s.activity->d2h_bytes_per_step = 400e6;
  const std::vector<Finding> both = Diagnose(s);
  EXPECT_NE(Find(both, "h2d-bound"), nullptr) << Ids(both);
  EXPECT_NE(Find(both, "copy-exposed"), nullptr) << Ids(both);
}

// Throttled in 3 % of its periods, the container's limit is not what the
// training thread waits for: other processes keep the host busy.
TEST(DiagnoseRulesTest, ALittleThrottlingIsNotNamedAsTheCause) {
  Summary s = Healthy();
  s.telemetry->cpu_wait_share = 0.25;
  s.telemetry->host_cpu_pct = 100;
  s.telemetry->cpu_throttled_pct = 3;
  const std::vector<Finding> fs = Diagnose(s);
  const Finding* f = Find(fs, "cpu-contention");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_THAT(f->title, Not(HasSubstr("CPU limit")));
  EXPECT_THAT(f->title, HasSubstr("other processes"));
  EXPECT_THAT(f->recommendation, Not(HasSubstr("Raise the limit")));
}

// Issue 17's repro: two other jobs keep a 2-CPU host busy while the loader
// only sleeps (the process and its workers use 0.05 cores). The host's load
// is not the loader's limit: more num_workers is the advice (it gave 3-4x).
TEST(DiagnoseRulesTest, AHostBusyWithOtherJobsIsNotTheLoadersCpuLimit) {
  Summary s = Healthy();
  Data(s, 0.40);
  s.telemetry->host_cpu_pct = 100;
  s.telemetry->process_cores = 0.05;
  s.telemetry->worker_cores = 0;
  s.telemetry->child_cores = 1.95;  // not the loader's
  s.telemetry->cpus_available = 2;
  const std::vector<Finding> fs = Diagnose(s);
  EXPECT_EQ(Find(fs, "input-bound.cpu"), nullptr) << Ids(fs);
  const Finding* f = Find(fs, "input-bound");
  ASSERT_NE(f, nullptr) << Ids(fs);
  EXPECT_THAT(f->recommendation, HasSubstr("raise DataLoader num_workers"));
  // When the loader itself waits for the CPUs the others take, the finding
  // says so, and cpu-contention names it.
  s.telemetry->cpu_wait_share = 0.30;
  const std::vector<Finding> contended = Diagnose(s);
  f = Find(contended, "input-bound");
  ASSERT_NE(f, nullptr) << Ids(contended);
  EXPECT_THAT(f->title, HasSubstr("waits for CPUs others take"));
  ASSERT_NE(Find(contended, "cpu-contention"), nullptr) << Ids(contended);
}

// Each DiagnoseOptions field, the range it accepts, and a summary on which
// moving it (to `value`) changes the verdict of the rule `id` from
// `by_default` to `with_value` (nullopt: no such finding), or, where given,
// puts `title_with_value` in its title.
struct ThresholdCase {
  const char* field;
  double DiagnoseOptions::* member;
  double hi;  // accepted: [0, hi]; infinity: any finite value >= 0
  double value;
  std::function<void(Summary&)> setup;
  std::string id;
  std::optional<Severity> by_default;
  std::optional<Severity> with_value;
  std::string title_with_value = "";
};

void PrintTo(const ThresholdCase& c, std::ostream* os) { *os << c.field; }

constexpr double kAny = std::numeric_limits<double>::infinity();
constexpr auto kModerate = Severity::kModerate;
constexpr auto kHigh = Severity::kHigh;
constexpr auto kInfo = Severity::kInfo;

// Every field has a case: a field added without one fails here.
static_assert(sizeof(DiagnoseOptions) == 36 * sizeof(double),
              "add the new DiagnoseOptions field to kThresholds");

std::optional<Severity> SeverityOf(const std::vector<Finding>& fs, const std::string& id) {
  const Finding* f = Find(fs, id);
  return f != nullptr ? std::optional<Severity>(f->severity) : std::nullopt;
}

void Sync(Summary& s, double syncs_per_step) {
  s.activity->syncs_per_step = syncs_per_step;
  s.activity->host_wait_time_per_step = 0.025;
  s.idle_by_cause["forward"] = 6;  // with "other", 7 % of step time unexplained
}

void Throttled(Summary& s, double steps, double clock_ratio) {
  s.telemetry->throttled_steps = steps;
  s.telemetry->clocks_event_reasons = {"sw_power_cap"};
  s.telemetry->sm_clock_ratio = clock_ratio;
}

// One 80 GiB GPU whose allocator peaked at `peak` GiB allocated (in
// "forward") and `reserved` GiB reserved, with `low` GiB allocated between
// steps; `retries` allocation retries whose steps took `retry_share` of
// step time over the median step.
void Memory(Summary& s, double peak, double low, double reserved, int64_t retries = 0,
            double retry_share = 0) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  GpuMemory g;
  g.total_bytes = 80 * kGiB;
  g.peak_allocated_bytes = peak * kGiB;
  g.min_allocated_bytes = low * kGiB;
  g.peak_reserved_bytes = reserved * kGiB;
  g.fragmentation = 1 - peak / reserved;
  g.peak_exact = true;
  g.peak_step = 7;
  g.peak_phase = "forward";
  g.alloc_retries = retries;
  g.retry_steps = retries > 0 ? 1 : 0;
  g.retry_time = retry_share * s.window_time;
  MemoryStats m;
  m.source = "test";
  m.gpus = {g};
  s.memory = m;
}

const ThresholdCase kThresholds[] = {
    {"input_bound_moderate", &DiagnoseOptions::input_bound_moderate, 1, 0.10,
     [](Summary& s) { Data(s, 0.08); }, "input-bound", kModerate, std::nullopt},
    {"input_bound_high", &DiagnoseOptions::input_bound_high, 1, 0.07,
     [](Summary& s) { Data(s, 0.08); }, "input-bound", kModerate, kHigh},
    {"h2d_bound_moderate", &DiagnoseOptions::h2d_bound_moderate, 1, 0.07,
     [](Summary& s) { s.idle_by_cause["h2d"] = 6; }, "h2d-bound", kModerate, std::nullopt},
    {"h2d_bound_high", &DiagnoseOptions::h2d_bound_high, 1, 0.10,
     [](Summary& s) { s.idle_by_cause["h2d"] = 12; }, "h2d-bound", kModerate, kHigh},
    {"copy_exposed_moderate", &DiagnoseOptions::copy_exposed_moderate, 1, 0.14,
     [](Summary& s) { s.activity->device_share_memcpy = 0.12; }, "copy-exposed", kModerate,
     std::nullopt},
    {"copy_exposed_high", &DiagnoseOptions::copy_exposed_high, 1, 0.11,
     [](Summary& s) { s.activity->device_share_memcpy = 0.12; }, "copy-exposed", kModerate, kHigh},
    {"sync_bound_moderate", &DiagnoseOptions::sync_bound_moderate, 1, 0.08,
     [](Summary& s) { Sync(s, 2); }, "sync-bound", kModerate, std::nullopt},
    {"sync_bound_high", &DiagnoseOptions::sync_bound_high, 1, 0.06, [](Summary& s) { Sync(s, 2); },
     "sync-bound", kModerate, kHigh},
    {"sync_min_syncs_per_step", &DiagnoseOptions::sync_min_syncs_per_step, kAny, 0.5,
     [](Summary& s) { Sync(s, 0.5); }, "sync-bound", std::nullopt, kModerate},
    {"launch_bound_moderate", &DiagnoseOptions::launch_bound_moderate, 1, 0.06,
     [](Summary& s) { s.idle_by_cause["launch"] = 5; }, "launch-bound", kModerate, std::nullopt},
    {"launch_bound_high", &DiagnoseOptions::launch_bound_high, 1, 0.04,
     [](Summary& s) { s.idle_by_cause["launch"] = 5; }, "launch-bound", kModerate, kHigh},
    {"tiny_kernel_seconds", &DiagnoseOptions::tiny_kernel_seconds, kAny, 50e-6,
     [](Summary& s) {
       s.idle_by_cause["launch"] = 5;
       s.activity->kernel_time_p50 = 30e-6;
     },
     "launch-bound", kModerate, kModerate, "batch may be too small"},
    {"comm_bound_moderate", &DiagnoseOptions::comm_bound_moderate, 1, 0.13,
     [](Summary& s) {
       s.activity->collective_time_per_step = s.activity->exposed_collective_time_per_step = 0.012;
     },
     "comm-bound", kModerate, std::nullopt},
    {"comm_bound_high", &DiagnoseOptions::comm_bound_high, 1, 0.11,
     [](Summary& s) {
       s.activity->collective_time_per_step = s.activity->exposed_collective_time_per_step = 0.012;
     },
     "comm-bound", kModerate, kHigh},
    {"periodic_spike_moderate", &DiagnoseOptions::periodic_spike_moderate, 1, 0.10,
     [](Summary& s) { Spike(s, "eval", 0.08); }, "periodic-spike", kModerate, std::nullopt},
    {"periodic_spike_high", &DiagnoseOptions::periodic_spike_high, 1, 0.07,
     [](Summary& s) { Spike(s, "eval", 0.08); }, "periodic-spike", kModerate, kHigh},
    // 13 of 16 CPUs in use.
    {"cpu_saturated_share", &DiagnoseOptions::cpu_saturated_share, 1, 0.80,
     [](Summary& s) {
       Data(s, 0.25);
       s.telemetry->worker_cores = 12;
     },
     "input-bound.cpu", std::nullopt, kHigh},
    {"cpu_saturated_pct", &DiagnoseOptions::cpu_saturated_pct, 100, 75,
     [](Summary& s) {
       s.telemetry->cpu_wait_share = 0.25;
       s.telemetry->host_cpu_pct = 80;
     },
     "cpu-contention", kHigh, kHigh, "keep the host's CPUs 80% busy"},
    {"cpu_contention_moderate", &DiagnoseOptions::cpu_contention_moderate, 1, 0.10,
     [](Summary& s) { s.telemetry->cpu_wait_share = 0.08; }, "cpu-contention", kModerate,
     std::nullopt},
    {"cpu_contention_high", &DiagnoseOptions::cpu_contention_high, 1, 0.07,
     [](Summary& s) { s.telemetry->cpu_wait_share = 0.08; }, "cpu-contention", kModerate, kHigh},
    {"storage_iowait_pct", &DiagnoseOptions::storage_iowait_pct, 100, 3,
     [](Summary& s) {
       Data(s, 0.25);
       s.telemetry->host_iowait_pct = 4;
       s.telemetry->host_cpu_pct = 10;
     },
     "input-bound.storage", std::nullopt, kHigh},
    {"storage_cpu_pct", &DiagnoseOptions::storage_cpu_pct, 100, 70,
     [](Summary& s) {
       Data(s, 0.25);
       s.telemetry->host_iowait_pct = 20;
       s.telemetry->host_cpu_pct = 60;
     },
     "input-bound.storage", std::nullopt, kHigh},
    // GEMMs 8 % of kernel time, all of it FP32.
    {"gemm_share_of_kernels", &DiagnoseOptions::gemm_share_of_kernels, 1, 0.08,
     [](Summary& s) {
       s.activity->gemm_time_per_step = s.activity->fp32_gemm_time_per_step = 0.008;
     },
     "precision", std::nullopt, kModerate},
    // FP32 42 % of GEMM time, 25 % of step time.
    {"fp32_gemm_share", &DiagnoseOptions::fp32_gemm_share, 1, 0.4,
     [](Summary& s) { s.activity->fp32_gemm_time_per_step = 0.025; }, "precision", std::nullopt,
     kHigh},
    {"precision_high", &DiagnoseOptions::precision_high, 1, 0.6,
     [](Summary& s) { s.activity->fp32_gemm_time_per_step = 0.05; }, "precision", kHigh, kModerate},
    {"throttled_steps_share", &DiagnoseOptions::throttled_steps_share, 1, 0.05,
     [](Summary& s) { Throttled(s, 0.08, 0.7); }, "throttling", std::nullopt, kModerate},
    {"power_cap_clock_ratio", &DiagnoseOptions::power_cap_clock_ratio, 1, 0.9,
     [](Summary& s) { Throttled(s, 0.5, 0.85); }, "throttling", kInfo, kModerate},
    // Gen3 of Gen5 while 40 % utilized: busy enough only for a lower line.
    {"pcie_busy_utilization_pct", &DiagnoseOptions::pcie_busy_utilization_pct, 100, 30,
     [](Summary& s) {
       s.telemetry->gpus[0].pcie_gen = 3;
       s.telemetry->gpus[0].utilization_pct = 40;
     },
     "pcie-link", std::nullopt, kModerate},
    // The GPU busy 37 % of step time.
    {"high_reported_utilization_pct", &DiagnoseOptions::high_reported_utilization_pct, 100, 70,
     [](Summary& s) {
       Data(s, 0.6);
       s.telemetry->gpu_utilization_pct = 75;
     },
     "utilization-lies", std::nullopt, kInfo},
    {"low_busy_pct", &DiagnoseOptions::low_busy_pct, 100, 30,
     [](Summary& s) {
       Data(s, 0.6);
       s.telemetry->gpu_utilization_pct = 95;
     },
     "utilization-lies", kInfo, std::nullopt},
    {"gpu_bound_idle_pct", &DiagnoseOptions::gpu_bound_idle_pct, 100, 20,
     [](Summary& s) { s.gpu_idle_pct = 15; }, "gpu-bound", std::nullopt, kInfo},
    // 74 of 80 GiB reserved (92.5 %) at the peak.
    {"memory_pressure_share", &DiagnoseOptions::memory_pressure_share, 1, 0.9,
     [](Summary& s) { Memory(s, 70, 10, 74); }, "memory-pressure", std::nullopt, kModerate},
    // 22 % of the 74 GiB reservation unused at the peak.
    {"memory_fragmentation", &DiagnoseOptions::memory_fragmentation, 1, 0.2,
     [](Summary& s) { Memory(s, 58, 10, 74); }, "memory-pressure", std::nullopt, kModerate},
    // 32 % fragmented, 92.5 % reserved: tight under 90 %, not under 95 %.
    {"memory_usable_share", &DiagnoseOptions::memory_usable_share, 1, 0.95,
     [](Summary& s) { Memory(s, 50, 10, 74); }, "memory-pressure", kModerate, std::nullopt},
    // 10 GiB of activations over 10 GiB of weights: (72 / 1.05 - 10) / 10 = 5.9x.
    {"batch_headroom_factor", &DiagnoseOptions::batch_headroom_factor, kAny, 6,
     [](Summary& s) { Memory(s, 20, 10, 21); }, "batch-headroom", kInfo, std::nullopt},
    {"memory_thrash_high", &DiagnoseOptions::memory_thrash_high, 1, 0.03,
     [](Summary& s) { Memory(s, 50, 10, 60, 3, 0.04); }, "memory-thrash", kModerate, kHigh},
};

class DiagnoseThresholdTest : public ::testing::TestWithParam<ThresholdCase> {};

TEST_P(DiagnoseThresholdTest, TheOptionMovesTheVerdict) {
  const ThresholdCase& c = GetParam();
  Summary s = Healthy();
  c.setup(s);
  DiagnoseOptions options;
  options.*c.member = c.value;
  ASSERT_TRUE(options.Validate().ok()) << options.Validate();

  const std::vector<Finding> by_default = Diagnose(s);
  const std::vector<Finding> with_value = Diagnose(s, options);
  EXPECT_EQ(SeverityOf(by_default, c.id), c.by_default) << Ids(by_default);
  EXPECT_EQ(SeverityOf(with_value, c.id), c.with_value) << Ids(with_value);
  EXPECT_EQ(Find(with_value, "invalid-options"), nullptr);
  if (!c.title_with_value.empty()) {
    ASSERT_NE(Find(by_default, c.id), nullptr);
    ASSERT_NE(Find(with_value, c.id), nullptr);
    EXPECT_THAT(Find(by_default, c.id)->title, Not(HasSubstr(c.title_with_value)));
    EXPECT_THAT(Find(with_value, c.id)->title, HasSubstr(c.title_with_value));
  }
}

TEST_P(DiagnoseThresholdTest, AnInvalidValueIsRejectedAndReplacedByItsDefault) {
  const ThresholdCase& c = GetParam();
  Summary s = Healthy();
  c.setup(s);
  const std::vector<Finding> by_default = Diagnose(s);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const double bad : {nan, -0.01, std::isinf(c.hi) ? kAny : c.hi + 1}) {
    DiagnoseOptions options;
    options.*c.member = bad;
    const absl::Status status = options.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field << " = " << bad;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("DiagnoseOptions::", c.field, " = ")));

    // Diagnosis goes on with the default, and says so.
    std::vector<Finding> fs = Diagnose(s, options);
    const Finding* notice = Find(fs, "invalid-options");
    ASSERT_NE(notice, nullptr) << c.field << " = " << bad << ": " << Ids(fs);
    EXPECT_EQ(notice->severity, Severity::kInfo);
    EXPECT_THAT(notice->title, HasSubstr(c.field));
    EXPECT_THAT(notice->recommendation, HasSubstr(std::string(status.message())));
    std::erase_if(fs, [](const Finding& f) { return f.id == "invalid-options"; });
    EXPECT_EQ(fs, by_default) << c.field << " = " << bad;
  }
}

INSTANTIATE_TEST_SUITE_P(Options, DiagnoseThresholdTest, ::testing::ValuesIn(kThresholds),
                         [](const ::testing::TestParamInfo<ThresholdCase>& p) {
                           return std::string(p.param.field);
                         });

// batch-headroom is a notice on its own, and worth fixing when the loop is
// also launch-bound or its kernels are tiny: a larger batch amortizes the
// launches. Never beside an OOM.
TEST(MemoryRulesTest, BatchHeadroomIsModerateWhenTheLoopIsLaunchBound) {
  Summary s = Healthy();
  Memory(s, 20, 10, 21);
  EXPECT_EQ(SeverityOf(Diagnose(s), "batch-headroom"), Severity::kInfo);
  Summary launch = s;
  launch.idle_by_cause["launch"] = 5;  // launch-bound, moderate
  const std::vector<Finding> fs = Diagnose(launch);
  EXPECT_EQ(SeverityOf(fs, "launch-bound"), Severity::kModerate) << Ids(fs);
  EXPECT_EQ(SeverityOf(fs, "batch-headroom"), Severity::kModerate) << Ids(fs);
  EXPECT_THAT(Find(fs, "batch-headroom")->recommendation, HasSubstr("amortizes"));
  Summary tiny = s;
  tiny.activity->kernel_time_p50 = 5e-6;
  EXPECT_EQ(SeverityOf(Diagnose(tiny), "batch-headroom"), Severity::kModerate);
  Summary after_oom = launch;
  after_oom.memory->oom = OomEvent{};
  EXPECT_EQ(SeverityOf(Diagnose(after_oom), "batch-headroom"), std::nullopt);
}

TEST(DiagnoseOptionsTest, TheDefaultsAreValidAndAreWhatDiagnoseUses) {
  EXPECT_TRUE(DiagnoseOptions{}.Validate().ok());
  Summary s = Healthy();
  Data(s, 0.08);
  s.idle_by_cause["launch"] = 5;
  EXPECT_EQ(Diagnose(s, DiagnoseOptions{}), Diagnose(s));
}

TEST(DiagnoseOptionsTest, AModerateLineAboveTheHighOneResetsBoth) {
  // Which of the two is the mistake is unknown: both fall back, so a loader
  // at 25 % is still reported, and high, rather than silenced by a moderate
  // line of 30 %.
  DiagnoseOptions options;
  options.input_bound_moderate = 0.30;
  const absl::Status status = options.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("input_bound_moderate = 0.3 is above input_bound_high = 0.2"));

  Summary s = Healthy();
  Data(s, 0.25);
  const std::vector<Finding> fs = Diagnose(s, options);
  EXPECT_EQ(SeverityOf(fs, "input-bound"), Severity::kHigh) << Ids(fs);
  const Finding* notice = Find(fs, "invalid-options");
  ASSERT_NE(notice, nullptr) << Ids(fs);
  EXPECT_THAT(notice->title, HasSubstr("input_bound_moderate, input_bound_high"));
  EXPECT_EQ(notice->evidence,
            (std::vector<std::pair<std::string, double>>{{"invalid_options", 2}}));
}

TEST(DiagnoseOptionsTest, OnlyTheInvalidFieldsFallBack) {
  // A valid high line of 10 % is honoured next to a NaN elsewhere.
  DiagnoseOptions options;
  options.input_bound_high = 0.10;
  options.cpu_saturated_pct = std::numeric_limits<double>::quiet_NaN();
  Summary s = Healthy();
  Data(s, 0.15);
  const std::vector<Finding> fs = Diagnose(s, options);
  EXPECT_EQ(SeverityOf(fs, "input-bound"), Severity::kHigh) << Ids(fs);
  const Finding* notice = Find(fs, "invalid-options");
  ASSERT_NE(notice, nullptr) << Ids(fs);
  EXPECT_THAT(notice->title, HasSubstr("cpu_saturated_pct"));
  EXPECT_THAT(notice->title, Not(HasSubstr("input_bound_high")));
  // A notice: it explains no step time, so it ranks after the loader.
  EXPECT_EQ(fs.front().id, "input-bound");
}

TEST(DiagnoseOptionsTest, InvalidOptionsAreReportedEvenWithoutSteps) {
  DiagnoseOptions options;
  options.low_busy_pct = -1;
  const std::vector<Finding> fs = Diagnose(Summary{}, options);
  EXPECT_NE(Find(fs, "invalid-options"), nullptr) << Ids(fs);
}

TEST(DiagnoseOptionsTest, TheTinyKernelLineIsQuotedInTheRecommendation) {
  Summary s = Healthy();
  s.idle_by_cause["launch"] = 5;
  s.activity->kernel_time_p50 = 8e-6;
  EXPECT_THAT(Find(Diagnose(s), "launch-bound")->recommendation, HasSubstr("under 20 us each"));
  DiagnoseOptions options;
  options.tiny_kernel_seconds = 10e-6;
  EXPECT_THAT(Find(Diagnose(s, options), "launch-bound")->recommendation,
              HasSubstr("under 10 us each"));
}

}  // namespace
}  // namespace gpuscope
