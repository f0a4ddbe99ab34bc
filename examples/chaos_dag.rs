//! A DAG of small and large tasks whose every result is checked exactly: the payload of the
//! chaos test, which kills node agents and worker processes while it runs.
//!
//! Each round `r` of `--rounds` has `--width` W blocks: `block(r, i)` makes `--kib` KiB of
//! seeded bytes (large enough to be stored on its node, not inline at the head); `mix(a, b)`
//! combines block `i` with block `i + 1 (mod W)` into another large object; `digest` reduces each
//! mixed block to a `u64`, and a binary tree of `add`s sums the round. That is 4W - 1 tasks per
//! round, 2W of them making large objects. At most `--window` rounds are in flight; the driver
//! holds only the round sums, so the large objects are freed as the DAG moves on (their lineage
//! stays while a sum that depends on them is still being made).
//!
//! At the end the driver computes every round's sum itself, by calling the same functions
//! directly, and prints `key=value` lines:
//!
//! ```text
//! tasks=19900
//! rounds=100
//! mismatches=0
//! ```
//!
//! plus `round <r> done at <ms> ms` progress lines on stdout as rounds complete (milliseconds
//! since the Unix epoch, so a test can set them against the failures it caused), and with
//! `--hold-round R --hold-file F` a pause in round R for a test to kill the node that holds
//! its blocks (see [`Hold`]). Connects to the head in `STARLING_HEAD`, or starts a local
//! cluster.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use starling::{Bytes, ObjectRef};

/// `n` bytes of a xorshift stream seeded by `(round, index)`.
#[starling::remote]
fn block(round: u64, index: u64, n: u64) -> Bytes {
    let mut x = (round << 32 | index).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(n as usize);
    while (v.len() as u64) < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n as usize);
    Bytes::from(v)
}

/// Byte-wise combination of two blocks (the first's length).
#[starling::remote]
fn mix(a: Bytes, b: Bytes) -> Bytes {
    let v: Vec<u8> = a
        .iter()
        .zip(b.iter().cycle())
        .enumerate()
        .map(|(k, (x, y))| x.wrapping_mul(31).wrapping_add(*y) ^ (k as u8))
        .collect();
    Bytes::from(v)
}

/// An order-sensitive checksum (FNV-1a).
#[starling::remote]
fn digest(a: Bytes) -> u64 {
    a.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a.wrapping_add(b)
}

/// Where and how a round is held (`--hold-round R --hold-file F`): its blocks are made on the
/// highest-numbered node (soft affinity), the driver waits until they all exist, prints
/// `held round R on node N` and waits for `F` to exist before it submits the rest of the round.
/// A test that kills node N in between knows the round's blocks are lost and must be remade.
struct Hold {
    round: u64,
    file: std::path::PathBuf,
}

/// Submits round `r` and returns its sum and the number of tasks submitted.
fn submit_round(
    r: u64,
    width: u64,
    bytes: u64,
    hold: Option<&Hold>,
) -> anyhow::Result<(ObjectRef<u64>, u64)> {
    let blocks: Vec<ObjectRef<Bytes>> = match hold.filter(|h| h.round == r) {
        None => (0..width).map(|i| block::remote(r, i, bytes)).collect(),
        Some(h) => {
            let node = starling::nodes()?
                .into_iter()
                .filter(|n| n.alive)
                .map(|n| n.id)
                .max()
                .context("no alive node")?;
            let blocks: Vec<ObjectRef<Bytes>> = (0..width)
                .map(|i| {
                    block::options()
                        .node_affinity(node, true)
                        .remote(r, i, bytes)
                })
                .collect();
            let (ready, _) = starling::wait(&blocks, blocks.len(), Some(Duration::from_secs(120)))?;
            ensure!(
                ready.len() == blocks.len(),
                "round {r}'s blocks were not made in time"
            );
            println!("held round {r} on node {node}");
            let deadline = Instant::now() + Duration::from_secs(120);
            while !h.file.exists() {
                ensure!(
                    Instant::now() < deadline,
                    "{} never appeared",
                    h.file.display()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            blocks
        }
    };
    let mut level: Vec<ObjectRef<u64>> = (0..width as usize)
        .map(|i| {
            let m = mix::remote(&blocks[i], &blocks[(i + 1) % width as usize]);
            digest::remote(&m)
        })
        .collect();
    let mut tasks = 3 * width;
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        for pair in level.chunks(2) {
            match pair {
                [a, b] => {
                    next.push(add::remote(a, b));
                    tasks += 1;
                }
                [a] => next.push(a.clone()),
                _ => unreachable!(),
            }
        }
        level = next;
    }
    Ok((level.pop().expect("width >= 1"), tasks))
}

/// Round `r`'s sum, computed here by calling the functions directly.
fn expected(r: u64, width: u64, bytes: u64) -> u64 {
    let blocks: Vec<Bytes> = (0..width).map(|i| block(r, i, bytes)).collect();
    (0..width as usize)
        .map(|i| {
            digest(mix(
                blocks[i].clone(),
                blocks[(i + 1) % width as usize].clone(),
            ))
        })
        .fold(0, u64::wrapping_add)
}

fn flag(args: &[String], name: &str, default: u64) -> anyhow::Result<u64> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{name} needs a number")),
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = flag(&args, "--rounds", 100)?;
    let width = flag(&args, "--width", 50)?.max(1);
    let bytes = flag(&args, "--kib", 128)? * 1024;
    let window = flag(&args, "--window", 4)?.max(1) as usize;
    let hold = match args.iter().position(|a| a == "--hold-file") {
        None => None,
        Some(i) => Some(Hold {
            round: flag(&args, "--hold-round", 0)?,
            file: args.get(i + 1).context("--hold-file needs a path")?.into(),
        }),
    };
    let _rt = starling_examples::connect()?;

    let start = Instant::now();
    let mut in_flight: VecDeque<(u64, ObjectRef<u64>)> = VecDeque::new();
    let mut sums = Vec::with_capacity(rounds as usize);
    let mut tasks = 0;
    let mut next = 0;
    while sums.len() < rounds as usize {
        while next < rounds && in_flight.len() < window {
            let (sum, n) = submit_round(next, width, bytes, hold.as_ref())?;
            tasks += n;
            in_flight.push_back((next, sum));
            next += 1;
        }
        let (r, sum) = in_flight.pop_front().expect("a round in flight");
        let value = starling::get_timeout(&sum, Duration::from_secs(300))
            .with_context(|| format!("round {r}"))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        println!("round {r} done at {} ms", now.as_millis());
        sums.push(value);
    }
    let elapsed = start.elapsed();
    let mismatches = sums
        .iter()
        .enumerate()
        .filter(|(r, s)| **s != expected(*r as u64, width, bytes))
        .count();
    println!("tasks={tasks}");
    println!("rounds={rounds}");
    println!("seconds={:.2}", elapsed.as_secs_f64());
    println!("mismatches={mismatches}");
    ensure!(mismatches == 0, "{mismatches} round(s) summed wrongly");
    Ok(())
}
