//! Every attribute option, with literals and with constant expressions.

use starling::{ObjectRef, SchedulingStrategy};

const RETRIES: u32 = 2;

#[starling::remote(
    num_cpus = 0.5,
    num_gpus = 1,
    resources(tpu = 1.0, "my-res" = 2),
    max_retries = 5,
    retry_exceptions = true,
)]
async fn work(x: Vec<u8>) -> Result<u64, std::io::Error> {
    Ok(x.len() as u64)
}

#[starling::remote(
    num_cpus = 2.0 * 2.0,
    max_retries = RETRIES,
    retry_exceptions = RETRIES > 0,
    scheduling_strategy = SchedulingStrategy::Spread,
)]
fn spread(x: u8) -> u8 {
    x
}

#[starling::remote(max_retries = 0)]
fn once() {}

#[allow(dead_code)]
fn submit() {
    let _w: ObjectRef<u64> = work::remote(vec![1, 2, 3]);
    let _s: ObjectRef<u8> = spread::remote(1);
    let _o: ObjectRef<()> = once::remote();
}

fn main() {}
