use starling::jobs::{Job, JobClient, JobOptions};

const POOL: &str = "train";

#[starling::job(pool = "train", target_instances = 3, min_instances = 2, instance_timeout_secs = 60)]
fn fit(rows: Vec<f64>, rounds: u32) -> Result<f64, String> {
    Ok(rows.iter().sum::<f64>() * f64::from(rounds))
}

#[starling::job(pool = POOL, name = "ping")]
async fn ping() -> u8 {
    1
}

#[allow(dead_code)]
fn submit(client: &JobClient) -> starling::Result<Vec<Job>> {
    let options: JobOptions = fit::options().target_instances(4);
    let a = fit::submit(client, vec![1.0, 2.0], 10)?;
    let b = fit::submit_with(client, fit::POOL, options, vec![], 1)?;
    let c = ping::submit(client)?;
    let _: f64 = fit(vec![1.0], 2).unwrap_or_default();
    let _: &str = ping::NAME;
    Ok(vec![a, b, c])
}

fn main() {}
