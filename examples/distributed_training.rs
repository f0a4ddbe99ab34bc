//! A data-parallel training job: linear regression by gradient averaging over shards, one shard
//! per instance of a multi-node job.
//!
//! Each epoch, the entrypoint (instance 0) sends the current weights to one task per instance,
//! placed on that instance's node (soft affinity: elsewhere if that node is lost or busy); each
//! computes the gradient of the squared loss over its own
//! shard (generated from a seed, as if read from that node's disk) and prints its progress; the
//! entrypoint averages the gradients and takes a step. Prints `key=value` lines at the end:
//!
//! ```text
//! instances=3
//! loss=0.000101
//! max_weight_error=0.0021
//! ```
//!
//! Submit it to a pool (see the README's "Jobs" section):
//! `starling job submit --pool train --target-instances 3 target/release/examples/distributed_training`.
//! Run directly, it trains on a local cluster.
//!
//! `-- --hold EPOCH FILE`: at that epoch the last shard's task prints `shard K holds` and waits
//! for `FILE` to exist before it computes (a test's window to take its node away: the task
//! then runs again on another instance, and the result is the same).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, ensure, Context};

/// The model the data comes from: y = w . x + b + noise.
const TRUE_W: [f64; 4] = [2.0, -1.0, 0.5, 3.0];
const TRUE_B: f64 = 0.7;
const SHARD_ROWS: usize = 2_000;
const EPOCHS: usize = 100;
const LEARNING_RATE: f64 = 0.2;

/// A shard's rows, the same on every run (seeded by the shard index).
fn shard(k: u64) -> Vec<([f64; 4], f64)> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed + k);
    (0..SHARD_ROWS)
        .map(|_| {
            let x = [(); 4].map(|()| rng.gen_range(-1.0..1.0));
            let y = x.iter().zip(TRUE_W).map(|(a, w)| a * w).sum::<f64>()
                + TRUE_B
                + rng.gen_range(-0.01..0.01);
            (x, y)
        })
        .collect()
}

/// The gradient of the mean squared error over shard `k` at (`w`, `b`), and the loss.
#[starling::remote]
fn gradient(k: u64, epoch: u32, w: Vec<f64>, b: f64, hold: String) -> (Vec<f64>, f64, f64) {
    if !hold.is_empty() {
        println!("shard {k} holds on node {}", starling_examples::this_node());
        starling_examples::wait_for_file(Path::new(&hold), Duration::from_secs(120))
            .expect("the go file");
    }
    let rows = shard(k);
    let mut gw = vec![0.0; w.len()];
    let (mut gb, mut loss) = (0.0, 0.0);
    for (x, y) in &rows {
        let err = x.iter().zip(&w).map(|(a, w)| a * w).sum::<f64>() + b - y;
        loss += err * err;
        for (g, a) in gw.iter_mut().zip(x) {
            *g += 2.0 * err * a;
        }
        gb += 2.0 * err;
    }
    let n = rows.len() as f64;
    if epoch.is_multiple_of(10) {
        println!(
            "shard {k} on node {}: epoch {epoch}, loss {:.6}",
            starling_examples::this_node(),
            loss / n
        );
    }
    (gw.iter().map(|g| g / n).collect(), gb / n, loss / n)
}

/// The node this task runs on.
#[starling::remote]
fn node_of() -> u64 {
    starling_examples::this_node()
}

fn main() -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let instances: u64 = std::env::var("STARLING_NUM_INSTANCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let hold = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => None,
        [flag, epoch, file] if flag == "--hold" => Some((epoch.parse::<u32>()?, file.clone())),
        other => bail!("usage: distributed_training [--hold EPOCH FILE], not {other:?}"),
    };
    let nodes = starling::nodes()?;
    ensure!(!nodes.is_empty(), "no nodes");
    println!(
        "training on {} node(s): {}",
        nodes.len(),
        nodes
            .iter()
            .map(|n| n.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    // One task pinned to each instance first: once they are back, every instance's worker
    // processes are up, so each shard starts on its own node.
    let ready: Vec<_> = nodes
        .iter()
        .map(|n| node_of::options().node_affinity(n.id, false).remote())
        .collect();
    starling::get_all(&ready).context("an instance is not ready")?;
    let mut w = vec![0.0; TRUE_W.len()];
    let mut b = 0.0;
    let mut loss = f64::NAN;
    for epoch in 0..EPOCHS as u32 {
        // One shard per node: shard k is computed where instance k runs.
        let parts: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let go = match &hold {
                    Some((at, file)) if *at == epoch && k + 1 == nodes.len() => file.clone(),
                    _ => String::new(),
                };
                // Soft: if instance k's node is lost, its shard runs on another instance.
                gradient::options().node_affinity(n.id, true).remote(
                    k as u64,
                    epoch,
                    w.clone(),
                    b,
                    go,
                )
            })
            .collect();
        let grads = starling::get_all(&parts).context("an epoch failed")?;
        let m = grads.len() as f64;
        for (i, wi) in w.iter_mut().enumerate() {
            *wi -= LEARNING_RATE * grads.iter().map(|g| g.0[i]).sum::<f64>() / m;
        }
        b -= LEARNING_RATE * grads.iter().map(|g| g.1).sum::<f64>() / m;
        loss = grads.iter().map(|g| g.2).sum::<f64>() / m;
        if epoch.is_multiple_of(10) {
            println!("epoch {epoch}: loss {loss:.6}");
        }
    }
    let max_err = w
        .iter()
        .zip(TRUE_W)
        .map(|(a, t)| (a - t).abs())
        .chain([(b - TRUE_B).abs()])
        .fold(0.0, f64::max);
    println!("instances={instances}");
    println!("loss={loss:.6}");
    println!("max_weight_error={max_err:.4}");
    ensure!(
        max_err < 0.01,
        "did not converge: max weight error {max_err}"
    );
    Ok(())
}
