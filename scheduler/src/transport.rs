//! The scheduler's only way out.

use std::sync::Arc;

use starling_proto::{
    JobId, NodeId, ObjectId, RemoteError, TaskEnv, TaskFailure, TaskId, TaskSpec, WorkerId,
};

/// What the scheduler asks the outside world to do. Implementations must not call back into the
/// scheduler: they queue messages, wake threads or write to streams, and return.
pub trait Transport {
    /// Run `task` on `worker` (an idle worker of `node`), holding the GPUs with these ids
    /// (empty for a task that needs none).
    fn dispatch(
        &mut self,
        node: NodeId,
        worker: WorkerId,
        task: &Arc<TaskSpec>,
        gpu_ids: &[Arc<str>],
    );

    /// `object` will never get a value: tell whoever waits for it.
    fn object_failed(&mut self, object: ObjectId, failure: &Arc<TaskFailure>);

    /// `object` has a value stored on `node`. Sent once per object (default: nothing to do,
    /// in-process stores wake their own waiters).
    fn object_ready(&mut self, _object: ObjectId, _node: NodeId) {}

    /// Nobody refers to `object` any more: drop its value from `node`'s store.
    fn free_object(&mut self, object: ObjectId, node: Option<NodeId>);

    /// `node` has resources for more work of `job` but no idle worker of it with the
    /// environment `env`: start one more, with `env` set.
    fn request_worker(&mut self, node: NodeId, job: JobId, env: &TaskEnv);

    /// Stop `task`, running on `worker`: `force` kills it, otherwise it is asked to stop.
    fn cancel_running(&mut self, worker: WorkerId, task: TaskId, force: bool);

    /// Stop `worker`'s process (an actor's, killed or ended). The scheduler has already let the
    /// worker go; a later report of its exit changes nothing.
    fn kill_worker(&mut self, worker: WorkerId);

    /// `worker` hosts a detached actor: its process outlives the end of its job (default:
    /// nothing to do; in-process there is no process to keep).
    fn keep_worker(&mut self, _worker: WorkerId) {}

    /// A task of `job` failed for good (retries spent), for a reason of its own: not
    /// cancelled, not because an argument failed. The head keeps the last one per job to say
    /// why a job's entrypoint gave up (default: nothing to do).
    fn task_failed(&mut self, _job: JobId, _failure: &Arc<TaskFailure>) {}

    /// No node can hold `task` now (`reason`): it waits for one that can. Said each time a
    /// scheduling pass finds it so; the submitter warns once per reason, as Ray does (default:
    /// nothing to do).
    fn task_infeasible(&mut self, _task: &TaskSpec, _reason: &str) {}
}

/// How one run of a task ended, as reported by the worker that ran it.
#[derive(Clone, Debug)]
pub enum TaskOutcome {
    /// The value is stored on the worker's node; `size` is its encoded length.
    Stored {
        /// Encoded size in bytes.
        size: u64,
    },
    /// The values of a task with several returns are stored on the worker's node; their
    /// encoded lengths, in order.
    Returns(Vec<u64>),
    /// The function panicked or returned `Err`.
    Failed(RemoteError),
    /// An argument did not decode as the function's parameter type.
    BadArgument(RemoteError),
    /// The worker's build has no function of that name.
    FunctionNotFound {
        /// The worker's build id.
        build: String,
    },
}
