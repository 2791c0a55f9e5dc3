#!/usr/bin/env bash
# Line coverage of reference/ from the .gcda files the L0 tests left; fails on an empty report or < 95%.
# Usage: coverage_report.sh <build dir> <source dir>
# A zero baseline (--initial, from the .gcno files) is merged in, so a reference/ file that no test ran
# counts as 0% instead of silently dropping out of the report. Works with lcov 1.16 (Debian 12) and 2.x,
# whose --ignore-errors classes differ (1.x has no mismatch/negative/unused and rejects them).
set -euo pipefail
build="$1"; src="$2"
major="$(lcov --version | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -n1)"
ign=()
if [ "${major:-1}" -ge 2 ]; then ign=(--ignore-errors mismatch,negative,unused,inconsistent); fi
# lcov 1.16 on perl >= 5.36 prints "Subroutine ... redefined" noise on stderr: drop only those lines.
quiet() { "$@" 2> >(grep -v 'redefined at' >&2); }
if ! find "$build/reference" -name '*.gcda' | grep -q .; then
  echo "coverage: no .gcda under $build/reference (configure with -DSTATECUT_COVERAGE=ON and run the tests first)" >&2
  exit 1
fi
quiet lcov --quiet "${ign[@]}" --capture --initial --directory "$build/reference" --output-file "$build/coverage.base.info"
quiet lcov --quiet "${ign[@]}" --capture --directory "$build/reference" --output-file "$build/coverage.run.info"
quiet lcov --quiet "${ign[@]}" --add-tracefile "$build/coverage.base.info" --add-tracefile "$build/coverage.run.info" \
     --output-file "$build/coverage.raw.info"
quiet lcov --quiet "${ign[@]}" --extract "$build/coverage.raw.info" "$src/reference/*" --output-file "$build/coverage.info"
quiet lcov "${ign[@]}" --list "$build/coverage.info" || true   # per-file table: each owner sees their files
summary="$(lcov "${ign[@]}" --summary "$build/coverage.info" 2>&1)"
echo "$summary" | grep -v 'redefined at'
pct="$(echo "$summary" | sed -n 's/.*lines\.*: *\([0-9.]*\)%.*/\1/p')"
if [ -z "$pct" ]; then echo "coverage: empty report" >&2; exit 1; fi
echo "reference/ line coverage: ${pct}%"
awk -v p="$pct" 'BEGIN { exit !(p >= 95.0) }' || { echo "coverage: ${pct}% < 95%" >&2; exit 1; }
