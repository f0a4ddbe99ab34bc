//! A large object crossing nodes: `produce`, pinned to node A by node affinity, makes a 100 MB
//! `starling::Bytes` (it stays in A's object store); `consume`, pinned to node B, takes it as
//! its argument, so B's worker fetches it from A's object service, and returns its length and
//! checksum. The driver never touches the 100 MB. Prints `key=value` lines:
//!
//! ```text
//! producer_node=1
//! consumer_node=2
//! len=100000000
//! checksum_ok=true
//! ```
//!
//! A and B are the two lowest-numbered alive nodes of `starling::nodes()` (the same node when
//! there is only one). Connects to the head in `STARLING_HEAD`, or starts a local cluster when
//! it is unset: `STARLING_HEAD=127.0.0.1:6380 cargo run --example cluster_big_object`.

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// What `consume` saw.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    /// The node `consume` ran on.
    node: u64,
    /// The node `produce` ran on (it writes it into the first 8 bytes).
    producer: u64,
    len: u64,
    checksum: u64,
}

/// Word `k` of the object: the producer's node id first, then a fixed pseudo-random sequence.
fn word(k: u64, producer: u64) -> u64 {
    if k == 0 {
        producer
    } else {
        k.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
    }
}

/// An order-sensitive checksum of 64-bit words (FNV-1a over words).
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x0000_0100_0000_01b3)
}

const SEED: u64 = 0xcbf2_9ce4_8422_2325;

#[starling::remote]
fn produce(len: u64) -> starling::Bytes {
    let me = starling_examples::this_node();
    let mut v = Vec::with_capacity(len as usize);
    for k in 0..len / 8 {
        v.extend_from_slice(&word(k, me).to_le_bytes());
    }
    starling::Bytes::from(v)
}

#[starling::remote]
fn consume(data: starling::Bytes) -> Report {
    let mut checksum = SEED;
    for chunk in data.chunks_exact(8) {
        checksum = mix(
            checksum,
            u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
        );
    }
    let producer = data
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    Report {
        node: starling_examples::this_node(),
        producer,
        len: data.len() as u64,
        checksum,
    }
}

fn main() -> anyhow::Result<()> {
    let len: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .context("the argument is the object's size in bytes")?
        .unwrap_or(100_000_000);
    anyhow::ensure!(len / 8 * 8 == len, "the size must be a multiple of 8");
    starling_examples::connect()?;
    let mut alive: Vec<starling::NodeId> = starling::nodes()
        .context("list the nodes")?
        .into_iter()
        .filter(|n| n.alive)
        .map(|n| n.id)
        .collect();
    alive.sort();
    let (a, b) = match alive[..] {
        [] => anyhow::bail!("the cluster has no alive node"),
        [only] => {
            eprintln!("only one node ({only}): producing and consuming on it");
            (only, only)
        }
        [a, b, ..] => (a, b),
    };
    let object = produce::options().node_affinity(a, false).remote(len);
    let report = starling::get(&consume::options().node_affinity(b, false).remote(object))
        .context("get the consumer's report")?;
    let expected = (0..len / 8).fold(SEED, |h, k| mix(h, word(k, a.as_u64())));
    println!("producer_node={}", report.producer);
    println!("consumer_node={}", report.node);
    println!("len={}", report.len);
    println!("checksum_ok={}", report.checksum == expected);
    Ok(())
}
