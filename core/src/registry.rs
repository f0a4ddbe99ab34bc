//! The function registry: every `#[remote]` function of this binary, by its stable name.
//!
//! `#[remote]` adds a [`Registration`] to the [`REMOTE_FUNCTIONS`] distributed slice (`linkme`):
//! the linker gathers them into one section, so the registry is complete before any code runs,
//! including the worker-mode hook that runs before `main`. The first lookup indexes them. Names are `module::path::fn#hash-of-signature`, so a worker running
//! a different build of a changed function reports `FunctionNotFound` instead of decoding
//! arguments of the wrong type.

use std::sync::OnceLock;

use starling_proto::hash::IdMap;

use crate::__private::{InvokeAsyncFn, InvokeFn};

/// One registered function (emitted by `#[remote]`).
#[doc(hidden)]
#[derive(Debug)]
pub struct Registration {
    pub(crate) name: &'static str,
    pub(crate) invoke: InvokeFn,
    pub(crate) invoke_async: Option<InvokeAsyncFn>,
}

impl Registration {
    /// A registration of `invoke` under `name`.
    pub const fn new(name: &'static str, invoke: InvokeFn) -> Self {
        Registration {
            name,
            invoke,
            invoke_async: None,
        }
    }

    /// A registration of an async function, whose tasks may also run together on one worker
    /// through `invoke_async`.
    pub const fn with_async(
        name: &'static str,
        invoke: InvokeFn,
        invoke_async: InvokeAsyncFn,
    ) -> Self {
        Registration {
            name,
            invoke,
            invoke_async: Some(invoke_async),
        }
    }
}

/// Every `#[remote]` function linked into this binary.
#[linkme::distributed_slice]
pub static REMOTE_FUNCTIONS: [Registration];

pub(crate) struct Entry {
    pub invoke: InvokeFn,
    /// For an async function: its entry point for tasks run together (`max_concurrency`).
    pub invoke_async: Option<InvokeAsyncFn>,
}

pub(crate) struct Registry {
    /// On the engine's fast hasher: every task looks its function up by name on its worker, to
    /// find its entry point.
    by_name: IdMap<&'static str, Entry>,
    /// Names registered more than once (same module, name and signature, in different function
    /// bodies). Calls to them would be ambiguous, so the runtime refuses to start.
    pub duplicates: Vec<&'static str>,
}

impl Registry {
    pub fn get() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            let mut by_name = IdMap::default();
            let mut duplicates = Vec::new();
            for r in REMOTE_FUNCTIONS.iter() {
                match by_name.entry(r.name) {
                    std::collections::hash_map::Entry::Occupied(_) => duplicates.push(r.name),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(Entry {
                            invoke: r.invoke,
                            invoke_async: r.invoke_async,
                        });
                    }
                }
            }
            Registry {
                by_name,
                duplicates,
            }
        })
    }

    pub fn lookup(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name)
    }

    /// The entry point of `name` for tasks run together, if it is an async function here.
    pub fn async_entry(&self, name: &str) -> Option<InvokeAsyncFn> {
        self.lookup(name)?.invoke_async
    }
}

/// An id of this build, reported in `FunctionNotFound` errors: the executable's path, size and
/// modification time, hashed.
pub(crate) fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let exe = std::env::current_exe().ok();
        exe.hash(&mut h);
        if let Some(m) = exe.and_then(|p| std::fs::metadata(p).ok()) {
            m.len().hash(&mut h);
            m.modified().ok().hash(&mut h);
        }
        format!("{:016x}", h.finish())
    })
}
