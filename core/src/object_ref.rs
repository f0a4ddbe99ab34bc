//! `ObjectRef<T>`: a typed, reference-counted handle to a value that exists or will.
//!
//! All clones of one `ObjectRef` share one handle (a *ref group*); when the last clone drops, the
//! scheduler is told, and the object is freed once nothing else needs it either.
//!
//! # Refs inside values
//! An `ObjectRef` is `Serialize + Deserialize`: it travels inside arguments, return values and
//! `put` values as its id. Encoding with the codec notes every ref it writes
//! ([`codec::encode_nested`]), and the value's owner tells the scheduler which objects the value
//! holds (a task's `contained` list, or `Nested` for a stored value) *before* it lets go of the
//! refs it noted; decoding a ref makes (or finds) this process's group for the id, and a new
//! group is counted by the scheduler (`AddRef`) before the container that carried it can be
//! released, since both go out on the same ordered stream. So an object lives while any process
//! holds a deserialized ref to it, or while a stored value or a live task refers to it.
//!
//! A process has at most one group per id once refs have travelled: every group whose id was
//! encoded or decoded here is listed in [`GROUPS`] (weakly), and decoding reuses it.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use starling_proto::ObjectId;

use crate::__private::RemoteValue;
use crate::codec;
use crate::error::Error;
use crate::runtime::Runtime;

/// The shared part of all clones of one `ObjectRef`: dropping it releases the object.
#[doc(hidden)]
pub struct RefHandle {
    pub(crate) id: ObjectId,
    pub(crate) rt: Runtime,
    /// Listed in [`GROUPS`] (its id was encoded or decoded in this process).
    listed: AtomicBool,
    /// Made by decoding a ref, not by the `submit` or `put` that made the object.
    adopted: bool,
}

/// The ref groups of this process whose ids travelled, by runtime and id: decoding a ref finds
/// the group here instead of making a second one.
static GROUPS: Mutex<Option<Groups>> = Mutex::new(None);

/// Ref groups by the runtime they belong to ([`Runtime::owner`]) and object.
type Groups = HashMap<(usize, ObjectId), Weak<RefHandle>>;

impl RefHandle {
    pub(crate) fn new(id: ObjectId, rt: Runtime) -> Arc<RefHandle> {
        Arc::new(RefHandle {
            id,
            rt,
            listed: AtomicBool::new(false),
            adopted: false,
        })
    }

    /// Lists this group in [`GROUPS`], once: its id is about to leave the process in a value.
    pub(crate) fn list(self: &Arc<Self>) {
        if self.listed.swap(true, Ordering::AcqRel) {
            return;
        }
        GROUPS
            .lock()
            .get_or_insert_with(HashMap::new)
            .insert((self.rt.owner(), self.id), Arc::downgrade(self));
    }

    /// This process's group for `id` on `rt`: the listed one if it lives, else a new one, which
    /// the scheduler counts as one more holder (if the object still exists; if not, `get` of it
    /// says `ObjectLost`).
    pub(crate) fn adopt(id: ObjectId, rt: Runtime) -> Arc<RefHandle> {
        let mut groups = GROUPS.lock();
        let map = groups.get_or_insert_with(HashMap::new);
        let key = (rt.owner(), id);
        if let Some(h) = map.get(&key).and_then(Weak::upgrade) {
            return h;
        }
        let h = Arc::new(RefHandle {
            id,
            rt,
            listed: AtomicBool::new(true),
            adopted: true,
        });
        map.insert(key, Arc::downgrade(&h));
        // Told while the list is locked, so a group of the same id dropping on another thread
        // releases either before or after, never between the lookup and the count.
        h.rt.add_ref(id);
        h
    }
}

impl RefHandle {
    /// A group for `id` that the scheduler already counted for this process (an item of a
    /// streaming task, counted by the head as it forwarded it). If this process holds a listed
    /// group for `id` already, that one is returned and the extra count given back.
    pub(crate) fn adopt_counted(id: ObjectId, rt: Runtime) -> Arc<RefHandle> {
        let groups = GROUPS.lock();
        if let Some(h) = groups
            .as_ref()
            .and_then(|map| map.get(&(rt.owner(), id)))
            .and_then(Weak::upgrade)
        {
            h.rt.uncount(id);
            return h;
        }
        drop(groups);
        Arc::new(RefHandle {
            id,
            rt,
            listed: AtomicBool::new(false),
            adopted: true,
        })
    }
}

