//! The value codec: serde + bincode 2 (standard configuration), in one place.
//!
//! Every argument, return value and `put` value goes through here, so the wire format of user
//! values can change in one module.
//!
//! # Hostile input
//! Decoding never trusts a length prefix. Bytes come from other processes (task arguments,
//! results, fetched objects), so a prefix that claims 2^60 bytes must not allocate 2^60 bytes:
//! the decoder runs with a byte budget of [`BUDGET_PER_INPUT_BYTE`] times the input's length,
//! and every allocation bincode sizes from a prefix (strings, byte buffers) is charged to that
//! budget first. bincode charges each decoded integer its in-memory width, and the widest (a
//! `u128`) can take one byte on the wire, so an honest value never spends more than that; a lie
//! is refused before it allocates, and unlike a fixed limit the budget lets a genuine 1 GiB
//! `put` decode. Sequences and maps go through serde, which caps preallocation at 1 MiB
//! whatever the prefix says.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use starling_worker::store::Blob;

use crate::error::Error;
use crate::object_ref::RefHandle;
use crate::runtime::Runtime;

thread_local! {
    /// Whether an encoding on this thread collects the refs it writes ([`encode_nested`]).
    static COLLECTING: Cell<bool> = const { Cell::new(false) };
    /// The refs collected so far (encodings nested in a `Serialize` impl take their own tail),
    /// and how many there are, readable without borrowing the list.
    static NOTED: RefCell<Vec<Arc<RefHandle>>> = const { RefCell::new(Vec::new()) };
    static NOTED_LEN: Cell<usize> = const { Cell::new(0) };
    /// The runtime refs decoded on this thread belong to, while [`decode_for`] runs (null
    /// otherwise): a pointer, so that a `get` pays no reference count for it.
    static DECODING: Cell<*const Runtime> = const { Cell::new(std::ptr::null()) };
    /// The refs nested in the return values the task on this thread just encoded, one list
    /// per returned object.
    static RETURNED: RefCell<Vec<Vec<Arc<RefHandle>>>> = const { RefCell::new(Vec::new()) };
}

/// An encoded value and the ref groups nested in it. The groups keep their objects alive until
/// whoever stores or sends the value has told the scheduler about them (see
/// [`crate::object_ref`]); drop them only after that.
#[doc(hidden)]
pub struct Encoded {
    pub(crate) bytes: Vec<u8>,
    pub(crate) refs: Vec<Arc<RefHandle>>,
}

impl Encoded {
    /// Bytes that hold no refs.
    pub(crate) fn plain(bytes: Vec<u8>) -> Self {
        Encoded {
            bytes,
            refs: Vec::new(),
        }
    }

    /// The ids of the nested refs, in the order written (may repeat).
    pub(crate) fn ref_ids(&self) -> Vec<starling_proto::ObjectId> {
        self.refs.iter().map(|h| h.id).collect()
    }
}

/// Encodes `value` and collects the `ObjectRef`s written inside it.
pub(crate) fn encode_nested<T: Serialize + ?Sized>(value: &T) -> Result<Encoded, Error> {
    let mark = NOTED_LEN.with(Cell::get);
    let bytes = encode_pass(value, true);
    let refs = if NOTED_LEN.with(Cell::get) > mark {
        NOTED_LEN.with(|n| n.set(mark));
        NOTED.with(|n| n.borrow_mut().split_off(mark))
    } else {
        Vec::new()
    };
    Ok(Encoded {
        bytes: bytes?,
        refs,
    })
}

/// What the encoding of a [`Bytes`](crate::Bytes) of `len` bytes starts with (its length);
/// the bytes follow.
pub(crate) fn bytes_prefix(len: usize) -> Vec<u8> {
    bincode::serde::encode_to_vec(len as u64, CONFIG).expect("a length always encodes")
}

/// Where [`encode_nested_into`] wrote a value.
pub(crate) enum Body<W> {
    /// Into memory (the sink declined the size).
    Bytes(Vec<u8>),
    /// Into the sink.
    Written(W),
}

