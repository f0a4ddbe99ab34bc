//! `ObjectRef<T>`: a typed, reference-counted handle to a value that exists or will.
//!
//! All clones of one `ObjectRef` share one handle; when the last clone drops, the scheduler is
//! told, and the object is freed once no task needs it either.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

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
}

impl Drop for RefHandle {
    fn drop(&mut self) {
        self.rt.release(self.id);
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
        ObjectRef {
            handle: Arc::new(RefHandle { id, rt }),
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

impl<T: RemoteValue> Future for ObjectRef<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.handle.rt.poll_object(self.handle.id, cx.waker()) {
            Poll::Ready(Ok(blob)) => Poll::Ready(codec::decode_shared(&blob)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One argument of a remote call, as `#[remote]` stubs receive it.
#[doc(hidden)]
pub enum ArgValue {
    /// An encoded value (or why it could not be encoded).
    Value(Result<Vec<u8>, Error>),
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
        ArgValue::Value(codec::encode(&self))
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
        ArgValue::Value(codec::encode(self))
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
