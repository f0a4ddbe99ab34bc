//! A data-parallel training job: linear regression by gradient averaging over shards, one shard
//! per instance of a multi-node job.
//!
//! Each epoch, the entrypoint (instance 0) sends the current weights to one task per instance,
//! pinned to that instance's node; each computes the gradient of the squared loss over its own
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

use anyhow::{ensure, Context};

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
fn gradient(k: u64, epoch: u32, w: Vec<f64>, b: f64) -> (Vec<f64>, f64, f64) {
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

fn main() -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let instances: u64 = std::env::var("STARLING_NUM_INSTANCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
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
    let mut w = vec![0.0; TRUE_W.len()];
    let mut b = 0.0;
    let mut loss = f64::NAN;
    for epoch in 0..EPOCHS as u32 {
        // One shard per node: shard k is computed where instance k runs.
        let parts: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(k, n)| {
                gradient::options()
                    .node_affinity(n.id, false)
                    .remote(k as u64, epoch, w.clone(), b)
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