/// Encodes `value` as [`encode_nested`] does, but once its size is known asks `open` for a
/// writer to put it in (a store file, for a large value): the encoding goes there instead of
/// into a buffer of its own. `open` returning `None` keeps it in memory. A sink that fails
/// mid-way gives its error (the refs it collected are let go).
pub(crate) fn encode_nested_into<T: Serialize + ?Sized, W: std::io::Write>(
    value: &T,
    open: impl FnOnce(usize) -> Option<W>,
) -> Result<(Body<W>, Vec<Arc<RefHandle>>), Error> {
    let mark = NOTED_LEN.with(Cell::get);
    let body = encode_pass_into(value, true, open);
    let refs = if NOTED_LEN.with(Cell::get) > mark {
        NOTED_LEN.with(|n| n.set(mark));
        NOTED.with(|n| n.borrow_mut().split_off(mark))
    } else {
        Vec::new()
    };
    Ok((body?, refs))
}

/// Called by `ObjectRef`'s `Serialize`: the group joins the encoding in progress (if it collects)
/// and is listed, as its id is leaving in a value.
pub(crate) fn note_ref(h: &Arc<RefHandle>) {
    h.list();
    if COLLECTING.with(Cell::get) {
        NOTED.with(|n| n.borrow_mut().push(h.clone()));
        NOTED_LEN.with(|n| n.set(n.get() + 1));
    }
}

/// The runtime a ref being decoded on this thread belongs to.
pub(crate) fn decoding_runtime() -> Option<Runtime> {
    let rt = DECODING.with(Cell::get);
    if rt.is_null() {
        return crate::runtime::current();
    }
    // SAFETY: `DECODING` holds a pointer only while `decode_for` runs on this thread, to a
    // runtime that call borrows for its whole length; its guard puts the previous value back
    // before the borrow ends, even on a panic.
    Some(unsafe { (*rt).clone() })
}

/// Puts back the runtime [`decode_for`] replaced.
struct DecodingGuard(*const Runtime);

impl Drop for DecodingGuard {
    fn drop(&mut self) {
        DECODING.with(|d| d.set(self.0));
    }
}

/// [`decode_shared`] for a value read from `rt`: refs inside it belong to `rt`.
pub(crate) fn decode_for<T: DeserializeOwned>(rt: &Runtime, blob: &Blob) -> Result<T, Error> {
    let _guard = DecodingGuard(DECODING.with(|d| d.replace(rt as *const Runtime)));
    decode_shared(blob)
}

/// Keeps the refs nested in a task's return values (one list per returned object) for
/// [`take_returned`].
pub(crate) fn set_returned(refs: Vec<Vec<Arc<RefHandle>>>) {
    RETURNED.with(|r| *r.borrow_mut() = refs);
}

/// The refs nested in the return values last encoded on this thread (see `encode_return`),
/// one list per returned object (or none at all when no value held a ref).
pub(crate) fn take_returned() -> Vec<Vec<Arc<RefHandle>>> {
    RETURNED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// The values of a task with several returns, as one buffer: each value's length (8 bytes,
/// little-endian), then its bytes.
pub(crate) fn frame_returns(parts: &[Vec<u8>]) -> Vec<u8> {
    let len = parts.iter().map(|p| 8 + p.len()).sum();
    let mut out = Vec::with_capacity(len);
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// Splits what [`frame_returns`] made into its `n` values, or says why it cannot.
pub(crate) fn split_returns(bytes: &[u8], n: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut parts = Vec::with_capacity(n.min(bytes.len() / 8 + 1));
    let mut rest = bytes;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| format!("{} bytes where a length was due", rest.len()))?;
        let len = usize::try_from(u64::from_le_bytes(*len)).unwrap_or(usize::MAX);
        if len > tail.len() {
            return Err(format!(
                "a value claims {len} bytes, {} are left",
                tail.len()
            ));
        }
        parts.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    if parts.len() != n {
        return Err(format!(
            "the task returned {} value(s), its caller expects {n}",
            parts.len()
        ));
    }
    Ok(parts)
}

const CONFIG: bincode::config::Configuration = bincode::config::standard();

/// Bytes of decoding budget per byte of input: the in-memory width of a `u128`, which bincode's
/// varint encoding writes in as little as one byte.
pub(crate) const BUDGET_PER_INPUT_BYTE: usize = 16;

/// The decoding configuration: [`CONFIG`] with a byte limit, so bincode counts what it reads
/// and what it is about to allocate. The limit itself is the largest possible; [`decode`]
/// claims all of it but the budget up front, which leaves exactly the budget to spend.
type LimitedConfig = bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<{ usize::MAX }>,
>;
const DECODE_CONFIG: LimitedConfig = CONFIG.with_limit::<{ usize::MAX }>();

/// Encodes `value` into a buffer of exactly the encoded size: a sizing pass first, so a large
/// value is written once instead of being copied on every growth of the buffer.
/// Refs inside `value` are written as ids and not kept: use [`encode_nested`] for anything that
/// may hold refs and reaches the scheduler.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    encode_pass(value, false)
}

