//! Monte Carlo π: N tasks each throw darts at the unit square and count hits inside the quarter
//! circle; the driver adds up the counts.

use std::time::Instant;

use anyhow::Context;
use rand::{Rng, SeedableRng};

#[starling::remote]
fn count_hits(seed: u64, samples: u64) -> u64 {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..samples)
        .filter(|_| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            x * x + y * y <= 1.0
        })
        .count() as u64
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let tasks: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let per_task: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let t0 = Instant::now();
    starling::init().context("start the runtime")?;
    let counts: Vec<_> = (0..tasks)
        .map(|seed| count_hits::remote(seed, per_task))
        .collect();
    let hits: u64 = starling::get_all(&counts)
        .context("get the counts")?
        .into_iter()
        .sum();
    let pi = 4.0 * hits as f64 / (tasks * per_task) as f64;
    let dt = t0.elapsed();
    println!(
        "pi ~= {pi:.6} (error {:.6}) from {} samples in {tasks} tasks",
        (pi - std::f64::consts::PI).abs(),
        tasks * per_task
    );
    println!(
        "took {:.1} ms ({:.1} M samples/s)",
        dt.as_secs_f64() * 1e3,
        (tasks * per_task) as f64 / dt.as_secs_f64() / 1e6
    );
    Ok(())
}
