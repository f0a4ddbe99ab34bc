#[starling::remote]
fn identity<T: Clone>(x: T) -> T {
    x
}

fn main() {}
