#[starling::job(pool = "p")]
fn borrowed(rows: &[f64]) -> f64 {
    rows.iter().sum()
}

fn main() {}
