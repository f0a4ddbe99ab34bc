//! A `#[starling::job]` function: a Monte Carlo estimate of π that runs as a multi-node job.
//!
//! `estimate_pi::submit(&client, samples)` submits this very executable to a pool; on the job's
//! instance 0 the function runs instead of `main`, fans out one task per instance (each pinned to
//! its node), and returns an `Estimate`, which `job.result::<Estimate>()` hands back here. If the
//! function fails (it panics on `--samples 0`), `result` returns its error: type, message and
//! backtrace. The job is submitted with `PI_LABEL=estimate` in its `env_vars`, which its tasks
//! see too (a job's variables are its tasks' environment, as Ray's job-level `runtime_env`).
//! It also spreads four actors, which must land on the job's instances only (`actor_nodes`).
//!
//! Needs a head: `STARLING_HEAD=127.0.0.1:6380 target/release/examples/job_function
//! [--pool demo] [--instances 2] [--samples 1000000]`. A missing pool is created as a launched
//! pool of `--instances` one-CPU nodes. Prints `key=value` lines:
//!
//! ```text
//! job=1
//! instances=2
//! hits=1570796
//! expected_hits=1570796
//! pi=3.141592
//! ```

use anyhow::{bail, ensure, Context};
use serde::{Deserialize, Serialize};
use starling::jobs::{JobClient, PoolOptions};

/// What the job returns.
#[derive(Serialize, Deserialize, Debug)]
struct Estimate {
    pi: f64,
    samples: u64,
    hits: u64,
    /// `(instance, node, hits)` for every instance.
    per_instance: Vec<(u32, u64, u64)>,
    /// `PI_LABEL` as each instance's task saw it.
    labels: Vec<Option<String>>,
    /// The nodes the job's actors ran on.
    actor_nodes: Vec<u64>,
}

/// An actor of the job: it says where it runs.
pub struct Where;

#[starling::actor]
impl Where {
    fn new() -> Self {
        Where
    }

    fn node(&self) -> u64 {
        starling_examples::this_node()
    }
}

/// Points of `samples` seeded draws in the unit square that fall inside the quarter circle.
#[starling::remote]
fn count_hits(seed: u64, samples: u64) -> (u64, u64, Option<String>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let hits = (0..samples)
        .filter(|_| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            x * x + y * y <= 1.0
        })
        .count() as u64;
    println!(
        "seed {seed}: {hits} of {samples} inside, on node {}",
        starling_examples::this_node()
    );
    (
        hits,
        starling_examples::this_node(),
        std::env::var("PI_LABEL").ok(),
    )
}

/// Runs on instance 0 of the job: one task per instance, each on its own node.
#[starling::job(pool = "demo", target_instances = 2)]
fn estimate_pi(samples_per_instance: u64) -> Result<Estimate, String> {
    assert!(
        samples_per_instance > 0,
        "samples_per_instance must be positive"
    );
    let nodes = starling::nodes().map_err(|e| e.to_string())?;
    println!("estimating pi on {} instance(s)", nodes.len());
    let parts: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            count_hits::options()
                .node_affinity(n.id, false)
                .remote(k as u64, samples_per_instance)
        })
        .collect();
    let counts = starling::get_all(&parts).map_err(|e| e.to_string())?;
    // Spread as far as they may go: only over the job's instances.
    let actors: Vec<_> = (0..4)
        .map(|_| {
            Where::options()
                .scheduling_strategy(starling::SchedulingStrategy::Spread)
                .remote()
        })
        .collect();
    let actor_nodes = starling::get_all(&actors.iter().map(|a| a.node()).collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    let hits = counts.iter().map(|c| c.0).sum::<u64>();
    let samples = samples_per_instance * counts.len() as u64;
    Ok(Estimate {
        pi: 4.0 * hits as f64 / samples as f64,
        samples,
        hits,
        per_instance: counts
            .iter()
            .enumerate()
            .map(|(k, c)| (k as u32, c.1, c.0))
            .collect(),
        labels: counts.iter().map(|c| c.2.clone()).collect(),
        actor_nodes,
    })
}

fn flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> anyhow::Result<T> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{name} needs a value")),
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pool: String = flag(&args, "--pool", estimate_pi::POOL.to_string())?;
    let instances: u32 = flag(&args, "--instances", 2)?;
    let samples: u64 = flag(&args, "--samples", 1_000_000)?;

    let client = JobClient::from_env().context("connect to the head (set STARLING_HEAD)")?;
    if client.describe_pool(&pool).is_err() {
        eprintln!("creating pool {pool} ({instances} launched node(s) of 1 CPU)");
        client.create_pool(&PoolOptions {
            name: pool.clone(),
            max_nodes: instances,
            num_cpus_per_node: 1,
            launched: true,
            ..PoolOptions::default()
        })?;
    }
    let job = estimate_pi::submit_with(
        &client,
        &pool,
        estimate_pi::options()
            .target_instances(instances)
            .env("PI_LABEL", "estimate"),
        samples,
    )?;
    println!("job={}", job.id());
    job.wait_with(None, |info| {
        eprintln!("job {}: {} {}", info.id, info.status, info.message)
    })?;
    match job.result::<Estimate>() {
        Ok(e) => {
            // The same draws, computed here: the job's answer must match exactly.
            let expected: u64 = (0..instances as u64)
                .map(|k| count_hits(k, samples).0)
                .sum();
            println!("instances={}", e.per_instance.len());
            for (k, node, hits) in &e.per_instance {
                println!("instance_{k}_node={node}");
                println!("instance_{k}_hits={hits}");
            }
            for (k, label) in e.labels.iter().enumerate() {
                println!(
                    "instance_{k}_task_label={}",
                    label.as_deref().unwrap_or("-")
                );
            }
            let instance_nodes: Vec<u64> = e.per_instance.iter().map(|p| p.1).collect();
            println!(
                "actors_on_instances={}",
                e.actor_nodes.iter().all(|n| instance_nodes.contains(n))
            );
            println!("actor_nodes={:?}", e.actor_nodes);
            println!("hits={}", e.hits);
            println!("expected_hits={expected}");
            println!("pi={:.6}", e.pi);
            ensure!(
                e.hits == expected,
                "the job counted {} hits, not {expected}",
                e.hits
            );
            ensure!(
                e.samples == samples * u64::from(instances),
                "wrong sample count"
            );
            Ok(())
        }
        Err(e) => {
            println!("error={e}");
            if let Some(cause) = e.remote_error() {
                println!("error_type={}", cause.type_name);
                println!("error_message={}", cause.message);
                println!("error_backtrace_lines={}", cause.backtrace.lines().count());
            }
            bail!("job {} failed", job.id())
        }
    }
}
