//! An `async fn` is submitted like a sync one; workers drive it to completion.

use starling::ObjectRef;

#[starling::remote]
async fn fetch(key: String, attempts: u32) -> Vec<u8> {
    let _ = attempts;
    key.into_bytes()
}

#[allow(dead_code)]
fn submit(key: ObjectRef<String>) {
    let _bytes: ObjectRef<Vec<u8>> = fetch::remote(&key, 3);
    let _bytes: ObjectRef<Vec<u8>> = fetch::remote("k".to_owned(), 3);
}

fn main() {}