impl Drop for RefHandle {
    fn drop(&mut self) {
        if !self.listed.load(Ordering::Acquire) {
            self.rt.release(self.id, self.adopted);
            return;
        }
        // Released with the list locked: a group of the same id decoded next on another thread
        // is made (and counted) after this one's release, whose effects (the local copy of the
        // value dropped) are then over.
        let mut groups = GROUPS.lock();
        if let Some(map) = groups.as_mut() {
            let key = (self.rt.owner(), self.id);
            // Only this group's entry: a newer group of the same id may have replaced it.
            if map
                .get(&key)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
            {
                map.remove(&key);
            }
        }
        self.rt.release(self.id, self.adopted);
        drop(groups);
    }
}

/// A handle to the value of a task or `put`, of type `T`.
///
/// Resolve it with [`get`](crate::get) (blocking), [`get_timeout`](crate::get_timeout), or by
/// `.await` (it is a `Future`). Pass it as an argument to another remote function to make that
/// task wait for it: the value moves only where it is needed.
pub struct ObjectRef<T> {
    pub(crate) handle: Arc<RefHandle>,
    _t: PhantomData<fn() -> T>,
}

impl<T> ObjectRef<T> {
    pub(crate) fn from_raw(id: ObjectId, rt: Runtime) -> Self {
        Self::from_handle(RefHandle::new(id, rt))
    }

    pub(crate) fn from_handle(handle: Arc<RefHandle>) -> Self {
        ObjectRef {
            handle,
            _t: PhantomData,
        }
    }

    /// The object's id.
    pub fn id(&self) -> ObjectId {
        self.handle.id
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.handle.rt
    }
}

impl<T> Clone for ObjectRef<T> {
    fn clone(&self) -> Self {
        ObjectRef {
            handle: self.handle.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for ObjectRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ObjectRef<{}>({})",
            std::any::type_name::<T>(),
            self.handle.id
        )
    }
}

impl<T> PartialEq for ObjectRef<T> {
    fn eq(&self, other: &Self) -> bool {
        self.handle.id == other.handle.id
    }
}

impl<T> Eq for ObjectRef<T> {}

impl<T> std::hash::Hash for ObjectRef<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.handle.id.hash(state)
    }
}

/// A ref is written as its object's id; the encoder notes it (see the module docs).
impl<T> serde::Serialize for ObjectRef<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        codec::note_ref(&self.handle);
        s.serialize_u64(self.handle.id.0)
    }
}

/// A ref is read back as a ref group of this process for the runtime the value is decoded for
/// (the one of the `ObjectRef` being read, the task's, or the current one).
impl<'de, T> serde::Deserialize<'de> for ObjectRef<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = ObjectId(<u64 as serde::Deserialize>::deserialize(d)?);
        let rt = codec::decoding_runtime().ok_or_else(|| {
            <D::Error as serde::de::Error>::custom(
                "an ObjectRef can only be decoded where a Starling runtime is running",
            )
        })?;
        Ok(ObjectRef::from_handle(RefHandle::adopt(id, rt)))
    }
}

