#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: the lit suite and the
# GoogleTest suites, through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir "${CLEAVE_BUILD_DIR:-build}" --output-on-failure -j2
