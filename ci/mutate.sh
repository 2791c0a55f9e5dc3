#!/usr/bin/env bash
# Mutation gate (label L2: run on demand or nightly, not in every CI run; issue 18).
# Injects one operator mutation at a time (mutate.py's operators: +/-, </<=, &&/||, dropped sqrt/exp/abs/
# transpose, index + 1, constants) into reference/ (default) or the tensor-side selection/surgery code
# (--optimized: optimized/prune/{calibration,surgery,prune}.cpp), rebuilds, runs the test executables that
# cover that code, and fails when the share of mutants the tests kill is below --min-score (default 90%, the
# goal of issue 18). Mutants listed in ci/mutate_equivalent.txt (file | line | operator | why) cannot change
# any output, so they are never run nor counted.
#
# Usage: ci/mutate.sh BUILD_DIR [--optimized] [--n 40] [--seed S] [--min-score 90] [--jobs 1] [--timeout 300]
#                     [--exes tests/a properties/b ...]
#   BUILD_DIR  a configured build of this repository; the gate reuses its CMake options (TORCH, CUDA,
#              launchers, Torch_DIR, ...) for its own tree BUILD_DIR/mutate/{src,build}, built on a copy of the
#              git-tracked sources, so neither the checkout nor BUILD_DIR is ever mutated.
#   --seed     default: a fresh one; printed either way (rerun with --seed to replay a sample).
#   --jobs     parallel build jobs, and test executables run at once per mutant (the first failure kills it).
# Needs mutate.py (../shared/tools/mutate.py next to the repository, or $STATECUT_MUTATE_PY) for the sampling
# and the operators; without it the gate says so and exits 77 (skipped).
# Exit: 0 score >= min, 1 score below it, 2 usage or baseline failure, 77 skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
usage() { sed -n '2,20p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
build="$(cd "$1" 2>/dev/null && pwd)" || { echo "ci/mutate.sh: no build dir '$1'" >&2; exit 2; }
shift
[ -f "$build/CMakeCache.txt" ] || { echo "ci/mutate.sh: $build has no CMakeCache.txt (configure it first)" >&2; exit 2; }
n=40 seed="" min=90 jobs=1 timeout=300 target=reference exes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --optimized) target=optimized ;;
    --n) n="$2"; shift ;;
    --seed) seed="$2"; shift ;;
    --min-score) min="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --timeout) timeout="$2"; shift ;;
    --exes) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do exes+=("$1"); shift; done; continue ;;
    -h|--help) usage ;;
    *) echo "ci/mutate.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift
done
mutate_py="${STATECUT_MUTATE_PY:-$root/../shared/tools/mutate.py}"
if [ ! -f "$mutate_py" ]; then
  echo "ci/mutate.sh: SKIPPED: mutate.py not found at $mutate_py (set STATECUT_MUTATE_PY)" >&2
  exit 77
