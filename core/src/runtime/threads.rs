//! Threads for the calls of a threaded actor (a sync actor with `max_concurrency > 1`, Ray's
//! threaded actors): each call runs on a thread of its own, beside the actor's other calls in
//! flight, outside the worker's one-task-at-a-time gate.
//!
//! Threads are kept for reuse: a call goes to an idle thread when one is free and to a new
//! thread otherwise, never behind another call (two calls that wait on each other, such as a
//! barrier, must both run). The scheduler lets at most `max_concurrency` calls of an actor in
//! flight, so the number of threads follows the widest actor of the process. A thread idle for
//! [`IDLE_EXIT`] ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

type Job = Box<dyn FnOnce() + Send>;

/// How long a thread waits for another call before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

struct Threads {
    jobs: Sender<Job>,
    taken: Receiver<Job>,
    /// Threads waiting for a job that no job sent is already promised to.
    idle: AtomicUsize,
}

fn threads() -> &'static Threads {
    static THREADS: OnceLock<Threads> = OnceLock::new();
    THREADS.get_or_init(|| {
        let (jobs, taken) = crossbeam::channel::unbounded();
        Threads {
            jobs,
            taken,
            idle: AtomicUsize::new(0),
        }
    })
}

/// Runs `job` on a thread of its own: an idle one (promised to it before it is sent, so no
/// other job can take it first), or a new one.
pub(crate) fn run(job: impl FnOnce() + Send + 'static) {
    let t = threads();
    let promised = t
        .idle
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let mut job: Job = Box::new(job);
    if promised {
        match t.jobs.send(job) {
            Ok(()) => return,
            Err(unsent) => job = unsent.into_inner(),
        }
    }
    // The job waits in a slot the new thread takes it from, so that it is not lost if no
    // thread can be started.
    let slot: Arc<Mutex<Option<Job>>> = Arc::new(Mutex::new(Some(job)));
    let mine = slot.clone();
    let spawned = std::thread::Builder::new()
        .name("starling-call".into())
        .spawn(move || {
            if let Some(first) = mine.lock().take() {
                serve(first);
            }
        });
    if let Err(e) = spawned {
        // Out of threads: the call cannot run beside the others; a kept thread runs it as soon
        // as one is free.
        eprintln!("starling: cannot start a thread for an actor call ({e}); it waits for one");
        if let Some(job) = slot.lock().take() {
            let _ = t.jobs.send(job);
        }
    }
}

/// A thread's loop: its first job, then jobs sent to idle threads until none comes for
/// [`IDLE_EXIT`].
fn serve(first: Job) {
    let t = threads();
    first();
    loop {
        t.idle.fetch_add(1, Ordering::SeqCst);
        match t.taken.recv_timeout(IDLE_EXIT) {
            Ok(job) => job(),
            Err(RecvTimeoutError::Timeout) => {
                // Leave unless a job was promised to this thread meanwhile (then take it).
                let left = t
                    .idle
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if left {
                    return;
                }
                match t.taken.recv() {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
