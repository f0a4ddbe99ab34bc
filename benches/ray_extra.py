"""The workloads Starling's suite adds to the anchors (benches/src/workloads.rs letters m, n, o and
the actor workloads of j the anchors lack), run on Ray the same way, printed as the anchors' JSON
lines. Needs the anchors' venv (ray, numpy); benches/compare.sh runs it.
Usage: python ray_extra.py [--run K] [--only mnoj] [--n-queued N] [--n-actors N]

- many_queued: N no-op tasks submitted before any is awaited (tasks/s). Starling queues
  1,000,000; Ray runs about 1,500 no-op tasks/s here, so the default N is 20,000 (the rate, not
  the count, is compared).
- scatter_gather: one 10 MB object put once (a numpy array: Ray's zero-copy case), read whole
  by 1,000 tasks (ms).
- shuffle: reducer j XORs the 1 MB block (i, j) of every mapper i pairwise; 64 x 64 blocks,
  columns submitted one after another (ms).
- actor_calls_n_n: 4 caller threads of the driver, each making 2,500 calls to 4 actors in turn,
  then one get (calls/s).
- actor_creation: actors of num_cpus=0 created in waves of 100, each wave's first calls awaited,
  then the wave killed (actors/s). Starling creates 1,000; a Ray actor is a Python process that
  takes most of a second of CPU to start here, so the default N is 200 (the rate is compared).
"""
import argparse
import json
import os
import threading
import time

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np
import ray

p = argparse.ArgumentParser()
p.add_argument("--run", type=int, default=0)
p.add_argument("--n-queued", type=int, default=20_000)
p.add_argument("--n-actors", type=int, default=200)
p.add_argument("--only", default="mnoj", help="workload letters: m n o, j (the actor ones)")
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


@ray.remote
class Tally:
    def __init__(self):
        self.n = 0

    def m(self):
        self.n += 1
        return self.n


ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
ray.get([noop.remote() for _ in range(200)])

if "m" in args.only:
    t0 = time.perf_counter()
    refs = [noop.remote() for _ in range(args.n_queued)]
    ray.get(refs)
    dt = time.perf_counter() - t0
    emit("many_queued", args.n_queued / dt, "tasks/s", n=args.n_queued)
    del refs

if "n" in args.only:
    shared = ray.put(np.arange(SCATTER_BYTES // 8, dtype=np.uint64))
    t0 = time.perf_counter()
    got = ray.get([read_all.remote(shared, s) for s in range(N_SCATTER)])
    dt = time.perf_counter() - t0
    assert len(got) == N_SCATTER
    emit("scatter_gather", dt * 1e3, "ms", tasks=N_SCATTER, object_bytes=SCATTER_BYTES)

if "o" in args.only:
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

if "j" in args.only:
    CALLERS = 4
    PER_CALLER = 2_500
    actors = [Tally.remote() for _ in range(CALLERS)]
    ray.get([a.m.remote() for a in actors])
    done = []

    def caller():
        done.append(len(ray.get([actors[k % CALLERS].m.remote() for k in range(PER_CALLER)])))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    assert sum(done) == CALLERS * PER_CALLER, done
    emit("actor_calls_n_n", CALLERS * PER_CALLER / dt, "calls/s", callers=CALLERS, actors=CALLERS,
         n=CALLERS * PER_CALLER)
    for a in actors:
        ray.kill(a)

    WAVE = 100
    t0 = time.perf_counter()
    for _ in range(max(1, args.n_actors // WAVE)):
        wave = [Tally.options(num_cpus=0).remote() for _ in range(WAVE)]
        firsts = ray.get([a.m.remote() for a in wave])
        assert all(n == 1 for n in firsts), firsts
        for a in wave:
            ray.kill(a)
    dt = time.perf_counter() - t0
    n = max(1, args.n_actors // WAVE) * WAVE
    emit("actor_creation", n / dt, "actors/s", n=n, wave=WAVE)

ray.shutdown()
