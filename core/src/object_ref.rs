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
