//! Fan-out + reduce: square 1..=N in parallel tasks, then sum the squares in one task that
//! depends on all of them.

use std::time::Instant;

use anyhow::Context;

#[starling::remote]
fn square(x: u64) -> u64 {
    x * x
}

#[starling::remote]
fn sum(values: Vec<u64>) -> u64 {
    values.iter().sum()
}

fn main() -> anyhow::Result<()> {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let t0 = Instant::now();
    starling::init().context("start the runtime")?;
    let squares: Vec<_> = (1..=n).map(square::remote).collect();
    let values = starling::get_all(&squares).context("get the squares")?;
    let total = starling::get(&sum::remote(values)).context("get the sum")?;
    let dt = t0.elapsed();
    assert_eq!(total, n * (n + 1) * (2 * n + 1) / 6, "sum of squares");
    println!("sum of squares of 1..={n} = {total}");
    println!(
        "{} tasks in {:.1} ms ({:.0} tasks/s)",
        n + 1,
        dt.as_secs_f64() * 1e3,
        (n + 1) as f64 / dt.as_secs_f64()
    );
    Ok(())
}