fi
[ -n "$seed" ] || seed=$(( $(date +%s) % 100000 ))
if [ "$target" = reference ]; then
  paths=(reference)
  # Every executable that links statecut_ref and tests it: tests/ref/*, tests/golden/*, properties/*.
  if [ ${#exes[@]} -eq 0 ]; then
    for f in "$root"/tests/ref/*.cpp "$root"/tests/golden/*.cpp; do exes+=("tests/$(basename "${f%.cpp}")"); done
    if [ -d "$build/properties" ]; then  # built only where RapidCheck was found
      for f in "$root"/properties/*.cpp; do exes+=("properties/$(basename "${f%.cpp}")"); done
    fi
  fi
else
  paths=(optimized/prune/calibration.cpp optimized/prune/surgery.cpp optimized/prune/prune.cpp)
  grep -q '^STATECUT_TORCH:BOOL=ON' "$build/CMakeCache.txt" ||
    { echo "ci/mutate.sh: --optimized needs a build with STATECUT_TORCH=ON" >&2; exit 2; }
  [ ${#exes[@]} -gt 0 ] || exes=(tests/calib_streaming tests/surgery_fixtures tests/surgery_qwen_layouts tests/keep_file_badinput
    tests/select_prune_agree tests/prune_options_cli)
fi
echo "ci/mutate.sh: seed $seed, $n mutants of ${paths[*]}, min score $min%, build options from $build" >&2
echo "ci/mutate.sh: tests: ${exes[*]}" >&2
exec python3 - "$root" "$build" "$mutate_py" "$seed" "$n" "$min" "$jobs" "$timeout" "${paths[*]}" "${exes[@]}" <<'PY'
import concurrent.futures, importlib.util, os, random, re, shutil, subprocess, sys, time
root, build, mutate_py, seed, n, min_score, jobs, timeout, paths = sys.argv[1:10]
exes = sys.argv[10:]
seed, n, min_score, jobs, timeout, paths = int(seed), int(n), float(min_score), int(jobs), int(timeout), paths.split()
spec = importlib.util.spec_from_file_location("mutate", mutate_py)
mut = importlib.util.module_from_spec(spec); spec.loader.exec_module(mut)

# Known-equivalent mutants: "file | line text (stripped, before the mutation) | operator | why", read by the parser
# of ci/check_mutate_equivalent.py (the L0 check that every entry still names a line of the code).
spec = importlib.util.spec_from_file_location("check_eq", os.path.join(root, "ci", "check_mutate_equivalent.py"))
check_eq = importlib.util.module_from_spec(spec); spec.loader.exec_module(check_eq)
equivalent = set()
for where, parts in check_eq.entries(root):
    if parts is None:
        sys.exit(f"{where}: needs 'file | line | operator | why'")
    equivalent.add(tuple(parts[:3]))

# Work tree: a copy of the tracked sources (as in the working tree), and a build configured like BUILD_DIR.
# One tree per target: their compile flags differ (below), so sharing a tree would rebuild it whole at every switch,
# and two gates running at once would overwrite each other's sources.
work = os.path.join(build, "mutate" if paths != ["reference"] else "mutate-reference")
src = os.path.join(work, "src"); b = os.path.join(work, "build")
ls = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True,
                    text=True)
if ls.returncode == 0:
    files = ls.stdout.split("\n")
else:  # an exported tree without .git: everything but build folders and hidden ones
    files = []
    for dp, ds, fs in os.walk(root):
        ds[:] = [d for d in ds if not d.startswith((".", "build"))]
        files += [os.path.relpath(os.path.join(dp, f), root) for f in fs]
os.makedirs(src, exist_ok=True)
for f in filter(None, files):
    s, d = os.path.join(root, f), os.path.join(src, f)
    if not os.path.isfile(s):
        continue
    os.makedirs(os.path.dirname(d), exist_ok=True)
    if not os.path.exists(d) or open(s, "rb").read() != open(d, "rb").read():
        # A changed file gets a fresh time stamp (shutil.copy, not copy2): a run killed mid-mutant leaves the mutated
        # source and its newer object behind, and the original's older stamp would leave that object in place (the
        # baseline then fails on a bug nobody put there: seen). Unchanged files are not touched, so the incremental
        # rebuild stays small.
        shutil.copy(s, d)
keep = re.compile(r"^(STATECUT_\w+|CMAKE_BUILD_TYPE|CMAKE_\w*COMPILER_LAUNCHER|CMAKE_CXX_COMPILER|CMAKE_CUDA_\w+|"
                  r"CMAKE_PREFIX_PATH|Torch_DIR|\w+_DIR):(\w+)=(.*)$")
flag_names = ("CMAKE_CXX_FLAGS", "CMAKE_CXX_FLAGS_RELEASE", "CMAKE_CXX_FLAGS_RELWITHDEBINFO")
opts, flags = [], []
for line in open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8"):
    m = keep.match(line.strip())
    if m and m.group(2) != "INTERNAL" and m.group(3) and "NOTFOUND" not in m.group(3) and \
            not m.group(1).startswith(("CMAKE_CUDA_COMPILER_ID", "CMAKE_CUDA_COMPILER_VERSION")) and \
            not m.group(3).startswith(root):
        opts.append(f"-D{m.group(1)}:{m.group(2)}={m.group(3)}")
    name, _, rest = line.strip().partition(":")
    if name in flag_names and "=" in rest:
        flags.append(f"-D{name}={rest.split('=', 1)[1]}")
opts.append("-DSTATECUT_COVERAGE=OFF")  # coverage counters only slow every mutant's run
if paths != ["reference"]:
    # BUILD_DIR's own flags, given explicitly: a value left in this tree's cache by an earlier configure would
    # otherwise stay.
    opts += flags
else:
    # Checked indexing for the Eigen-only reference (cheap to rebuild): without NDEBUG Eigen asserts every index, and
    # libstdc++'s assertions check std::vector's, so an index or loop-bound mutant that reads or writes one past a
    # buffer fails loudly instead of passing on whatever lies there (seed 304: rrqr.cpp's `t < rows.size()` turned
    # into `<=` survived, writing a row past the subsample). The LibTorch side keeps its release flags: every flag
    # change there rebuilds LibTorch-heavy objects for ~20 minutes on two cores.
    for cfg in ("RELEASE", "RELWITHDEBINFO"):
        opts.append(f"-DCMAKE_CXX_FLAGS_{cfg}=-O2 -g0")
    opts.append("-DCMAKE_CXX_FLAGS=-D_GLIBCXX_ASSERTIONS")


last_output = [""]  # the failing command's output (the last build, or the failing test), shown when the baseline fails


def execute(cmd, cwd, limit):
    """(exit status, stdout + stderr); 124 when it runs past limit seconds."""
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=limit)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {limit} s: {' '.join(cmd)}"


def run(cmd, cwd, limit):
    rc, last_output[0] = execute(cmd, cwd, limit)
    return rc


def build_exes():
    return run(["cmake", "--build", b, "-j", str(jobs), "--target"] + [os.path.basename(e) for e in exes], src, 7200)


def tests():
    """1 when any test executable fails. They run --jobs at a time (they are independent processes), so a mutant
    costs about its slowest executable, not their sum; the first failure ends the wait (the others still finish)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(execute, [os.path.join(b, e)], b, timeout): e for e in exes}
        for f in concurrent.futures.as_completed(futures):
            rc, out = f.result()
            if rc:
                last_output[0] = f"{futures[f]} exited {rc}:\n{out}"
                for g in futures:
                    g.cancel()
                return 1
    return 0


t0 = time.time()
if run(["cmake", "-S", src, "-B", b, "-G", "Ninja"] + opts, src, 900) or build_exes():
    sys.exit(print("\n".join(last_output[0].splitlines()[-30:]) + "\nci/mutate.sh: baseline build failed in " + b) or 2)
if tests():
    sys.exit(print("\n".join(last_output[0].splitlines()[-30:]) +
                   "\nci/mutate.sh: baseline tests fail: the score is undefined") or 2)
print(f"baseline built and passing in {time.time() - t0:.0f} s", flush=True)

# mutate.py walks folders; a file path is taken as its folder's sites in that file
dirs = sorted({p if os.path.isdir(os.path.join(src, p)) else os.path.dirname(p) for p in paths})
all_sites = [s for s in mut.sites(src, dirs)
             if any(s[0] == p or s[0].startswith(p.rstrip("/") + "/") for p in paths)]
random.Random(seed).shuffle(all_sites)
killed, survived, invalid, skipped = [], [], 0, 0
t0 = time.time()
for site in all_sites:
    if len(killed) + len(survived) >= n:
        break
    rel, i, name, _ = site
    fp = os.path.join(src, rel)
    orig = open(fp, encoding="utf-8").read()
    if (rel, orig.split("\n")[i].strip(), name) in equivalent:
        skipped += 1
        continue
    ch = mut.apply(src, site)
    if ch is None:
        continue
    try:
        if build_exes():
            invalid += 1
            continue
        rc = tests()
        (killed if rc else survived).append((site, ch))
    finally:
        open(fp, "w", encoding="utf-8").write(orig)
    print(f"[{len(killed) + len(survived)}/{n}] {'KILLED  ' if rc else 'SURVIVED'} {rel}:{i + 1} {name}", flush=True)
build_exes()  # leave the work tree built from unmutated sources
count = len(killed) + len(survived)
score = 100.0 * len(killed) / max(count, 1)
print(f"\nseed {seed}: mutants {count} (invalid {invalid}, known-equivalent skipped {skipped}), killed {len(killed)}, "
      f"survived {len(survived)}, score {score:.1f}% (min {min_score:g}%) in {time.time() - t0:.0f} s")
for (rel, i, name, _), (old, new) in survived:
    print(f"SURVIVED {rel}:{i + 1} [{name}]  {old}  =>  {new}")
sys.exit(0 if count and score >= min_score else 1)
PY
