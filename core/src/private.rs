//! Items the `#[remote]` macro expands to. Not public API: names and signatures may change
//! with any release.

use std::fmt::Display;
use std::future::Future;

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use crate::actor::{
    call as call_actor, call_concurrent as call_actor_concurrent, create as create_actor,
    shared_state as shared_actor_state, store_state as store_actor_state,
    with_state as with_actor_state,
};
pub use crate::codec::Encoded;
pub use crate::job_fn::{submit as submit_job, JobInput, JOB_FUNCTIONS};
pub use crate::registry::{Registration, REMOTE_FUNCTIONS};
pub use linkme;
pub use serde;

use crate::codec;
use crate::error::{Error, RemoteError};
use crate::object_ref::{ArgValue, IntoArg, ObjectRef};
use crate::options::TaskOptions;

/// A value that can be a remote function's argument or return value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an argument or return value of a #[starling::remote] function",
    label = "not serializable",
    note = "remote values are serialized: derive `serde::Serialize` and `serde::Deserialize` \
            for `{Self}` (and make it `Send + 'static`)"
)]
pub trait RemoteValue: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> RemoteValue for T {}

/// Compile-time check that `T` is a [`RemoteValue`].
pub fn assert_remote_value<T: RemoteValue>() {}

/// Why an invocation produced no value.
#[derive(Debug)]
pub enum InvokeError {
    /// An argument did not decode (wrong type, corrupt bytes, wrong count).
    BadArgument(RemoteError),
    /// The function returned `Err`.
    Application(RemoteError),
}

/// The type-erased entry point of a remote function: encoded arguments in, encoded value out.
pub type InvokeFn = fn(&[&[u8]]) -> Result<Vec<u8>, InvokeError>;

/// A running call of an async remote function: its encoded value, once it ends. Polled on the
/// executor thread that started it (it need not be `Send`).
pub type TaskFuture = std::pin::Pin<Box<dyn Future<Output = Result<Vec<u8>, InvokeError>>>>;

/// The entry point of an async remote function that can run beside others on one worker
/// (`max_concurrency`): decodes the arguments and returns the call's future.
pub type InvokeAsyncFn = fn(&[&[u8]]) -> Result<TaskFuture, InvokeError>;

/// Boxes the future of an async call (so the `#[remote]` stub need not name its type).
pub fn task_future(f: impl Future<Output = Result<Vec<u8>, InvokeError>> + 'static) -> TaskFuture {
    Box::pin(f)
}

/// Checks that a task carries exactly the `expected` number of arguments.
pub fn check_arity(args: &[&[u8]], expected: usize) -> Result<(), InvokeError> {
    if args.len() == expected {
        return Ok(());
    }
    Err(InvokeError::BadArgument(RemoteError::new(
        "starling::WrongArgumentCount",
        format!(
            "the function takes {expected} argument(s), the task carries {}",
            args.len()
        ),
    )))
}

/// Decodes argument `index` as a `T`.
pub fn decode_arg<T: RemoteValue>(args: &[&[u8]], index: usize) -> Result<T, InvokeError> {
    let bytes = args.get(index).ok_or_else(|| {
        InvokeError::BadArgument(RemoteError::new(
            "starling::WrongArgumentCount",
            format!(
                "argument {index} missing: the task carries {} argument(s)",
                args.len()
            ),
        ))
    })?;
    codec::decode(bytes).map_err(|e| {
        InvokeError::BadArgument(RemoteError::new(
            "starling::Codec",
            format!("argument {index}: {e}"),
        ))
    })
}

/// Encodes a return value; the refs nested in it wait on this thread for the executor, which
/// reports them with the result.
///
/// In a worker process on a node, a large value is encoded straight into its store file and
/// the bytes returned are empty (the worker reports the value as stored).
pub fn encode_return<T: RemoteValue>(v: &T) -> Result<Vec<u8>, InvokeError> {
    let in_file = codec::encode_nested_into(v, crate::cluster::worker::return_file);
    let encoded = match in_file {
        Ok((codec::Body::Bytes(bytes), refs)) => codec::Encoded { bytes, refs },
        Ok((codec::Body::Written(file), refs)) => {
            match crate::cluster::worker::returned_in_file(file) {
                Ok(()) => codec::Encoded {
                    bytes: Vec::new(),
                    refs,
                },
                // The file could not be completed: the value goes as any other.
                Err(_) => encode_part(v)?,
            }
        }
        // The encoding failed, or writing the file did: in memory, where only the first can.
        Err(_) => encode_part(v)?,
    };
    // Most values hold no refs: then nothing is allocated to say so.
    if !encoded.refs.is_empty() {
        codec::set_returned(vec![encoded.refs]);
    }
    Ok(encoded.bytes)
}

/// Encodes one value of a function with several returns (`#[remote(num_returns = N)]`).
pub fn encode_part<T: RemoteValue>(v: &T) -> Result<codec::Encoded, InvokeError> {
    codec::encode_nested(v)
        .map_err(|e| InvokeError::Application(RemoteError::new("starling::Codec", e.to_string())))
}