/// [`encode`]; with `collect`, refs are noted only on the writing pass (the sizing pass writes
/// them too).
fn encode_pass<T: Serialize + ?Sized>(value: &T, collect: bool) -> Result<Vec<u8>, Error> {
    match encode_pass_into(value, collect, |_| None::<std::io::Sink>)? {
        Body::Bytes(b) => Ok(b),
        Body::Written(_) => unreachable!("no sink was given"),
    }
}

/// One encoding of `value`: its size first (a pass that writes nothing and collects no ref),
/// then the bytes, into `open`'s writer for that size or else a buffer of exactly that size.
fn encode_pass_into<T: Serialize + ?Sized, W: std::io::Write>(
    value: &T,
    collect: bool,
    open: impl FnOnce(usize) -> Option<W>,
) -> Result<Body<W>, Error> {
    let err = |e: bincode::error::EncodeError| Error::Codec {
        op: "encode",
        type_name: std::any::type_name::<T>(),
        message: e.to_string(),
    };
    let mut sizer = bincode::enc::write::SizeWriter::default();
    let outer = COLLECTING.with(|c| c.replace(false));
    let sized = bincode::serde::encode_into_writer(value, &mut sizer, CONFIG).map_err(err);
    let written = sized.and_then(|()| {
        let sink = open(sizer.bytes_written);
        COLLECTING.with(|c| c.set(collect));
        match sink {
            Some(mut w) => {
                bincode::serde::encode_into_std_write(value, &mut w, CONFIG).map_err(err)?;
                Ok(Body::Written(w))
            }
            None => {
                let mut out = Vec::with_capacity(sizer.bytes_written);
                bincode::serde::encode_into_std_write(value, &mut out, CONFIG).map_err(err)?;
                Ok(Body::Bytes(out))
            }
        }
    });
    COLLECTING.with(|c| c.set(outer));
    written
}

/// Decodes a `T` from a stored object's bytes; `Bytes` inside it share the object's buffer
/// instead of copying it.
pub fn decode_shared<T: DeserializeOwned>(blob: &Blob) -> Result<T, Error> {
    crate::bytes::with_sources(std::slice::from_ref(blob), || decode(blob))
}

/// Decodes a `T` from all of `bytes`. Byte strings are handed to the decoder borrowed, so
/// `Bytes` can share a registered source buffer (see [`decode_shared`]).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    use bincode::de::{BorrowDecode, Decoder, DecoderImpl};
    let err = |message: String| Error::Codec {
        op: "decode",
        type_name: std::any::type_name::<T>(),
        message,
    };
    let reader = bincode::de::read::SliceReader::new(bytes);
    let mut decoder = DecoderImpl::new(reader, DECODE_CONFIG, ());
    // The budget (see the module docs): spending more means a length prefix lied.
    let budget = bytes.len().saturating_mul(BUDGET_PER_INPUT_BYTE);
    decoder
        .claim_bytes_read(usize::MAX - budget)
        .map_err(|e| err(e.to_string()))?;
    let bincode::serde::BorrowCompat(v) =
        bincode::serde::BorrowCompat::<T>::borrow_decode(&mut decoder).map_err(|e| {
            err(match e {
                bincode::error::DecodeError::LimitExceeded => format!(
                    "a length prefix claims more than the {} bytes of the input hold",
                    bytes.len()
                ),
                e => e.to_string(),
            })
        })?;
    let trailing = remaining(decoder.reader());
    if trailing != 0 {
        return Err(err(format!("{trailing} trailing bytes")));
    }
    Ok(v)
}

