# test/gpu/checks.sh - what run.sh and run-packed.sh share (sourced): the
# phase headers, the failure list and the summary.
START=${START:-$SECONDS}
failures=()
phase() { printf '\n=== [%3ds] %s\n' $((SECONDS - START)) "$*"; }
fail() { echo "FAIL: $*"; failures+=("$*"); }
die() { echo "error: $*" >&2; exit 2; }
# Prints the failures and exits 1, or says that every check passed.
finish() {
  phase "done"
  if [ ${#failures[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${failures[@]}"
    exit 1
  fi
  echo "every check passed in $((SECONDS - START)) s"
}
# Runs the NCCL engine's tests (COMMAND..., a launcher and the test binary)
# for at most 240 s and judges the log: they must pass, and none may skip on
# a machine with a GPU.
nccl_tests() { # LOG COMMAND...
  local log=$1
  shift
  if timeout 240 "$@" --gtest_color=no >"$log" 2>&1; then
    grep -E "^\[(==========|  PASSED  |  SKIPPED |  FAILED  )\] [0-9]|on all" "$log"
    if grep -q "^\[  SKIPPED \]" "$log"; then
      grep "no CUDA device\|SKIPPED" "$log" | head -5
      fail "CleaveCommNcclTests skipped tests on a machine with a GPU"
    fi
  else
    local rc=$?
    grep -E "Failure|error|^\[  FAILED|Expected|elements wrong|^\[rank" "$log" |
      head -60
    tail -5 "$log"
    fail "CleaveCommNcclTests (exit $rc)"
  fi
}
