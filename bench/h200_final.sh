#!/usr/bin/env bash
# The issue-6 check in one device call (lead, session 4; bench/README.md's run of 2026-11-30 22:41 UTC): the whole GPU
# check and the kernels' benchmark (ci/device.sh with BENCH=1, fla's stored times for the ratio column), fla's chunk
# kernel re-timed at dk 128 in the same process (bench/cuda_fla_compare.py), then one deliberate breakage of the [V,K]
# dk 33..64 decode dispatch, which the equivalence tests must catch (the source is restored).
# Run from the repository root on the GPU machine with the fla package in the ignored .fla/ (carry [".fla"]);
# results under $OUT (00_summary.log first; at most 8 files).
set -uo pipefail
export STATECUT_FLA_TIMES=.fla/fla_times.txt
BENCH=1 SKIP_SANITIZER=1 BUILD=build-gpu-device bash ci/device.sh > /dev/null 2>&1
S=$OUT/00_summary.log
FLA_K=128 PYTHONPATH=.fla timeout 120 python3 bench/cuda_fla_compare.py build-gpu-device/kernels/libstatecut_cuda_torch.so $OUT/fla128.txt > $OUT/fla_run.log 2>&1
echo "fla re-time rc=$?" >> $S
F=kernels/gated_delta_recurrent.cu; cp $F /tmp/rec_orig.cu
sed -i 's/launch_vk<T, SS, 4, 8, 8, 8>(a, s)/launch_vk<T, SS, 4, 8, 4, 8>(a, s)/' $F
grep -c "launch_vk<T, SS, 4, 8, 4, 8>(a, s)" $F >> $S
cmake --build build-gpu-device -j16 --target equiv_gated_delta_cuda > /tmp/brk_build.log 2>&1 || echo "breakage build failed" >> $S
timeout 100 build-gpu-device/tests/equiv_gated_delta_cuda > $OUT/breakage_decode.log 2>&1
echo "breakage (dk 33..64 [V,K] decode with 4 lanes a row): rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/breakage_decode.log | tr '\n' ' ')" >> $S
grep -E "^\[  FAILED  \] Equiv" $OUT/breakage_decode.log | head -8 >> $S
cp /tmp/rec_orig.cu $F