/// The encoded values of a function with several returns, as the task's one result buffer; the
/// refs nested in each wait on this thread for the executor, as for [`encode_return`].
pub fn encode_returns(parts: Vec<codec::Encoded>) -> Result<Vec<u8>, InvokeError> {
    let (bytes, refs): (Vec<Vec<u8>>, Vec<_>) =
        parts.into_iter().map(|p| (p.bytes, p.refs)).unzip();
    if refs.iter().any(|r: &Vec<_>| !r.is_empty()) {
        codec::set_returned(refs);
    }
    Ok(codec::frame_returns(&bytes))
}

/// The objects a call of a function with several returns gives back, taken in order by the
/// `#[remote]` stub.
pub struct Returns {
    rt: crate::runtime::Runtime,
    next: u64,
}

impl Returns {
    /// The next return, as an `ObjectRef<T>`.
    #[allow(clippy::should_implement_trait)]
    pub fn next<T>(&mut self) -> ObjectRef<T> {
        let id = starling_proto::ObjectId(self.next);
        self.next += 1;
        ObjectRef::from_raw(id, self.rt.clone())
    }
}

/// Submits a call of `function`, which returns `n` objects, on the current runtime.
pub fn submit_returns(
    function: &'static str,
    args: ArgsBuilder,
    mut options: TaskOptions,
    n: u32,
) -> Returns {
    options.returns = n;
    let rt = crate::runtime::current_or_init();
    let first = rt.submit(function, args, options);
    Returns { rt, next: first.0 }
}

/// Submits a call of the streaming function `function` on the current runtime.
pub fn submit_stream<T>(
    function: &'static str,
    args: ArgsBuilder,
    mut options: TaskOptions,
) -> crate::stream::ObjectRefGenerator<T> {
    options.streaming = true;
    options.returns = 0;
    let rt = crate::runtime::current_or_init();
    let id = rt.submit(function, args, options);
    crate::stream::ObjectRefGenerator::new(ObjectRef::from_raw(id, rt))
}

/// Runs the items of a streaming function as the task yields them: each is `put` and handed to
/// the caller (pausing while the caller is the task's backpressure window behind); the task's
/// value is the number of items.
pub fn stream_items<T: RemoteValue>(
    items: impl IntoIterator<Item = T>,
) -> Result<Vec<u8>, InvokeError> {
    let Some((task, window)) = crate::runtime::exec::current_stream() else {
        return Err(InvokeError::Application(RemoteError::new(
            "starling::NotStreaming",
            "a function that returns an iterator ran as a task that is not streaming",
        )));
    };
    let rt = crate::runtime::current_or_init();
    /// Says the producer is done however the loop ends (a panic included).
    struct Done<'a>(&'a crate::runtime::Runtime, starling_proto::TaskId);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.stream_done(self.1);
        }
    }
    let _done = Done(&rt, task);
    let mut count = 0u64;
    for item in items {
        let item = crate::put(item).map_err(|e| {
            let type_name = match e {
                Error::Codec { .. } => "starling::Codec",
                _ => "starling::StreamItem",
            };
            InvokeError::Application(RemoteError::new(type_name, e.to_string()))
        })?;
        rt.stream_yield(task, count, item.handle, window);
        count += 1;
        if rt.is_cancelled(task) {
            return Err(InvokeError::Application(RemoteError::new(
                "starling::Cancelled",
                format!("cancelled after {count} item(s)"),
            )));
        }
    }
    encode_return(&count)
}

/// Turns the `Err` of a `Result`-returning function into an application error.
pub fn app_error<E: Display>(e: E) -> InvokeError {
    let bt = std::backtrace::Backtrace::capture();
    let backtrace = match bt.status() {
        std::backtrace::BacktraceStatus::Captured => bt.to_string(),
        _ => String::new(),
    };
    InvokeError::Application(RemoteError {
        type_name: std::any::type_name::<E>().to_string(),
        message: e.to_string(),
        backtrace,
    })
}

/// Runs an `async` remote function to completion on the executor thread (with a current-thread
/// tokio runtime, so tokio timers and I/O work inside tasks).
pub fn block_on<F: Future>(f: F) -> F::Output {
    crate::runtime::exec::block_on(f)
}

/// Encoded arguments of one call, plus the refs they depend on (kept alive until the task is
/// registered with the scheduler).
#[derive(Default)]
pub struct ArgsBuilder {
    pub(crate) args: Vec<ArgValue>,
}

impl ArgsBuilder {
    /// Room for `n` arguments.
    pub fn with_capacity(n: usize) -> Self {
        ArgsBuilder {
            args: Vec::with_capacity(n),
        }
    }

    /// Adds the next argument: a value or an `ObjectRef` of one.
    pub fn push<T: RemoteValue, A: IntoArg<T>>(&mut self, a: A) {
        self.args.push(a.into_arg());
    }
}

/// Submits a call of `function` on the current runtime (starting the default one if none).
pub fn submit<R: RemoteValue>(
    function: &'static str,
    args: ArgsBuilder,
    options: TaskOptions,
) -> ObjectRef<R> {
    let rt = crate::runtime::current_or_init();
    let id = rt.submit(function, args, options);
    ObjectRef::from_raw(id, rt)
}

#[allow(dead_code)]
fn _assert_error_is_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Error>();
}
