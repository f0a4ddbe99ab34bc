//! `f::options()` starts from the attribute's options and every builder method chains by value.

use starling::{ObjectRef, SchedulingStrategy};

#[starling::remote(num_gpus = 1)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[allow(dead_code)]
fn submit() {
    let s: ObjectRef<i64> = add::remote(1, 2);
    let _t: ObjectRef<i64> = add::options()
        .num_cpus(2.0)
        .num_gpus(0.5)
        .resources("gpu", 1.0)
        .resources("memory", 1024.0)
        .max_retries(5)
        .retry_exceptions(true)
        .scheduling_strategy(SchedulingStrategy::Spread)
        .remote(1, &s);
    let _u = add::options().remote(s, 10);
}

fn main() {}
