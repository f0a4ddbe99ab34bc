#[starling::remote(max_retries = 2.5)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[starling::remote(retry_exceptions = "yes")]
fn sub(a: i64, b: i64) -> i64 {
    a - b
}

fn main() {}
