"""The workloads Starling's suite adds to the anchors (benches/src/workloads.rs letters m, n, o),
run on Ray the same way, printed as the anchors' JSON lines. Needs the anchors' venv (ray,
numpy); benches/compare.sh runs it. Usage: python ray_extra.py [--run K] [--n-queued N]

- many_queued: N no-op tasks submitted before any is awaited (tasks/s). Starling queues
  1,000,000; Ray runs about 1,500 no-op tasks/s here, so the default N is 20,000 (the rate, not
  the count, is compared).
- scatter_gather: one 10 MB object put once (a numpy array: Ray's zero-copy case), read whole
  by 1,000 tasks (ms).
- shuffle: reducer j XORs the 1 MB block (i, j) of every mapper i pairwise; 64 x 64 blocks,
  columns submitted one after another (ms).
"""
import argparse
import json
import os
import time

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np
import ray

p = argparse.ArgumentParser()
p.add_argument("--run", type=int, default=0)
p.add_argument("--n-queued", type=int, default=20_000)
args = p.parse_args()

N_SCATTER = 1_000
SCATTER_BYTES = 10 * 1000 * 1000
WAYS = 64
BLOCK = 1000 * 1000


def emit(bench, value, unit, **extra):
    rec = {"bench": bench, "value": round(value, 3), "unit": unit, "engine": "ray", "run": args.run}
    rec.update(extra)
    print(json.dumps(rec), flush=True)


@ray.remote
def noop():
    return None


@ray.remote
def read_all(x, salt):
    return int(np.bitwise_xor.reduce(x.view(np.uint64))) ^ salt ^ len(x)


@ray.remote
def shuffle_block(i, j):
    return np.full(BLOCK, (i * WAYS + j) % 256, dtype=np.uint8)


@ray.remote
def xor_blocks(a, b):
    return np.bitwise_xor(a, b)


@ray.remote
def block_summary(a):
    return int(a[0]), len(a)


ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
ray.get([noop.remote() for _ in range(200)])

t0 = time.perf_counter()
refs = [noop.remote() for _ in range(args.n_queued)]
ray.get(refs)
dt = time.perf_counter() - t0
emit("many_queued", args.n_queued / dt, "tasks/s", n=args.n_queued)
del refs

shared = ray.put(np.arange(SCATTER_BYTES // 8, dtype=np.uint64))
t0 = time.perf_counter()
got = ray.get([read_all.remote(shared, s) for s in range(N_SCATTER)])
dt = time.perf_counter() - t0
assert len(got) == N_SCATTER
emit("scatter_gather", dt * 1e3, "ms", tasks=N_SCATTER, object_bytes=SCATTER_BYTES)

t0 = time.perf_counter()
results = []
for j in range(WAYS):
    level = [shuffle_block.remote(i, j) for i in range(WAYS)]
    while len(level) > 1:
        level = [xor_blocks.remote(level[k], level[k + 1]) for k in range(0, len(level), 2)]
    results.append(block_summary.remote(level[0]))
got = ray.get(results)
dt = time.perf_counter() - t0
for j, (byte, n) in enumerate(got):
    want = 0
    for i in range(WAYS):
        want ^= (i * WAYS + j) % 256
    assert byte == want and n == BLOCK, (j, byte, n)
emit("shuffle", dt * 1e3, "ms", ways=WAYS, block_bytes=BLOCK)
ray.shutdown()
