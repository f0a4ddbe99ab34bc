//! The workload suite: the workloads of the Ray/Dask anchor benchmarks (`shared/bench/ray`,
//! `common.py`), run on Starling, printed as the same JSON lines:
//! `{"bench": .., "value": .., "unit": .., "engine": "starling-inproc", ..}`.
//!
//! ```text
//! cargo run --release -p starling-benches --bin workloads -- [--only abcdefghik] [--threads 2]
//! ```
//! Letters follow the anchors: a noop_tasks_async, b noop_task_sync_latency, c fanout_compute,
//! d put_get_small, e put_get_large, f pass_large_arg, g chain, h tree_reduce,
//! i startup/shutdown, j actor calls (1:1 sync and async, 4 callers x 4 actors) and actor
//! creation, k memory; not in the default set: m many_queued (1,000,000 tasks queued at
//! once), n scatter_gather (1,000 tasks reading one shared 10 MB object), o shuffle (a 64 x 64
//! all-to-all exchange of 1 MB blocks).

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Parser;
use serde_json::{json, Value};
use starling::{Bytes, Config};

const N_NOOP_ASYNC: usize = 10_000;
const N_NOOP_SYNC: usize = 1_000;
const N_FANOUT: usize = 200;
const FANOUT_MS: f64 = 10.0;
const N_SMALL: usize = 10_000;
const SMALL_BYTES: usize = 100;
const LARGE_BYTES: usize = 100 * 1000 * 1000;
const N_LARGE_ITERS: usize = 10;
const N_CHAIN: usize = 1_000;
const N_TREE_LEAVES: usize = 4_096;
const N_SCATTER: usize = 1_000;
const SCATTER_BYTES: usize = 10 * 1000 * 1000;
const SHUFFLE_WAYS: u64 = 64;
const SHUFFLE_BLOCK: usize = 1000 * 1000;
const N_ACTOR_SYNC: usize = 1_000;
const N_ACTOR_ASYNC: usize = 10_000;
const N_ACTOR_CALLERS: usize = 4;
const N_ACTOR_CREATE: usize = 1_000;

/// The anchors' actor: `m()` adds one to its count.
pub struct Tally {
    n: u64,
}

#[starling::actor]
impl Tally {
    fn new() -> Self {
        Tally { n: 0 }
    }

    fn m(&mut self) -> u64 {
        self.n += 1;
        self.n
    }
}

#[starling::remote]
fn noop() {}

#[starling::remote]
fn spin_task(ms: f64) {
    let end = Instant::now() + Duration::from_secs_f64(ms / 1e3);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

#[starling::remote]
fn inc(x: u64) -> u64 {
    x + 1
}

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

#[starling::remote]
fn length(x: Bytes) -> u64 {
    x.len() as u64
}

/// Reads every byte of `x` (so the object really reaches the task): a checksum.
#[starling::remote]
fn read_all(x: Bytes, salt: u64) -> u64 {
    let words = x.chunks_exact(8).fold(salt, |h, w| {
        h.rotate_left(5) ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))
    });
    words ^ x.len() as u64
}

/// Shuffle map output: the block mapper `i` sends to reducer `j` (1 MB, filled with a byte of
/// `(i, j)`).
#[starling::remote]
fn shuffle_block(i: u64, j: u64) -> Bytes {
    Bytes::new(vec![(i * SHUFFLE_WAYS + j) as u8; SHUFFLE_BLOCK])
}

/// Shuffle reduce step: byte-wise XOR of two blocks.
#[starling::remote]
fn xor_blocks(a: Bytes, b: Bytes) -> Bytes {
    Bytes::new(a.iter().zip(b.iter()).map(|(x, y)| x ^ y).collect())
}

/// A block's first byte and length, checked by the driver.
#[starling::remote]
fn block_summary(a: Bytes) -> (u8, u64) {
    (a.first().copied().unwrap_or(0), a.len() as u64)
}