impl<T: RemoteValue> Future for ObjectRef<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.handle.rt.poll_object(self.handle.id, cx.waker()) {
            Poll::Ready(Ok(blob)) => Poll::Ready(codec::decode_for(&self.handle.rt, &blob)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One argument of a remote call, as `#[remote]` stubs receive it.
#[doc(hidden)]
pub enum ArgValue {
    /// An encoded value with the refs nested in it (or why it could not be encoded).
    Value(Result<codec::Encoded, Error>),
    /// A dependency.
    Ref(Arc<RefHandle>),
}

/// What a remote function's parameter of type `T` accepts: a `T`, an `ObjectRef<T>` or a
/// `&ObjectRef<T>`.
pub trait IntoArg<T> {
    #[doc(hidden)]
    fn into_arg(self) -> ArgValue;
}

impl<T: RemoteValue> IntoArg<T> for T {
    fn into_arg(self) -> ArgValue {
        ArgValue::Value(codec::encode_nested(&self))
    }
}

impl<T> IntoArg<T> for ObjectRef<T> {
    fn into_arg(self) -> ArgValue {
        ArgValue::Ref(self.handle)
    }
}

impl<T> IntoArg<T> for &ObjectRef<T> {
    fn into_arg(self) -> ArgValue {
        ArgValue::Ref(self.handle.clone())
    }
}

/// `f::remote("text")` for a `String` parameter.
impl IntoArg<String> for &str {
    fn into_arg(self) -> ArgValue {
        ArgValue::Value(codec::encode(self).map(codec::Encoded::plain))
    }
}

#[cfg(test)]
mod tests {
    //! `get` of an object that does not exist (an id nobody made, or one already freed) is a
    //! typed error at once, in process and through a head; an oversized `put` from outside the
    //! cluster's nodes is refused with the size and the limit, and the head serves on.

    use std::time::{Duration, Instant};

    use super::*;
    use crate::runtime::Config;

    fn forged<T>(rt: &Runtime, id: u64) -> ObjectRef<T> {
        ObjectRef::from_raw(ObjectId(id), rt.clone())
    }

    fn assert_lost<T: RemoteValue + std::fmt::Debug>(r: &ObjectRef<T>) {
        let t = Instant::now();
        let e = crate::get(r).unwrap_err();
        assert_eq!(e, Error::ObjectLost(r.id()));
        let e = crate::__private::block_on(r.clone()).unwrap_err();
        assert_eq!(e, Error::ObjectLost(r.id()));
        assert!(t.elapsed() < Duration::from_secs(5), "fails fast");
    }

    #[test]
    fn a_decoded_ref_is_this_process_s_group_for_the_id() {
        let rt = Runtime::in_process(1).unwrap();
        let _g = rt.enter();
        let x = crate::put(5u64).unwrap();
        let encoded = codec::encode_nested(&vec![x.clone(), x.clone()]).unwrap();
        assert_eq!(encoded.ref_ids(), [x.id(), x.id()], "both refs are noted");
        let back: Vec<ObjectRef<u64>> = codec::decode(&encoded.bytes).unwrap();
        assert!(
            back.iter().all(|r| Arc::ptr_eq(&r.handle, &x.handle)),
            "the live group is reused, not doubled"
        );
        // Once every group is gone, decoding the id again finds the object freed.
        let id = x.id();
        drop((x, back, encoded));
        let deadline = Instant::now() + Duration::from_secs(5);
        while rt.stats().objects > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let stale: ObjectRef<u64> = codec::decode(&codec::encode(&id.0).unwrap()).unwrap();
        assert_lost(&stale);
        rt.shutdown();
    }

    #[test]
    fn in_process_unknown_and_freed_ids_are_lost_not_hangs() {
        let rt = Runtime::in_process(1).unwrap();
        let _g = rt.enter();
        assert_lost(&forged::<u64>(&rt, 1 << 50));
        assert_lost(&forged::<u64>(&rt, u64::MAX));
        // A freed object: put, drop the only ref, then forge one with its id.
        let r = crate::put(5u64).unwrap();
        let id = r.id().0;
        assert_eq!(crate::get(&r).unwrap(), 5);
        drop(r);
        let deadline = Instant::now() + Duration::from_secs(5);
        while rt.stats().objects > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_lost(&forged::<u64>(&rt, id));
        // Real objects still resolve.
        assert_eq!(crate::get(&crate::put(7u64).unwrap()).unwrap(), 7);
        rt.shutdown();
    }

    #[test]
    fn through_a_head_unknown_ids_are_lost_and_oversized_puts_refused() {
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = std::env::temp_dir().join(format!("starling-objref-unit-{}", std::process::id()));
        let head = io
            .block_on(starling_head::serve(starling_head::HeadConfig::new(
                "127.0.0.1:0".parse().unwrap(),
                dir.clone(),
            )))
            .unwrap();
        let rt =
            Runtime::start(Config::connect(head.addr().to_string()).token(head.token().expose()))
                .unwrap();
        let _g = rt.enter();
        // An id of another client's range (the head says it is lost), and one of this
        // client's range it never issued.
        assert_lost(&forged::<u64>(&rt, (999 << 40) | 5));
        assert_lost(&forged::<u64>(&rt, 3));
        let mine = crate::put(1u64).unwrap();
        assert_lost(&forged::<u64>(&rt, mine.id().0 + 1000));

        // A value over the limit for a driver without a node store.
        let big = crate::Bytes::new(vec![0u8; crate::cluster::client::MAX_MESSAGE_BYTES]);
        match crate::put(big) {
            Err(Error::ObjectTooLarge { size, limit }) => {
                assert!(size > limit, "{size} > {limit}");
                let text = Error::ObjectTooLarge { size, limit }.to_string();
                assert!(text.contains(&size.to_string()) && text.contains(&limit.to_string()));
            }
            other => panic!("expected ObjectTooLarge, got {other:?}"),
        }
        // The session and the head serve on.
        assert_eq!(crate::get(&mine).unwrap(), 1);
        assert_eq!(
            crate::get(&crate::put("after".to_string()).unwrap()).unwrap(),
            "after"
        );
        drop(mine);
        rt.shutdown();
        drop(head);
        drop(io);
        let _ = std::fs::remove_dir_all(dir);
    }
}
