#!/usr/bin/env bash
# Runs ctest in an AddressSanitizer build. LeakSanitizer's own stop-the-world
# tracer sometimes crashes at process exit after a test passed ("Tracer
# caught signal 11 ... LeakSanitizer has encountered a fatal error": an LSan
# fault, google/sanitizers#1353, not a leak report). When every failed test's
# output carries that signature, those tests run once more and must pass
# then; any other failure fails at once.
#
#   scripts/ctest-asan.sh BUILD_DIR [ctest args...]
set -uo pipefail
dir="$1"
shift
log="$(mktemp)"
ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" != 0 ]; then
  failed_list="$dir/Testing/Temporary/LastTestsFailed.log"
  all_lsan=1
  count=0
  if [ -s "$failed_list" ]; then
    # Lines are "<number>:<name>"; each failed test's output is in the log
    # from its "Start" line to the next test's result line.
    while IFS=: read -r _ name; do
      count=$((count + 1))
      output=$(awk -v t="$name" '$0 ~ ("Test +#[0-9]+: " t " ") && /Failed|Exception/ {p=1; next} p && /Test +#[0-9]+: / {exit} p' "$log")
      if ! grep -q "Tracer caught signal" <<<"$output" ||
         ! grep -q "LeakSanitizer has encountered a fatal error" <<<"$output"; then
        all_lsan=0
      fi
    done <"$failed_list"
  else
    all_lsan=0
  fi
  if [ "$all_lsan" = 1 ] && [ "$count" -gt 0 ]; then
    echo "ctest-asan: $count failure(s), each a LeakSanitizer tracer crash at exit; running them again"
    rm -f "$log"
    exec ctest --test-dir "$dir" --rerun-failed --output-on-failure "$@"
  fi
fi
rm -f "$log"
exit "$status"
