// Proves the installed package compiles, links and runs: one session, a few
// steps with phases, a summary that must contain them.

#include <gpuscope/gpuscope.h>

#include <cstdio>
#include <iostream>
#include <memory>

int main() {
  auto clock = std::make_shared<gpuscope::ManualClock>();
  gpuscope::Session session(gpuscope::Options{.window = 8, .clock = clock});
  for (int i = 0; i < 10; ++i) {
    gpuscope::StepScope step(session, {.samples = 32});
    {
      gpuscope::PhaseScope p(session, gpuscope::Phase::kData);
      clock->Advance(3'000'000);
    }
    {
      gpuscope::PhaseScope p(session, "compute");
      clock->Advance(7'000'000);
    }
  }
  const gpuscope::Summary s = session.Summarize();
  std::cout << gpuscope::FormatReport(s);
  const gpuscope::PhaseStats* data = s.FindPhase("data");
  if (s.steps != 8 || s.total_steps != 10 || data == nullptr || data->share < 0.29 ||
      data->share > 0.31) {
    std::fprintf(stderr, "unexpected summary from the installed gpuscope %s\n", GPUSCOPE_VERSION);
    return 1;
  }
  std::printf("installed gpuscope %s works\n", GPUSCOPE_VERSION);
  return 0;
}
