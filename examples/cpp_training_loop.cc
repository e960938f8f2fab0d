// A training loop instrumented with gpuscope: the C++ snippet of DESIGN.md §1,
// with a CPU stand-in for the model so it runs anywhere.
//
// The "data loader" sleeps to imitate a slow input pipeline (storage or
// decode), h2d copies a buffer, and the "model" does real arithmetic. The
// report shows where each step's time went.
//
//   ./cpp_training_loop [--steps N] [--data-ms MS]

#include <gpuscope/gpuscope.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  int steps = 200;
  int data_ms = 4;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--steps") args.steps = value;
    if (flag == "--data-ms") args.data_ms = value;
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

  gpuscope::Session session(gpuscope::Options{.window = 512});
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
      for (size_t k = 0; k < kWidth; ++k) host_batch[k] = static_cast<float>((static_cast<size_t>(i) + k) % 13) * 0.1f;
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kH2D);
      std::memcpy(device_batch.data(), host_batch.data(), kWidth * sizeof(float));
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kForward);
      loss += Layer(device_batch, weights);
      gpuscope::PhaseScope a(session, attention);  // nested: its own stats, not in the breakdown
      loss += Layer(device_batch, weights);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kBackward);
      loss += Layer(device_batch, weights) + Layer(device_batch, weights);
    }
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kOptimizer);
      for (float& w : weights) w *= 0.99999f;
    }
  }

  std::cout << gpuscope::FormatReport(session.Summarize());
  std::cout << "(final loss " << loss << ")\n";
  return 0;
}
