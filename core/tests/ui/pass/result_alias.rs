//! Aliases whose last path segment is `Result` (`io::Result<T>`, `anyhow::Result<T>`) count as
//! `Result`s: the task's value is their first generic argument.

use std::io;

use starling::ObjectRef;

#[starling::remote]
fn read_len(path: String) -> std::io::Result<u64> {
    Ok(path.len() as u64)
}

#[starling::remote]
fn write_all(data: Vec<u8>) -> io::Result<()> {
    let _ = data;
    Ok(())
}

#[starling::remote]
fn fallible(x: u8) -> anyhow::Result<u8> {
    Ok(x)
}

#[allow(dead_code)]
fn submit() {
    let _len: ObjectRef<u64> = read_len::remote("/tmp".to_owned());
    let _done: ObjectRef<()> = write_all::remote(vec![1, 2, 3]);
    let _x: ObjectRef<u8> = fallible::remote(1);
}

fn main() {}
