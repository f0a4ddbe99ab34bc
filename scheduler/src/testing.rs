//! A transport that records what the scheduler asked for, for reactor tests and benches.

use std::sync::Arc;

use starling_proto::{
    EnvId, JobId, NodeId, ObjectId, TaskEnv, TaskFailure, TaskId, TaskSpec, WorkerId,
};

use crate::jobs::{JobInfo, JobNodeOp, JobTransport, PoolSpec};
use crate::Transport;

/// One request the scheduler made.
#[derive(Clone, Debug, PartialEq)]
pub enum Sent {
    /// `dispatch`.
    Dispatch(NodeId, WorkerId, TaskId),
    /// `object_failed`.
    ObjectFailed(ObjectId, Arc<TaskFailure>),
    /// `object_ready`.
    ObjectReady(ObjectId, NodeId),
    /// `free_object`.
    Free(ObjectId, Option<NodeId>),
    /// `request_worker`, with the id of the environment asked for.
    RequestWorker(NodeId, JobId, EnvId),
    /// `cancel_running`.
    CancelRunning(WorkerId, TaskId, bool),
    /// `kill_worker`.
    KillWorker(WorkerId),
    /// `keep_worker`.
    KeepWorker(WorkerId),
    /// `JobTransport::to_node`.
    ToNode(NodeId, JobNodeOp),
}

/// Records every request in order.
#[derive(Debug, Default)]
pub struct RecordingTransport {
    /// Everything sent so far.
    pub sent: Vec<Sent>,
    /// The environments workers were asked with, by id.
    pub envs: std::collections::HashMap<EnvId, TaskEnv>,
    /// The GPU ids each dispatched task that holds GPUs was given, by task (last dispatch).
    pub gpu_ids: std::collections::HashMap<TaskId, Vec<Arc<str>>>,
    /// The job table as last persisted, by job (a disk that keeps every write).
    pub persisted: std::collections::BTreeMap<u64, JobInfo>,
    /// Pools as last persisted, by name.
    pub pools: std::collections::BTreeMap<String, PoolSpec>,
    /// Values of `#[starling::job]` functions, by job.
    pub results: std::collections::BTreeMap<u64, Vec<u8>>,
    /// Jobs whose driver is connected (`has_driver`).
    pub drivers: std::collections::HashSet<JobId>,
    /// The last task failure of each job (`last_task_failure`).
    pub failures: std::collections::HashMap<JobId, String>,
    /// Jobs reported finished, in order.
    pub finished: Vec<JobId>,
    /// `task_infeasible` calls, in order (kept apart from `sent`).
    pub infeasible: Vec<(TaskId, String)>,
}

impl RecordingTransport {
    /// Takes the recorded requests, leaving none.
    pub fn take(&mut self) -> Vec<Sent> {
        std::mem::take(&mut self.sent)
    }

    /// The tasks dispatched so far, in order, as `(worker, task)`.
    pub fn dispatched(&self) -> Vec<(WorkerId, TaskId)> {
        self.sent
            .iter()
            .filter_map(|s| match s {
                Sent::Dispatch(_, w, t) => Some((*w, *t)),
                _ => None,
            })
            .collect()
    }
}

impl Transport for RecordingTransport {
    fn dispatch(
        &mut self,
        node: NodeId,
        worker: WorkerId,
        task: &Arc<TaskSpec>,
        gpu_ids: &[Arc<str>],
    ) {
        self.sent.push(Sent::Dispatch(node, worker, task.id));
        if !gpu_ids.is_empty() {
            self.gpu_ids.insert(task.id, gpu_ids.to_vec());
        }
    }
    fn object_failed(&mut self, object: ObjectId, failure: &Arc<TaskFailure>) {
        self.sent.push(Sent::ObjectFailed(object, failure.clone()));
    }
    fn object_ready(&mut self, object: ObjectId, node: NodeId) {
        self.sent.push(Sent::ObjectReady(object, node));
    }
    fn free_object(&mut self, object: ObjectId, node: Option<NodeId>) {
        self.sent.push(Sent::Free(object, node));
    }
    fn request_worker(&mut self, node: NodeId, job: JobId, env: &TaskEnv) {
        self.envs.insert(env.id(), env.clone());
        self.sent.push(Sent::RequestWorker(node, job, env.id()));
    }
    fn cancel_running(&mut self, worker: WorkerId, task: TaskId, force: bool) {
        self.sent.push(Sent::CancelRunning(worker, task, force));
    }
    fn kill_worker(&mut self, worker: WorkerId) {
        self.sent.push(Sent::KillWorker(worker));
    }
    fn keep_worker(&mut self, worker: WorkerId) {
        self.sent.push(Sent::KeepWorker(worker));
    }

    fn task_infeasible(&mut self, task: &TaskSpec, reason: &str) {
        self.infeasible.push((task.id, reason.to_string()));
    }
}

impl JobTransport for RecordingTransport {
    fn to_node(&mut self, node: NodeId, op: JobNodeOp) {
        self.sent.push(Sent::ToNode(node, op));
    }
    fn persist_job(&mut self, info: &JobInfo) {
        self.persisted.insert(info.id, info.clone());
    }
    fn persist_pool(&mut self, spec: &PoolSpec) {
        self.pools.insert(spec.name.clone(), spec.clone());
    }
    fn remove_pool(&mut self, name: &str) {
        self.pools.remove(name);
    }
    fn remove_job(&mut self, id: u64) {
        self.persisted.remove(&id);
        self.results.remove(&id);
    }
    fn job_result(&mut self, id: u64, value: Vec<u8>) {
        self.results.insert(id, value);
    }
    fn has_driver(&self, job: JobId) -> bool {
        self.drivers.contains(&job)
    }
    fn last_task_failure(&self, job: JobId) -> Option<String> {
        self.failures.get(&job).cloned()
    }
    fn job_finished(&mut self, job: JobId) {
        self.drivers.remove(&job);
        self.finished.push(job);
    }
}

/// A task spec for tests: `function`, `args`, one CPU, default options.
pub fn task(id: u64, args: Vec<starling_proto::TaskArg>) -> TaskSpec {
    TaskSpec {
        id: TaskId(id),
        function: "test::f#0".into(),
        args,
        resources: starling_proto::ResourceSet::cpus(1.0),
        max_retries: 3,
        attempt: 0,
        job: JobId(0),
        parent: None,
        extras: Default::default(),
    }
}