#[derive(Parser)]
#[command(about = "Starling's workload suite, printed as JSON lines")]
struct Args {
    /// Workload letters to run (see the module docs).
    #[arg(long, default_value = "abcdefghik")]
    only: String,
    /// Executor threads (the anchors use num_cpus=2).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Round trips in noop_task_sync_latency (more for profiling).
    #[arg(long, default_value_t = N_NOOP_SYNC)]
    n_sync: usize,
    /// Tasks in noop_tasks_async (more for profiling).
    #[arg(long, default_value_t = N_NOOP_ASYNC)]
    n_async: usize,
    /// Where to run: `inproc` (in-process runtime), `local` (a local cluster with `--threads`
    /// worker processes), or `cluster` (the head at `--head`).
    #[arg(long, default_value = "inproc")]
    engine: String,
    /// The head of a running cluster, for `--engine cluster`.
    #[arg(long)]
    head: Option<String>,
    /// Run number, copied into every line.
    #[arg(long, default_value_t = 0)]
    run: u32,
    /// Calls in actor_calls_sync (more for profiling).
    #[arg(long, default_value_t = N_ACTOR_SYNC)]
    n_actor_sync: usize,
    /// Tasks queued at once in many_queued.
    #[arg(long, default_value_t = 1_000_000)]
    n_queued: usize,
    /// Memory for the scheduler's task events, in bytes (default: the runtime's, 16 MiB; 0
    /// keeps none: what recording them costs, side by side).
    #[arg(long)]
    task_events: Option<usize>,
}

struct Emitter {
    engine: &'static str,
    run: u32,
}

