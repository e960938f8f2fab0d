// The circular block bootstrap behind `gpuscope compare`'s noise test: is a
// change in step time more than the runs' own step-to-step noise? The
// method and why it is this one are stated in python/gpuscope/_noise.py,
// which draws the random words, calls these two functions for each run, and
// turns the resampled statistics into an interval and a verdict.
//
// Both are pure functions of their inputs (no clock, no global generator):
// the same step times and the same words give the same numbers on every
// machine, bit for bit.

#ifndef GPUSCOPE_LIB_CORE_BOOTSTRAP_H_
#define GPUSCOPE_LIB_CORE_BOOTSTRAP_H_

#include <cstdint>
#include <span>
#include <vector>

namespace gpuscope::internal {

// BootstrapBlockLength()
//
// The block length for one run's step times `xs` (in step order):
// max(round(n^(1/3)), L), at most n / 4, where L is the first lag at which
// the autocorrelation of the steps' average ranks falls under the
// white-noise band 2 / sqrt(n). 1 for fewer than 4 steps.
int BootstrapBlockLength(std::span<const double> xs);

// BootstrapResamples()
//
// One statistic per circular block resample of `xs` with blocks of `block`
// steps: each resample takes k = ceil(n / block) blocks, the last one cut so
// that the resample has n steps, and block j starts at step
// (words[i * k + j] * n) >> 32 (uniform on 0..n-1 from 32-bit words),
// wrapping from the last step to the first. The statistic is the mean when
// `q` < 0, else the q-quantile (linear interpolation between order
// statistics, Hyndman-Fan type 7). words.size() / k resamples; the words
// past the last whole resample are not used.
std::vector<double> BootstrapResamples(std::span<const double> xs, int block,
                                       std::span<const uint32_t> words, double q);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_BOOTSTRAP_H_