/// How many bytes `reader` has left (it exposes only "are there `n` more?").
fn remaining(reader: &mut bincode::de::read::SliceReader<'_>) -> usize {
    use bincode::de::read::Reader;
    if reader.peek_read(1).is_none() {
        return 0;
    }
    // Binary search for the largest `n` with `n` bytes left.
    let (mut lo, mut hi) = (1usize, 1usize);
    while reader.peek_read(hi).is_some() {
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reader.peek_read(mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bytes_value_is_its_prefix_then_its_bytes() {
        for len in [0usize, 1, 250, 251, 65_535, 65_536, 1 << 20, (1 << 32) + 3] {
            let prefix = bytes_prefix(len);
            if len <= 1 << 20 {
                let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let whole = encode(&crate::Bytes::new(data.clone())).unwrap();
                assert_eq!(whole, [prefix.as_slice(), &data].concat(), "{len}");
            } else {
                assert_eq!(prefix.len(), 9, "{len}: a u64 length");
            }
        }
    }

    #[test]
    fn round_trip_and_typed_errors() {
        let v = (1u64, "two".to_string(), vec![3.0f64]);
        let b = encode(&v).unwrap();
        assert_eq!(decode::<(u64, String, Vec<f64>)>(&b).unwrap(), v);
        let e = decode::<String>(&[0xff, 0xff]).unwrap_err();
        assert!(matches!(
            e,
            Error::Codec {
                op: "decode",
                type_name: "alloc::string::String",
                ..
            }
        ));
        let e = decode::<u8>(&[1, 2, 3]).unwrap_err();
        assert!(e.to_string().contains("2 trailing bytes"), "{e}");
    }

    /// A varint prefix that claims 2^60 bytes: `0xfd` then a little-endian u64.
    fn huge_prefix() -> Vec<u8> {
        let mut b = vec![0xfd];
        b.extend_from_slice(&(1u64 << 60).to_le_bytes());
        b
    }

    #[test]
    fn a_claimed_length_never_allocates() {
        // Before the budget, `String` and `ByteBuf` decoding allocated the claimed length up
        // front and the process aborted; now each is an error before any allocation.
        let t = std::time::Instant::now();
        let mut b = huge_prefix();
        b.extend_from_slice(b"abc");
        let e = decode::<String>(&b).unwrap_err();
        assert!(
            e.to_string().contains("claims more than the 12 bytes"),
            "{e}"
        );
        assert!(decode::<Vec<String>>(&[&[1u8][..], &b].concat()).is_err());
        assert!(decode::<(u8, String)>(&[&[7u8][..], &b].concat()).is_err());
        assert!(decode::<crate::Bytes>(&b).is_err());
        assert!(decode::<Vec<u8>>(&b).is_err());
        assert!(decode::<Vec<Vec<u8>>>(&b).is_err());
        assert!(decode::<std::collections::HashMap<String, u64>>(&b).is_err());
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "a lie is refused at once"
        );
        // An honest length still decodes, right up to the input's size.
        let s = "x".repeat(300);
        assert_eq!(decode::<String>(&encode(&s).unwrap()).unwrap(), s);
        // The widest integers, one byte each on the wire, spend the most budget per byte.
        let wide = vec![1u128; 1000];
        assert_eq!(decode::<Vec<u128>>(&encode(&wide).unwrap()).unwrap(), wide);
        let big = crate::Bytes::new(vec![5u8; 1 << 20]);
        assert_eq!(decode::<crate::Bytes>(&encode(&big).unwrap()).unwrap(), big);
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    enum Shape {
        Unit,
        Point(i32, i32),
        Named { label: String, tags: Vec<String> },
        Nested(Box<Option<Shape>>),
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Record {
        id: u64,
        name: String,
        blob: crate::Bytes,
        scores: Vec<f64>,
        shapes: Vec<Shape>,
        index: std::collections::HashMap<String, Vec<u8>>,
        parent: Option<Box<Record>>,
    }

    fn record() -> Record {
        Record {
            id: u64::MAX - 1,
            name: "record".into(),
            blob: crate::Bytes::new(vec![1, 2, 3, 0xfd]),
            scores: vec![1.5, -0.0, f64::MAX],
            shapes: vec![
                Shape::Unit,
                Shape::Point(-1, i32::MAX),
                Shape::Named {
                    label: "é".into(),
                    tags: vec!["a".into(), String::new()],
                },
                Shape::Nested(Box::new(Some(Shape::Point(3, 4)))),
            ],
            index: [("k".to_string(), vec![7u8; 9])].into_iter().collect(),
            parent: Some(Box::new(Record {
                id: 1,
                name: String::new(),
                blob: crate::Bytes::default(),
                scores: Vec::new(),
                shapes: Vec::new(),
                index: Default::default(),
                parent: None,
            })),
        }
    }

    /// Decodes `bytes` as `T`; a value that decodes must encode again and decode back to a
    /// value of the same encoded size (maps may reorder and a NaN is not equal to itself, so
    /// sizes are compared, not bytes or values), so the decoder made nothing up.
    fn check<T: serde::Serialize + DeserializeOwned>(bytes: &[u8]) -> bool {
        match decode::<T>(bytes) {
            Ok(v) => {
                let again = encode(&v).expect("a decoded value encodes");
                assert!(again.len() <= bytes.len(), "{}", std::any::type_name::<T>());
                let back: T = decode(&again).expect("an encoded value decodes");
                assert_eq!(encode(&back).unwrap().len(), again.len());
                true
            }
            Err(Error::Codec { op: "decode", .. }) => false,
            Err(e) => panic!("decode returned a non-codec error: {e}"),
        }
    }

    #[test]
    fn fuzz_decode_never_panics_or_allocates_claimed_lengths() {
        use starling_proto::fuzz;
        use std::collections::HashMap;
        let seeds = vec![
            encode(&0u8).unwrap(),
            encode(&u64::MAX).unwrap(),
            encode(&-5i64).unwrap(),
            encode(&(1u32 << 20)).unwrap(),
            encode("a string of some length").unwrap(),
            encode(&vec![0u8, 1, 2, 250, 251, 252, 253, 254, 255]).unwrap(),
            encode(&vec![vec![1u8; 3], vec![], vec![0xfd; 5]]).unwrap(),
            encode(&crate::Bytes::new(vec![9; 40])).unwrap(),
            encode(&(7u16, "x".to_string(), Some(true), 'c')).unwrap(),
            encode(&record()).unwrap(),
            encode(&HashMap::from([
                (1u64, "one".to_string()),
                (2, "two".into()),
            ]))
            .unwrap(),
            encode(&Shape::Named {
                label: "l".into(),
                tags: vec!["t".into()],
            })
            .unwrap(),
        ];
        let mut ok = 0u64;
        fuzz::run("codec", 3.0, 2000, |rng| {
            let b = fuzz::mutate(rng, &seeds);
            ok += u64::from(check::<u8>(&b));
            ok += u64::from(check::<u64>(&b));
            ok += u64::from(check::<i64>(&b));
            ok += u64::from(check::<u128>(&b));
            ok += u64::from(check::<bool>(&b));
            ok += u64::from(check::<char>(&b));
            ok += u64::from(check::<String>(&b));
            ok += u64::from(check::<Vec<u8>>(&b));
            ok += u64::from(check::<crate::Bytes>(&b));
            ok += u64::from(check::<Vec<Vec<u8>>>(&b));
            ok += u64::from(check::<Vec<String>>(&b));
            ok += u64::from(check::<(u16, String, Option<bool>, char)>(&b));
            ok += u64::from(check::<Option<Vec<u64>>>(&b));
            ok += u64::from(check::<HashMap<u64, String>>(&b));
            ok += u64::from(check::<HashMap<String, Vec<u8>>>(&b));
            ok += u64::from(check::<Shape>(&b));
            ok += u64::from(check::<Record>(&b));
            ok += u64::from(check::<Result<u32, String>>(&b));
        });
        assert!(ok > 0, "some mutations decode, so values were checked too");
    }
}
