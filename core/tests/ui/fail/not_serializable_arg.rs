struct Handle {
    fd: i32,
}

#[starling::remote]
fn close(handle: Handle) -> i32 {
    handle.fd
}

fn main() {}
