"""Prints the wgmma m64nNk16 bf16 wrappers, N = 8..256, that kernels/wgmma_bf16.cuh holds between its header and
footer (an inline-asm operand list of N/2 accumulators cannot be written by a template). Regenerate with
  python3 tools/codegen/wgmma_bf16.py   and paste over the functions of kernels/wgmma_bf16.cuh."""
for n in (8, 16, 32, 64, 128, 256):
    r = n // 2
    regs = ", ".join(f"%{i}" for i in range(r))
    print(f"__device__ __forceinline__ void wgmma_n{n}(float* d, uint64_t a, uint64_t b) {{")
    print("  asm volatile(")
    print(f'      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"')
    print(f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{"')
    # split operand list into lines
    chunks = [", ".join(f"%{i}" for i in range(j, min(j + 16, r))) for j in range(0, r, 16)]
    for ci, c in enumerate(chunks):
        sep = ", " if ci < len(chunks) - 1 else ""
        print(f'      "{c}{sep}"')
    print(f'      "}}, %{r}, %{r+1}, p, 1, 1, 0, 0;\\n}}\\n"')
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(r))
    # wrap outs
    items = [f'"+f"(d[{i}])' for i in range(r)]
    lines = [", ".join(items[j:j+8]) for j in range(0, r, 8)]
    print("      : " + (",\n        ".join(lines)))
    print('      : "l"(a), "l"(b));')
    print("}")
    print()