impl Emitter {
    fn emit(&self, bench: &str, value: f64, unit: &str, extra: Value) {
        let mut rec = json!({
            "bench": bench,
            "value": (value * 1000.0).round() / 1000.0,
            "unit": unit,
            "engine": self.engine,
            "run": self.run,
        });
        if let (Value::Object(m), Value::Object(x)) = (&mut rec, extra) {
            m.extend(x);
        }
        println!("{rec}");
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let k = (xs.len() - 1) as f64 * p / 100.0;
    let f = k as usize;
    let c = (f + 1).min(xs.len() - 1);
    xs[f] + (xs[c] - xs[f]) * (k - f as f64)
}

/// Resident memory of `pid` in MiB (0 if it is gone).
fn rss_of(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Peak resident memory of this process in MiB (`VmHWM`).
fn peak_rss() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// This process and all its descendants (a local cluster's worker processes), with RSS.
fn process_tree_rss() -> (f64, usize) {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent pid is the second field after the parenthesized command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![std::process::id()];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    (tree.iter().map(|p| rss_of(*p)).sum(), tree.len())
}

/// Workload j: one actor called 1,000 times, each call awaited; 10,000 calls then one get;
/// 4 caller threads each calling 4 actors in turn (10,000 calls in all); 1,000 actors of
/// `num_cpus = 0` created, each answering its first call (actors/s), in waves of 100 killed after
/// each wave so that the process count stays bounded on every engine.
fn actor_workloads(e: &Emitter, n_sync: usize) -> Result<()> {
    let a = Tally::remote();
    starling::get(&a.m())?;
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(n_sync);
    for _ in 0..n_sync {
        let t = Instant::now();
        starling::get(&a.m())?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let dt = t0.elapsed().as_secs_f64();
    e.emit(
        "actor_calls_sync",
        n_sync as f64 / dt,
        "calls/s",
        json!({"n": n_sync, "median_us": median(&mut lat), "p99_us": percentile(&mut lat, 99.0)}),
    );
    let t0 = Instant::now();
    let refs: Vec<_> = (0..N_ACTOR_ASYNC).map(|_| a.m()).collect();
    let got = starling::get_all(&refs)?;
    let dt = t0.elapsed().as_secs_f64();
    ensure!(
        got.windows(2).all(|w| w[1] == w[0] + 1),
        "actor calls ran out of order"
    );
    e.emit(
        "actor_calls_async",
        N_ACTOR_ASYNC as f64 / dt,
        "calls/s",
        json!({"n": N_ACTOR_ASYNC}),
    );
    starling::kill(&a, true)?;

    let actors: Vec<_> = (0..N_ACTOR_CALLERS).map(|_| Tally::remote()).collect();
    starling::get_all(&actors.iter().map(|a| a.m()).collect::<Vec<_>>())?;
    let per_caller = N_ACTOR_ASYNC / N_ACTOR_CALLERS;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let callers: Vec<_> = (0..N_ACTOR_CALLERS)
            .map(|_| {
                s.spawn(|| {
                    let refs: Vec<_> = (0..per_caller)
                        .map(|k| actors[k % actors.len()].m())
                        .collect();
                    starling::get_all(&refs).map(|v| v.len())
                })
            })
            .collect();
        callers
            .into_iter()
            .map(|c| c.join().expect("a caller thread panicked"))
            .sum::<Result<usize, _>>()
    })?;
    let dt = t0.elapsed().as_secs_f64();
    e.emit(
        "actor_calls_n_n",
        (per_caller * N_ACTOR_CALLERS) as f64 / dt,
        "calls/s",
        json!({"callers": N_ACTOR_CALLERS, "actors": actors.len(), "n": per_caller * N_ACTOR_CALLERS}),
    );
    for a in &actors {
        starling::kill(a, true)?;
    }

    let wave = 100;
    let t0 = Instant::now();
    for _ in 0..N_ACTOR_CREATE / wave {
        let actors: Vec<_> = (0..wave)
            .map(|_| Tally::options().num_cpus(0.0).remote())
            .collect();
        let firsts = starling::get_all(&actors.iter().map(|a| a.m()).collect::<Vec<_>>())?;
        ensure!(firsts.iter().all(|n| *n == 1), "a new actor had state");
        for a in &actors {
            starling::kill(a, true)?;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    e.emit(
        "actor_creation",
        N_ACTOR_CREATE as f64 / dt,
        "actors/s",
        json!({"n": N_ACTOR_CREATE, "wave": wave}),
    );
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let only = |c: char| args.only.contains(c);
    let (engine, config) = match args.engine.as_str() {
        "inproc" => (
            "starling-inproc",
            Config::in_process().threads(args.threads),
        ),
        "local" => ("starling-local", Config::default().threads(args.threads)),
        "cluster" => {
            let head = args
                .head
                .clone()
                .context("--engine cluster needs --head ADDR")?;
            ("starling-cluster", Config::connect(head))
        }
        other => anyhow::bail!("unknown engine `{other}`: use inproc, local or cluster"),
    };
    let config = match args.task_events {
        Some(bytes) => config.task_events(bytes),
        None => config,
    };
    let e = Emitter {
        engine,
        run: args.run,
    };

    let t0 = Instant::now();
    let rt = starling::Runtime::start(config).context("start the runtime")?;
    let _guard = rt.enter();
    let t_init = t0.elapsed();
    starling::get(&noop::remote())?;
    let t_first = t0.elapsed();
    if only('i') {
        e.emit("startup_init", t_init.as_secs_f64() * 1e3, "ms", json!({}));
        e.emit(
            "startup_to_first_result",
            t_first.as_secs_f64() * 1e3,
            "ms",
            json!({}),
        );
    }
    if only('k') {
        std::thread::sleep(Duration::from_millis(500));
        let (rss, procs) = process_tree_rss();
        e.emit(
            "memory_idle_rss_total",
            rss,
            "MiB",
            json!({"what": "all engine processes: the driver (with the head and node agent of a local cluster) and its worker processes", "nproc": procs}),
        );
    }

    // Warm-up, as the anchors do.
    starling::get_all(&(0..200).map(|_| noop::remote()).collect::<Vec<_>>())?;
    starling::get_all(&(0..4).map(|_| spin_task::remote(1.0)).collect::<Vec<_>>())?;

    if only('a') {
        let t0 = Instant::now();
        let refs: Vec<_> = (0..args.n_async).map(|_| noop::remote()).collect();
        let t_sub = t0.elapsed();
        starling::get_all(&refs)?;
        let dt = t0.elapsed();
        e.emit(
            "noop_tasks_async",
            args.n_async as f64 / dt.as_secs_f64(),
            "tasks/s",
            json!({"n": args.n_async}),
        );
        e.emit(
            "noop_tasks_async_submit_only",
            args.n_async as f64 / t_sub.as_secs_f64(),
            "tasks/s",
            json!({}),
        );
    }

    if only('b') {
        let mut lat: Vec<f64> = (0..args.n_sync)
            .map(|_| {
                let t0 = Instant::now();
                starling::get(&noop::remote()).map(|_| t0.elapsed().as_secs_f64() * 1e6)
            })
            .collect::<Result<_, _>>()?;
        e.emit(
            "noop_task_sync_latency_median",
            median(&mut lat),
            "us",
            json!({"n": args.n_sync}),
        );
        e.emit(
            "noop_task_sync_latency_p99",
            percentile(&mut lat, 99.0),
            "us",
            json!({"n": args.n_sync}),
        );
    }

    if only('c') {
        let t0 = Instant::now();
        let refs: Vec<_> = (0..N_FANOUT)
            .map(|_| spin_task::options().num_cpus(1.0).remote(FANOUT_MS))
            .collect();
        starling::get_all(&refs)?;
        let dt = t0.elapsed().as_secs_f64();
        let ideal = N_FANOUT as f64 * FANOUT_MS / 1e3 / args.threads as f64;
        e.emit(
            "fanout_compute_wall",
            dt * 1e3,
            "ms",
            json!({"ideal_ms": ideal * 1e3}),
        );
        e.emit(
            "fanout_compute_efficiency",
            100.0 * ideal / dt,
            "%",
            json!({}),
        );
    }

    if only('d') {
        let objs: Vec<Bytes> = (0..N_SMALL as u64)
            .map(|i| {
                let mut v: Vec<u8> = i.to_le_bytes().repeat(SMALL_BYTES / 8);
                v.resize(SMALL_BYTES, 0);
                Bytes::new(v)
            })
            .collect();
        let t0 = Instant::now();
        let refs: Vec<_> = objs
            .iter()
            .map(|o| starling::put(o.clone()))
            .collect::<Result<_, _>>()?;
        let t_put = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let out = starling::get_all(&refs)?;
        let t_get = t1.elapsed().as_secs_f64();
        ensure!(
            out[123] == objs[123],
            "put/get round trip changed the value"
        );
        let t2 = Instant::now();
        for r in &refs {
            starling::get(r)?;
        }
        let t_seq = t2.elapsed().as_secs_f64();
        e.emit(
            "put_get_small",
            N_SMALL as f64 / (t_put + t_get),
            "objects/s (put+batch get)",
            json!({}),
        );
        e.emit("put_small", N_SMALL as f64 / t_put, "ops/s", json!({}));
        e.emit(
            "get_small_batch",
            N_SMALL as f64 / t_get,
            "ops/s",
            json!({}),
        );
        e.emit("get_small_seq", N_SMALL as f64 / t_seq, "ops/s", json!({}));
    }

    let needs_blob = only('e') || only('f');
    let blob = if needs_blob {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let v: Vec<u8> = (0..LARGE_BYTES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        Bytes::new(v)
    } else {
        Bytes::default()
    };

    if only('e') {
        let mut warm = Vec::new();
        let mut fresh = Vec::new();
        let mut dst = blob.to_vec();
        for _ in 0..N_LARGE_ITERS {
            let t0 = Instant::now();
            dst.copy_from_slice(&blob);
            warm.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            let d = blob.to_vec();
            fresh.push(t0.elapsed().as_secs_f64());
            drop(d);
        }
        drop(dst);
        let gb = LARGE_BYTES as f64 / 1e9;
        e.emit(
            "baseline_memcpy_100MB_warm",
            gb / median(&mut warm),
            "GB/s",
            json!({}),
        );
        e.emit(
            "baseline_memcpy_100MB_fresh",
            gb / median(&mut fresh),
            "GB/s",
            json!({}),
        );
        drop(starling::get(&starling::put(blob.clone())?)?); // warm-up
        let (mut tp, mut tg) = (Vec::new(), Vec::new());
        for _ in 0..N_LARGE_ITERS {
            // The anchors put an existing buffer; cloning ours is not part of the put.
            let value = blob.clone();
            let t0 = Instant::now();
            let r = starling::put(value)?;
            let t1 = Instant::now();
            let v = starling::get(&r)?;
            let t2 = Instant::now();
            ensure!(
                v.len() == LARGE_BYTES,
                "large object came back with {} bytes",
                v.len()
            );
            tp.push((t1 - t0).as_secs_f64());
            tg.push((t2 - t1).as_secs_f64());
        }
        let total: f64 = tp.iter().sum::<f64>() + tg.iter().sum::<f64>();
        e.emit(
            "put_get_large_bytes",
            gb * N_LARGE_ITERS as f64 / total,
            "GB/s (put+get)",
            json!({}),
        );
        e.emit("put_large_bytes", gb / median(&mut tp), "GB/s", json!({}));
        e.emit("get_large_bytes", gb / median(&mut tg), "GB/s", json!({}));
    }

    if only('f') {
        let r = starling::put(blob.clone())?;
        ensure!(
            starling::get(&length::remote(&r))? == LARGE_BYTES as u64,
            "first call"
        );
        let mut ts = Vec::new();
        for _ in 0..N_LARGE_ITERS {
            let t0 = Instant::now();
            ensure!(
                starling::get(&length::remote(&r))? == LARGE_BYTES as u64,
                "length"
            );
            ts.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        let mean = ts.iter().sum::<f64>() / ts.len() as f64;
        e.emit(
            "pass_large_arg_bytes",
            mean,
            "ms/call",
            json!({"median_ms": median(&mut ts)}),
        );
    }
    drop(blob);

    if only('g') {
        let t0 = Instant::now();
        let mut r = inc::remote(0);
        for _ in 0..N_CHAIN - 1 {
            r = inc::remote(r);
        }
        let v = starling::get(&r)?;
        let dt = t0.elapsed().as_secs_f64();
        ensure!(v == N_CHAIN as u64, "chain computed {v}");
        e.emit(
            "chain",
            N_CHAIN as f64 / dt,
            "tasks/s",
            json!({"wall_ms": dt * 1e3}),
        );
    }

    if only('h') {
        let t0 = Instant::now();
        let mut level: Vec<_> = (0..N_TREE_LEAVES as u64)
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|p| add::remote(p[0], p[1]))
            .collect();
        while level.len() > 1 {
            level = level.chunks(2).map(|p| add::remote(&p[0], &p[1])).collect();
        }
        let v = starling::get(&level[0])?;
        let dt = t0.elapsed().as_secs_f64();
        let n = N_TREE_LEAVES as u64;
        ensure!(v == n * (n - 1) / 2, "tree_reduce computed {v}");
        e.emit(
            "tree_reduce",
            dt * 1e3,
            "ms",
            json!({"tasks": N_TREE_LEAVES - 1}),
        );
    }

    if only('j') {
        actor_workloads(&e, args.n_actor_sync)?;
    }

    if only('n') {
        // One 10 MB object, put once, read whole by 1,000 tasks.
        let shared = starling::put(Bytes::new(
            (0..SCATTER_BYTES).map(|k| (k % 251) as u8).collect(),
        ))?;
        let want: Vec<u64> = {
            let local = starling::get(&shared)?;
            (0..N_SCATTER as u64)
                .map(|s| read_all(local.clone(), s))
                .collect()
        };
        let t0 = Instant::now();
        let refs: Vec<_> = (0..N_SCATTER as u64)
            .map(|s| read_all::remote(&shared, s))
            .collect();
        let got = starling::get_all(&refs)?;
        let dt = t0.elapsed().as_secs_f64();
        ensure!(got == want, "scatter_gather read other bytes");
        e.emit(
            "scatter_gather",
            dt * 1e3,
            "ms",
            json!({"tasks": N_SCATTER, "object_bytes": SCATTER_BYTES, "tasks_per_s": N_SCATTER as f64 / dt}),
        );
    }

    if only('o') {
        // Reducer j gets block (i, j) from every mapper i and XORs them pairwise. Columns are
        // submitted one after another, so finished blocks are freed while later ones are made.
        let t0 = Instant::now();
        let mut results = Vec::with_capacity(SHUFFLE_WAYS as usize);
        let mut tasks = 0usize;
        for j in 0..SHUFFLE_WAYS {
            let mut level: Vec<_> = (0..SHUFFLE_WAYS)
                .map(|i| shuffle_block::remote(i, j))
                .collect();
            tasks += level.len();
            while level.len() > 1 {
                level = level
                    .chunks(2)
                    .map(|p| xor_blocks::remote(&p[0], &p[1]))
                    .collect();
                tasks += level.len();
            }
            results.push(block_summary::remote(&level[0]));
            tasks += 1;
        }
        let got = starling::get_all(&results)?;
        let dt = t0.elapsed().as_secs_f64();
        for (j, (byte, len)) in got.iter().enumerate() {
            let want = (0..SHUFFLE_WAYS).fold(0u8, |x, i| x ^ (i * SHUFFLE_WAYS + j as u64) as u8);
            ensure!(
                *byte == want && *len == SHUFFLE_BLOCK as u64,
                "shuffle reducer {j} got ({byte}, {len})"
            );
        }
        let moved = (SHUFFLE_WAYS * SHUFFLE_WAYS) as f64 * SHUFFLE_BLOCK as f64;
        e.emit(
            "shuffle",
            dt * 1e3,
            "ms",
            json!({"ways": SHUFFLE_WAYS, "block_bytes": SHUFFLE_BLOCK, "tasks": tasks, "GB_per_s": moved / 1e9 / dt}),
        );
    }

    if only('m') {
        // Everything is submitted before anything is awaited: the head queues them all. With
        // `--engine local` the head lives in this process, so this process's peak memory bounds
        // the head's (it also holds the driver's refs and results).
        let before = rss_of(std::process::id());
        let t0 = Instant::now();
        let refs: Vec<_> = (0..args.n_queued).map(|_| noop::remote()).collect();
        let t_sub = t0.elapsed();
        let queued_rss = rss_of(std::process::id());
        starling::get_all(&refs)?;
        let dt = t0.elapsed();
        drop(refs);
        let peak = peak_rss();
        let n = args.n_queued as f64;
        e.emit(
            "many_queued",
            n / dt.as_secs_f64(),
            "tasks/s",
            json!({
                "n": args.n_queued,
                "submit_s": t_sub.as_secs_f64(),
                "peak_rss_mib": peak,
                "bytes_per_queued_task": (peak - before).max(0.0) * 1048576.0 / n,
                "rss_when_all_queued_mib": queued_rss,
                "what": "peak RSS of the driver process (with the head and node agent of a local cluster)",
            }),
        );
        e.emit(
            "many_queued_peak_rss",
            peak,
            "MiB",
            json!({"n": args.n_queued, "what": "peak RSS of the driver process (with the head and node agent of a local cluster)"}),
        );
    }

    let t0 = Instant::now();
    rt.shutdown();
    if only('i') {
        e.emit(
            "shutdown",
            t0.elapsed().as_secs_f64() * 1e3,
            "ms",
            json!({}),
        );
    }
    Ok(())
}
