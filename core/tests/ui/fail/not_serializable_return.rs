use std::sync::mpsc::Receiver;

#[starling::remote]
fn open(capacity: usize) -> Receiver<u8> {
    std::sync::mpsc::sync_channel(capacity).1
}

fn main() {}
