#[starling::remote]
fn sum((a, b): (i32, i32)) -> i32 {
    a + b
}

fn main() {}
