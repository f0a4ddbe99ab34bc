//! Procedural macros for Starling, re-exported by the `starling` crate: `#[remote]` and `#[job]`.
//!
//! `#[starling::remote]` turns a free function into a remote function: the function itself stays as
//! it is, and next to it the macro emits a braced unit struct with the same name. Braced structs live
//! only in the type namespace, so `add(1, 2)` still calls the function while `add::remote(1, 2)`
//! submits a task. The struct carries:
//!
//! - `NAME`, the stable registered name: `module_path!()::add#<FNV-1a hash of the signature>`;
//! - `remote(..)` and `options()`, the typed stubs that encode arguments and call
//!   `starling::__private::submit`;
//! - `__invoke`, the `bytes -> bytes` invoker that workers look up by `NAME` in a `linkme` distributed slice.
//!
//! The macro only checks what it can see in tokens (no generics, no references, plain argument
//! names, known options); whether a type is serializable is left to the compiler, through
//! `starling::__private::assert_remote_value` checks spanned at each type so the error points there.
//!
//! Module map: `options` parses the attribute, `signature` validates the function and derives the
//! argument and return shapes, `hash` prints types canonically and hashes them, `expand` writes
//! the generated code of `#[remote]`, `job` parses and writes `#[job]`'s.

use proc_macro::TokenStream;

mod actor;
mod expand;
mod hash;
mod job;
mod options;
mod signature;

/// Makes a free function callable as a Starling task.
///
/// ```text
/// #[starling::remote]
/// fn add(a: i64, b: i64) -> i64 { a + b }
///
/// #[starling::remote(num_cpus = 0.5, num_gpus = 1, resources(tpu = 1.0, "my-res" = 2),
///                    max_retries = 5, retry_exceptions = true)]
/// async fn work(x: Vec<u8>) -> Result<u64, std::io::Error> { Ok(x.len() as u64) }
///
/// let r = add::remote(1, 2);                        // ObjectRef<i64>
/// let s = add::remote(r.clone(), 10);               // depends on r
/// let t = add::options().num_cpus(2.0).remote(1, &s);
/// add(1, 2);                                        // still an ordinary function
/// ```
///
/// Arguments and return values must be serde-serializable and owned (`'static`). A `Result<T, E>`
/// return (any type whose last path segment is `Result`, such as `io::Result<T>`) makes the task's
/// value `T`; an `Err` fails the task with `E`'s `Display` text.
///
/// Options, all optional: `num_cpus = f64`, `num_gpus = f64`, `resources(name = f64, "other-name" =
/// f64, ..)`, `max_retries = u32`, `retry_exceptions = bool` or a list of the error types to
/// retry (`retry_exceptions = [std::io::Error, panic]`: `Err`s of those types, and panics),
/// `scheduling_strategy = expr`, `num_returns = N` (a literal: the function returns an N-tuple,
/// or a `Result` of one, and `f::remote(..)` returns an N-tuple of `ObjectRef`s, each its own
/// object, as Ray's `num_returns`).
#[proc_macro_attribute]
pub fn remote(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::remote(attr.into(), item.into()).into()
}

/// Makes a type an actor (Ray's actors): a worker that keeps its state across calls.
///
/// ```text
/// struct Counter { n: u64 }
///
/// #[starling::actor]
/// impl Counter {
///     fn new(start: u64) -> Self { Counter { n: start } }     // or -> Result<Self, E>
///     fn incr(&mut self, by: u64) -> u64 { self.n += by; self.n }
///     fn get(&self) -> u64 { self.n }
/// }
///
/// let c = Counter::remote(10);                  // CounterHandle: the actor runs elsewhere
/// let r = c.incr(1);                            // ObjectRef<u64>, after earlier calls
/// let c2 = Counter::options().name("main").max_restarts(1).remote(0);
/// let found = starling::get_actor::<Counter>("main")?;
/// c.kill(true)?;
/// ```
///
/// The block needs a constructor `new`; methods take `&self` or `&mut self`, and their
/// arguments and values follow `#[starling::remote]`'s rules (owned serde types, `Result` for
/// errors). The type itself is never serialized (it must be `Send`). The macro emits
/// `TypeHandle` (the typed handle: `Clone`, `Serialize`, one method per method) and
/// `TypeOptions` (`Type::options()`).
#[proc_macro_attribute]
pub fn actor(attr: TokenStream, item: TokenStream) -> TokenStream {
    actor::actor(attr.into(), item.into()).into()
}

/// Makes a free function runnable as a multi-node job.
///
/// ```text
/// #[starling::job(pool = "train", target_instances = 3, min_instances = 2)]
/// fn fit(data: Vec<f64>) -> f64 { .. }      // its tasks run on the job's instances
///
/// let client = starling::jobs::JobClient::from_env()?;
/// let job = fit::submit(&client, data)?;    // this executable is the payload
/// let mean: f64 = job.result()?;            // its value, or its error
/// let job = fit::submit_with(&client, "other-pool", fit::options().target_instances(4), data)?;
/// ```
///
/// Instance 0 of the job runs this executable, which calls the function instead of `main` (a
/// hook that runs before `main` sees the job's `STARLING_JOB_FUNCTION`). Arguments and the value
/// follow the `#[starling::remote]` rules (serializable, owned; a `Result` return makes an `Err`
/// the job's error).
///
/// Options: `pool = "NAME"` (required), `target_instances = u32` (default 1), `min_instances =
/// u32` (default: target), `instance_timeout_secs = u64`, `name = "..."`.
#[proc_macro_attribute]
pub fn job(attr: TokenStream, item: TokenStream) -> TokenStream {
    job::job(attr.into(), item.into()).into()
}
