// A training loop instrumented with gpuscope: the README's C++ quick start,
// with a CPU stand-in for the model so it runs anywhere.
//
// The "data loader" sleeps to imitate a slow input pipeline (storage or
// decode), h2d copies a buffer, and the "model" does real arithmetic. The
// report shows where each step's time went.
//
//   ./cpp_training_loop [--steps N] [--data-ms MS] [--simulate-gpu 1]
//
// With --simulate-gpu 1 the loop also "launches" GPU kernels on gpuscope's
// simulated device (forward 3 ms, backward 6 ms, optimizer 1 ms) and waits
// for them at the end of each step, as a .item() would: the report then has
// the events source's GPU idle lower bound, idle by cause and device times.

#include <gpuscope/gpuscope.h>
#include <gpuscope/testing.h>  // SimulatedDevice, for --simulate-gpu

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  int steps = 200;
  int data_ms = 4;
  bool simulate_gpu = false;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--steps") args.steps = value;
    if (flag == "--data-ms") args.data_ms = value;
    if (flag == "--simulate-gpu") args.simulate_gpu = value != 0;
  }
  return args;
}

// A stand-in for a model layer: a small dense matrix-vector product.
float Layer(std::vector<float>& activations, const std::vector<float>& weights) {
  const size_t n = activations.size();
  std::vector<float> out(n, 0.0f);
  for (size_t r = 0; r < n; ++r) {
    float acc = 0;
    for (size_t c = 0; c < n; ++c) acc += weights[r * n + c] * activations[c];
    out[r] = std::tanh(acc);
  }
  activations.swap(out);
  return std::accumulate(activations.begin(), activations.end(), 0.0f);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  constexpr int kBatch = 64;
  constexpr size_t kWidth = 256;

  std::shared_ptr<gpuscope::SimulatedDevice> gpu;
  if (args.simulate_gpu) gpu = std::make_shared<gpuscope::SimulatedDevice>();
  // A real trainer passes the CUstream its kernels run on; the simulation
  // launches on stream 0.
  gpuscope::Session session(gpuscope::Options{
      .window = 512, .stream = gpu != nullptr ? 0 : gpuscope::kNoStream, .simulated_device = gpu});
  // Launches a simulated kernel; kernels run one after another, so the GPU
  // is done when the last one queued is.
  auto gpu_done = std::chrono::steady_clock::now();
  auto launch = [&](int ms) {
    if (gpu == nullptr) return gpu_done;
    gpu->Launch(int64_t{ms} * 1'000'000);
    return std::max(gpu_done, std::chrono::steady_clock::now()) + std::chrono::milliseconds(ms);
  };
  // Custom names are registered once, outside the loop.
  const gpuscope::PhaseId attention = session.RegisterPhase("attention").value();

  std::vector<float> host_batch(kWidth), device_batch(kWidth), weights(kWidth * kWidth);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>((i % 7) - 3) * 0.01f;
  float loss = 0;

  for (int i = 0; i < args.steps; ++i) {
    gpuscope::StepScope step(session, {.samples = kBatch});
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kData);
      std::this_thread::sleep_for(std::chrono::milliseconds(args.data_ms));
      for (size_t k = 0; k < kWidth; ++k)
        host_batch[k] = static_cast<float>((static_cast<size_t>(i) + k) % 13) * 0.1f;
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kH2D);
      std::memcpy(device_batch.data(), host_batch.data(), kWidth * sizeof(float));
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kForward);
      gpu_done = launch(3);
      loss += Layer(device_batch, weights);
      gpuscope::PhaseScope a(session, attention);  // nested: its own stats, not in the breakdown
      loss += Layer(device_batch, weights);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kBackward);
      gpu_done = launch(6);
      loss += Layer(device_batch, weights) + Layer(device_batch, weights);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kOptimizer);
      gpu_done = launch(1);
      for (float& w : weights) w *= 0.99999f;
    }
    if (gpu != nullptr) {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kSync);  // loss.item(): wait for the GPU
      std::this_thread::sleep_until(gpu_done);
    }
  }

  std::cout << gpuscope::FormatReport(session.Summarize());
  std::cout << "(final loss " << loss << ")\n";
  return 0;
}
