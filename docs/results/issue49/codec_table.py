import json, sys, statistics as st
d = sys.argv[1]
runs = [json.load(open(f"{d}/{f}")) for f in ("run1.json", "run2_pinned.json", "run3.json")]
print("| instruction set | memcpy GB/s | bf16 encode | bf16 decode | int8 encode | int8 decode | int4 encode | int4 decode | int8 encode + decode, of one memcpy |")
print("|---|---|---|---|---|---|---|---|---|")
for isa in ("scalar", "avx2", "avx512"):
    rows = [r for run in runs for r in run if r["isa"] == isa]
    mc = [r["GBps"]["copy"] for r in rows]
    cells = [f"{st.median(mc):.1f} ({min(mc):.1f}-{max(mc):.1f})"]
    for k in ("bf16 encode", "bf16 decode", "int8 encode", "int8 decode", "int4 encode", "int4 decode"):
        g = [r["GBps"][k] for r in rows]; m = [r["of_memcpy"][k] for r in rows]
        cells.append(f"{st.median(g):.1f} ({min(m):.2f}-{max(m):.2f})")
    both = [1 / (1 / r["GBps"]["int8 encode"] + 1 / r["GBps"]["int8 decode"]) / r["GBps"]["copy"] for r in rows]
    cells.append(f"{st.median(both):.2f} ({min(both):.2f}-{max(both):.2f})")
    print(f"| {isa} | " + " | ".join(cells) + " |")
