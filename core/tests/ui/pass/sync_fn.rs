//! A plain function: `remote` takes values, owned refs and borrowed refs, and the function itself
//! stays callable.

use starling::ObjectRef;

#[starling::remote]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[allow(dead_code)]
fn submit() {
    let r: ObjectRef<i64> = add::remote(1, 2);
    let s: ObjectRef<i64> = add::remote(r.clone(), 10);
    let _t: ObjectRef<i64> = add::remote(&r, &s);
    let _u: ObjectRef<i64> = add::remote(s, r);
}

fn main() {
    assert_eq!(add(1, 2), 3);
}
