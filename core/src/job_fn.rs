//! `#[starling::job]` functions: the submit side and the job mode that runs them.
//!
//! `train::submit(&client, x)` encodes each argument with the codec, wraps them in one
//! `Vec<Vec<u8>>`, and submits this very executable as the job's payload
//! ([`JobClient::submit_function`]) with `STARLING_JOB_FUNCTION` naming the function and the
//! encoded arguments as the job's input.
//!
//! On instance 0 the node agent runs that executable with `STARLING_JOB_FUNCTION` set and the
//! input in the file named by `STARLING_JOB_INPUT`. The hook that runs before `main` (see
//! [`crate::cluster::worker`]) sees the variable and calls [`run`] instead of `main`: it looks the
//! function up in [`JOB_FUNCTIONS`], runs it (its tasks go to the job's instances, through the
//! default runtime that `STARLING_HEAD` and `STARLING_JOB_ID` point at the job), and reports the
//! encoded value, or the error with its type, message and backtrace, to the head with
//! `SetJobResult`. The process then exits 0 or 1, so the job ends DONE or FAILED, and
//! [`Job::result`](crate::jobs::Job::result) hands the value or the error back.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use starling_proto::env::{JOB_ID as JOB_ENV, JOB_INPUT as INPUT_ENV};
use starling_proto::jobs::JobResult;

use crate::__private::{InvokeError, RemoteValue};
use crate::codec;
use crate::error::{Error, RemoteError, Result};
use crate::jobs::{Job, JobClient, JobOptions};
use crate::registry::Registration;

/// Every `#[starling::job]` function linked into this binary.
#[linkme::distributed_slice]
pub static JOB_FUNCTIONS: [Registration];

/// The encoded arguments of one job call.
#[derive(Default)]
pub struct JobInput {
    args: Vec<Vec<u8>>,
}

impl JobInput {
    /// Room for `n` arguments.
    pub fn with_capacity(n: usize) -> Self {
        JobInput {
            args: Vec::with_capacity(n),
        }
    }

    /// Encodes the next argument.
    pub fn push<T: RemoteValue>(&mut self, value: &T) -> Result<()> {
        self.args.push(codec::encode(value)?);
        Ok(())
    }
}

/// Submits the job function `function` of this executable with `input` to `pool`.
pub fn submit(
    client: &JobClient,
    function: &'static str,
    input: JobInput,
    pool: &str,
    options: JobOptions,
) -> Result<Job> {
    let input = codec::encode(&input.args)?;
    client.submit_function(function, input, pool, options)
}

/// Job mode: runs the job function `function` and reports its outcome to the head. Returns the
/// process's exit code: 0 when the function returned a value and the head has it, 1 otherwise.
pub(crate) fn run(function: &str) -> i32 {
    let outcome = call(function);
    // Tasks still in flight are not waited for: the function has returned.
    if let Some(rt) = crate::runtime::current() {
        rt.shutdown();
    }
    if let Err(e) = &outcome {
        eprintln!(
            "starling job: {} failed: {}: {}",
            short(function),
            e.type_name,
            e.message
        );
        // A panic's backtrace is in the log already (the panic hook printed it).
        if !e.backtrace.is_empty() && e.type_name != "panic" {
            eprintln!("{}", e.backtrace);
        }
    }
    match report(&outcome) {
        Ok(()) if outcome.is_ok() => 0,
        Ok(()) => 1,
        Err(e) => {
            eprintln!("starling job: cannot report the result to the head: {e}");
            1
        }
    }
}

fn short(function: &str) -> &str {
    let name = function.split('#').next().unwrap_or(function);
    name.rsplit("::").next().unwrap_or(name)
}

/// Looks the function up, decodes its input and runs it, catching panics.
fn call(function: &str) -> std::result::Result<Vec<u8>, RemoteError> {
    let entry = JOB_FUNCTIONS
        .iter()
        .find(|r| r.name == function)
        .ok_or_else(|| {
            RemoteError::new(
                "starling::FunctionNotFound",
                format!(
                    "this executable has no #[starling::job] function `{function}` (was it \
                     rebuilt since the job was submitted?)"
                ),
            )
        })?;
    let input = match std::env::var_os(INPUT_ENV) {
        Some(path) => std::fs::read(&path).map_err(|e| {
            RemoteError::new(
                "starling::JobInput",
                format!("cannot read {}: {e}", path.to_string_lossy()),
            )
        })?,
        None => Vec::new(),
    };
    let args: Vec<Vec<u8>> = if input.is_empty() {
        Vec::new()
    } else {
        codec::decode(&input)
            .map_err(|e| RemoteError::new("starling::Codec", format!("the job's input: {e}")))?
    };
    let slices: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let panic = install_panic_hook();
    match catch_unwind(AssertUnwindSafe(|| (entry.invoke)(&slices))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(InvokeError::Application(e) | InvokeError::BadArgument(e))) => Err(e),
        Err(_) => {
            let (message, backtrace) = panic
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_else(|| ("panic with a non-string payload".into(), String::new()));
            Err(RemoteError {
                type_name: "panic".into(),
                message,
                backtrace,
            })
        }
    }
}

type PanicSlot = &'static Mutex<Option<(String, String)>>;

/// Records the first panic on this thread (message with location, and a backtrace) for the
/// job's error; the previous hook still prints it, so the log has it too.
fn install_panic_hook() -> PanicSlot {
    static SLOT: Mutex<Option<(String, String)>> = Mutex::new(None);
    let main = std::thread::current().id();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() == main {
            let msg = crate::runtime::exec::panic_message(info.payload());
            let location = info
                .location()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            let bt = std::backtrace::Backtrace::force_capture().to_string();
            let mut slot = SLOT.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert((format!("{msg}{location}"), bt));
        }
        prev(info);
    }));
    &SLOT
}

/// Sends the outcome to the head named by `STARLING_HEAD`.
fn report(outcome: &std::result::Result<Vec<u8>, RemoteError>) -> Result<()> {
    let job: u64 = std::env::var(JOB_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            Error::JobRequest(format!(
                "{JOB_ENV} is not set: a #[starling::job] function runs as a submitted job"
            ))
        })?;
    JobClient::from_env()?.set_result(JobResult {
        job,
        outcome: outcome.clone(),
    })
}
