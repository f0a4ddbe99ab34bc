//! A node is lost while it holds the only copy of an object: the head makes it again from its
//! lineage. The payload of a multi-process test.
//!
//! `make` (1 MiB of seeded bytes) and `grow` (a transformation of it) run, preferably on the
//! second node (soft affinity); the driver keeps only `grow`'s result, so `make`'s is freed and
//! only its lineage stays. Once `grow`'s result is stored on a node B (it starts with B's id),
//! the payload prints `stored_on=<B>` and waits for the file named by `--go`; the test kills B's
//! agent and creates the file. Then `check`, pinned to another node A, reads `grow`'s result: B
//! is gone, so `make` and `grow` run again (on A) before `check` does. Prints `key=value` lines:
//!
//! ```text
//! stored_on=N2
//! remade_on=N1
//! checked_on=N1
//! checksum_ok=true
//! recovery_ms=412
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use starling::{Bytes, NodeId};

const LEN: usize = 1 << 20;

fn stream(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The node id first, then `len` seeded bytes.
#[starling::remote]
fn make(seed: u64) -> Bytes {
    let mut v = starling_examples::this_node().to_le_bytes().to_vec();
    v.extend(stream(seed, LEN));
    Bytes::from(v)
}

/// This node's id first, then `a`'s bytes reversed and shifted.
#[starling::remote]
fn grow(a: Bytes) -> Bytes {
    let mut v = starling_examples::this_node().to_le_bytes().to_vec();
    v.extend(a[8..].iter().rev().map(|b| b.wrapping_add(1)));
    Bytes::from(v)
}

/// `(node that made b, checksum of b's payload, this node)`.
#[starling::remote]
fn check(b: Bytes) -> (u64, u64, u64) {
    let made_on = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    (made_on, fnv(&b[8..]), starling_examples::this_node())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let go = args
        .iter()
        .position(|a| a == "--go")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .context("usage: cluster_lineage --go FILE")?;
    let _rt = starling_examples::connect()?;
    let all = starling::nodes()?;
    let alive: Vec<NodeId> = all.iter().filter(|n| n.alive).map(|n| n.id).collect();
    ensure!(alive.len() >= 2, "needs two nodes, found {}", alive.len());

    let made = make::options().node_affinity(alive[1], true).remote(7);
    let grown = grow::options().node_affinity(alive[1], true).remote(&made);
    drop(made);
    // Where `grow` ran (soft affinity: usually, not always, the node asked for).
    let bytes = starling::get_timeout(&grown, Duration::from_secs(60)).context("grow")?;
    let stored_on = NodeId(u64::from_le_bytes(bytes[..8].try_into()?));
    drop(bytes);
    let Some(&other) = alive.iter().find(|n| **n != stored_on) else {
        bail!("no node besides {stored_on}");
    };
    println!("stored_on={stored_on}");

    starling_examples::wait_for_file(&go, Duration::from_secs(120))?;
    let start = Instant::now();
    let checked = check::options().node_affinity(other, false).remote(&grown);
    let (remade_on, sum, checked_on) =
        starling::get_timeout(&checked, Duration::from_secs(120)).context("check")?;
    let want = fnv(&stream(7, LEN)
        .iter()
        .rev()
        .map(|x| x.wrapping_add(1))
        .collect::<Vec<u8>>());
    println!("remade_on=N{remade_on}");
    println!("checked_on=N{checked_on}");
    println!("checksum_ok={}", sum == want);
    println!("recovery_ms={}", start.elapsed().as_millis());
    Ok(())
}
