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
