#!/usr/bin/env bash
# Runs ctest in an AddressSanitizer build. LeakSanitizer's own stop-the-world
# tracer sometimes crashes at process exit after a test passed ("Tracer
# caught signal 11 ... LeakSanitizer has encountered a fatal error": an LSan
# fault under load, google/sanitizers#1353, not a leak report). When the only
# failures carry that signature, they are run once more and must pass then;
# any other failure fails at once.
#
#   scripts/ctest-asan.sh BUILD_DIR [ctest args...]
set -uo pipefail
dir="$1"
shift
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
ctest --test-dir "$dir" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ "$status" = 0 ] && exit 0
if grep -q "LeakSanitizer has encountered a fatal error" "$log" && grep -q "Tracer caught signal" "$log"; then
  failed=$(grep -c "\*\*\*Failed\|\*\*\*Exception\|\*\*\*Timeout" "$log")
  crashes=$(grep -c "Tracer caught signal" "$log")
  if [ "$failed" -le "$crashes" ]; then
    echo "ctest-asan: $failed failure(s), each a LeakSanitizer tracer crash at exit; running them again"
    exec ctest --test-dir "$dir" --rerun-failed --output-on-failure
  fi
fi
exit "$status"
