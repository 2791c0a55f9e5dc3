#!/usr/bin/env bash
# Line coverage of reference/ from the .gcda files the L0 tests left; fails on an empty report or < 95%.
set -euo pipefail
build="$1"; src="$2"
lcov --quiet --capture --directory "$build/reference" --output-file "$build/coverage.raw.info" \
     --ignore-errors mismatch,negative 2>/dev/null || lcov --quiet --capture --directory "$build/reference" --output-file "$build/coverage.raw.info"
lcov --quiet --extract "$build/coverage.raw.info" "$src/reference/*" --output-file "$build/coverage.info"
summary="$(lcov --summary "$build/coverage.info" 2>&1)"
echo "$summary"
pct="$(echo "$summary" | sed -n 's/.*lines\.*: *\([0-9.]*\)%.*/\1/p')"
if [ -z "$pct" ]; then echo "coverage: empty report" >&2; exit 1; fi
echo "reference/ line coverage: ${pct}%"
awk -v p="$pct" 'BEGIN { exit !(p >= 95.0) }' || { echo "coverage: ${pct}% < 95%" >&2; exit 1; }
