import time, numpy as np, lpmpi, sys
x = np.ones(2, np.float32); y = np.empty_like(x)
for _ in range(20000): lpmpi.allreduce(x, y)
best = 1e9
for k in range(5):
    t = time.perf_counter()
    for _ in range(50000): lpmpi.allreduce(x, y)
    best = min(best, (time.perf_counter() - t) / 50000 * 1e6)
print(f"{sys.argv[1]} {best:.3f} us")
