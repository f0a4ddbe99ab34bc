#[starling::remote]
fn total(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().sum()
}

fn main() {}
