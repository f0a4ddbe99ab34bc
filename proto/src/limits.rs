//! Sizes every side of the protocol agrees on, defined once.

/// Values up to this size travel inline in messages; larger task results stay in the store of
/// the node that made them, and larger `put`s go to the local node's store when there is one.
pub const INLINE_LIMIT: usize = 100 * 1024;

/// The largest gRPC message any Starling client or server sends or accepts (a larger one is
/// refused with a clear status).
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// A batch of session ops stops growing past this many encoded bytes, so large values do not
/// add up to an oversized message.
pub const MAX_BATCH_BYTES: usize = 8 << 20;

/// Splits `ops` into batches of at most [`MAX_BATCH_BYTES`] encoded bytes as `size` counts them
/// (a single larger op gets a batch of its own).
pub fn split_by_size<T>(ops: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut batches = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for op in ops {
        let len = size(&op);
        if !current.is_empty() && bytes + len > MAX_BATCH_BYTES {
            batches.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += len;
        current.push(op);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Bytes per chunk of a streamed file (binaries, payloads, objects).
pub const CHUNK: usize = 1 << 20;

/// The most objects one task may return (`num_returns`): a task names them all when it is
/// submitted, so the head refuses more.
pub const MAX_RETURNS: u32 = 4096;
