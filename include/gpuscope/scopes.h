// File: gpuscope/scopes.h
// -----------------------------------------------------------------------------
//
// `StepScope` and `PhaseScope` mark one training step and one phase inside it,
// from construction to destruction. Each is also an NVTX range in domain
// "gpuscope", so steps and phases appear on the Nsight Systems timeline.
//
// Cost budget (measured by benchmarks/scope_overhead_benchmark.cc):
//   * enabled: two clock reads, an NVTX push and pop, one 64-byte record
//     appended to a bounded queue; with a GPU source and a stream to mark
//     (Options::stream, or the phase's), one device marker (a pooled CUDA
//     event recorded on the stream) at each end. No allocation, no lock
//     (but for the first use of a new phase name, which registers it), no
//     system call beyond the clock, no device synchronization. The
//     constructor and the destructor are noexcept.
//   * disabled (Options::enabled = false, GPUSCOPE_DISABLE=1, a closed
//     session or a forked child): one branch in the constructor and one in
//     the destructor.
//
// Scopes cannot be copied, moved or allocated with `new`: a scope is a
// lexical region, exactly like nvtx3::scoped_range. A scope must be named:
// `gpuscope::PhaseScope(session, gpuscope::Phase::kData);` makes a temporary
// that ends at the semicolon, recording an empty phase, so every constructor
// is [[nodiscard]]: GCC and Clang warn about the unnamed temporary.
//
// Example:
//
//   for (auto& batch : loader) {
//     gpuscope::StepScope step(session, {.samples = static_cast<int64_t>(batch.size())});
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kH2D); CopyIn(batch); }
//     { gpuscope::PhaseScope p(session, gpuscope::Phase::kForward); Forward(); }
//     { gpuscope::PhaseScope p(session, "attention"); Attention(); }  // custom
//   }
//
// A phase may name the stream its GPU work goes on, when that is not the
// session's: `PhaseScope p(session, Phase::kH2D, copy_stream);`.

#ifndef GPUSCOPE_SCOPES_H_
#define GPUSCOPE_SCOPES_H_

#include <cstddef>
#include <string_view>

#include "gpuscope/options.h"
#include "gpuscope/phase.h"
#include "gpuscope/session.h"

namespace gpuscope {

// StepScope
//
// One training step: the step's window begins at construction and ends at
// destruction. A StepScope inside another open step records nothing (see
// Session's misuse rules).
class StepScope {
 public:
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  explicit StepScope(Session& session, const StepOptions& step = {}) noexcept
      : session_(session.recording() ? &session : nullptr) {
    if (session_ != nullptr) token_ = session_->BeginStep(step);
  }
  ~StepScope() {
    if (session_ != nullptr) session_->End(token_);
  }

  // Whether this scope is being recorded, and if not, why.
  ScopeStatus status() const {
    return session_ != nullptr ? token_.status : ScopeStatus::kDisabled;
  }

  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
  StepScope(StepScope&&) = delete;
  StepScope& operator=(StepScope&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;

 private:
  Session* session_;
  ScopeToken token_;
};

// PhaseScope
//
// One phase: a built-in `Phase`, a `PhaseId` from Session::RegisterPhase(), or
// a name. A name is looked up on every construction (a hash and a compare,
// no lock; only a name's first use registers it, which locks and allocates
// once); prefer an id in the innermost loops.
class PhaseScope {
 public:
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, PhaseId phase) noexcept
      : session_(session.recording() ? &session : nullptr) {
    if (session_ != nullptr) token_ = session_->BeginPhase(phase);
  }
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, Phase phase) noexcept
      : PhaseScope(session, PhaseId(phase)) {}
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, std::string_view name) noexcept
      : session_(session.recording() ? &session : nullptr) {
    if (session_ != nullptr) token_ = session_->BeginPhase(name);
  }
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, const char* name) noexcept
      : PhaseScope(session, std::string_view(name != nullptr ? name : "")) {}
  // A phase whose GPU work goes on `stream` (see Session::BeginPhase).
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, PhaseId phase, Stream stream) noexcept
      : session_(session.recording() ? &session : nullptr) {
    if (session_ != nullptr) token_ = session_->BeginPhase(phase, stream);
  }
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, Phase phase, Stream stream) noexcept
      : PhaseScope(session, PhaseId(phase), stream) {}
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, std::string_view name, Stream stream) noexcept
      : session_(session.recording() ? &session : nullptr) {
    if (session_ != nullptr) token_ = session_->BeginPhase(name, stream);
  }
  [[nodiscard("an unnamed scope ends at the semicolon")]]
  PhaseScope(Session& session, const char* name, Stream stream) noexcept
      : PhaseScope(session, std::string_view(name != nullptr ? name : ""), stream) {}
  ~PhaseScope() {
    if (session_ != nullptr) session_->End(token_);
  }

  // Whether this scope is being recorded, and if not, why.
  ScopeStatus status() const {
    return session_ != nullptr ? token_.status : ScopeStatus::kDisabled;
  }

  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;
  PhaseScope(PhaseScope&&) = delete;
  PhaseScope& operator=(PhaseScope&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;

 private:
  Session* session_;
  ScopeToken token_;
};

}  // namespace gpuscope

#endif  // GPUSCOPE_SCOPES_H_
