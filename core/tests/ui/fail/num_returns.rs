#[starling::remote(num_returns = 2)]
fn not_a_tuple(a: i64) -> i64 {
    a
}

#[starling::remote(num_returns = 3)]
fn too_short(a: i64) -> (i64, String) {
    (a, a.to_string())
}

#[starling::remote(num_returns = 0)]
fn none(a: i64) -> i64 {
    a
}

fn main() {
    // Each return is its own typed ref: this does not compile.
    let (a, b) = two::remote(1);
    let _: starling::ObjectRef<String> = a;
    let _ = b;
}

#[starling::remote(num_returns = 2)]
fn two(a: i64) -> (i64, Vec<u8>) {
    (a, vec![])
}
