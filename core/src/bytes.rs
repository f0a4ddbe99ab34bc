//! `Bytes`: a byte buffer that the codec writes as one block and reads without copying.
//!
//! A plain `Vec<u8>` goes through serde as a sequence of `u8`, one call per byte; `Bytes`
//! serializes as a byte string, so encoding is a length and one `memcpy`. Decoding from an
//! object's stored value (a task argument, a `get`) does not copy at all: the `Bytes` shares the
//! stored buffer (on a node, a memory-mapped store file), which is how a 100 MB argument reaches
//! a task on the same node in microseconds.

use std::cell::RefCell;
use std::fmt;
use std::ops::Deref;

use serde::de::{Deserializer, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use starling_worker::store::Blob;

/// A byte buffer for large binary values (`starling::put(Bytes::from(vec))`, task arguments).
#[derive(Clone)]
pub struct Bytes(Repr);

#[derive(Clone)]
enum Repr {
    Owned(Vec<u8>),
    /// A window of a stored object's bytes, shared, not copied.
    Shared {
        blob: Blob,
        start: usize,
        len: usize,
    },
}

impl Bytes {
    /// Wraps `v` (no copy).
    pub fn new(v: Vec<u8>) -> Self {
        Bytes(Repr::Owned(v))
    }

    /// The bytes as a `Vec` (copies only if they are shared with a stored object).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Owned(v) => v,
            Repr::Shared { .. } => self.to_vec(),
        }
    }

    /// Whether these bytes are a view of a stored object rather than a buffer of their own.
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Repr::Shared { .. })
    }
}

impl Default for Bytes {
    fn default() -> Self {
        Bytes::new(Vec::new())
    }
}

impl Deref for Bytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Owned(v) => v,
            Repr::Shared { blob, start, len } => &blob[*start..*start + *len],
        }
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl std::hash::Hash for Bytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Bytes({} B{})",
            self.len(),
            if self.is_shared() { ", shared" } else { "" }
        )
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes::new(v)
    }
}

impl From<Bytes> for Vec<u8> {
    fn from(b: Bytes) -> Self {
        b.into_vec()
    }
}

thread_local! {
    /// The stored objects being decoded on this thread: a borrowed byte string inside one of
    /// them becomes a shared view instead of a copy.
    static SOURCES: RefCell<Vec<Blob>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `sources` registered as the buffers being decoded on this thread.
pub(crate) fn with_sources<R>(sources: &[Blob], f: impl FnOnce() -> R) -> R {
    if sources.is_empty() {
        return f();
    }
    SOURCES.with(|s| s.borrow_mut().extend(sources.iter().cloned()));
    struct Pop(usize);
    impl Drop for Pop {
        fn drop(&mut self) {
            SOURCES.with(|s| {
                let mut s = s.borrow_mut();
                let keep = s.len().saturating_sub(self.0);
                s.truncate(keep);
            });
        }
    }
    let _pop = Pop(sources.len());
    f()
}

fn shared_view(slice: &[u8]) -> Option<Bytes> {
    SOURCES.with(|s| {
        let s = s.borrow();
        let blob = s.iter().find(|b| b.contains(slice))?;
        let start = slice.as_ptr() as usize - blob.as_ptr() as usize;
        Some(Bytes(Repr::Shared {
            blob: blob.clone(),
            start,
            len: slice.len(),
        }))
    })
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_borrowed_bytes<E: serde::de::Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
        Ok(shared_view(v).unwrap_or_else(|| Bytes::new(v.to_vec())))
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
        Ok(Bytes::new(v.to_vec()))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
        Ok(Bytes::new(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element::<u8>()? {
            v.push(b);
        }
        Ok(Bytes::new(v))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        d.deserialize_bytes(BytesVisitor).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn encodes_as_one_block() {
        let b = Bytes::new(vec![7u8; 1000]);
        let enc = codec::encode(&b).unwrap();
        assert!(
            enc.len() <= 1003,
            "length prefix + raw bytes, got {}",
            enc.len()
        );
        assert_eq!(codec::decode::<Bytes>(&enc).unwrap(), b);
        assert!(codec::decode::<Bytes>(&[0xfb, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn decoding_from_a_stored_object_shares_its_buffer() {
        let value = (5u32, Bytes::new(vec![9u8; 4096]));
        let blob = Blob::new(codec::encode(&value).unwrap());
        let (n, b): (u32, Bytes) = codec::decode_shared(&blob).unwrap();
        assert_eq!((n, b.len(), b[100]), (5, 4096, 9));
        assert!(b.is_shared(), "no copy");
        assert!(blob.contains(&b), "a window of the stored bytes");
        drop(blob);
        assert_eq!(
            b.iter().map(|x| u64::from(*x)).sum::<u64>(),
            9 * 4096,
            "keeps it alive"
        );
        let plain: Bytes = codec::decode(&codec::encode(&Bytes::new(vec![1, 2])).unwrap()).unwrap();
        assert!(!plain.is_shared(), "a plain slice is copied");
    }
}
