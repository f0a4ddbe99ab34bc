//! Multi-node jobs and compute pools as the scheduler and clients see them: the domain types
//! of the job table, with their protobuf forms converted at the edge (`From` both ways).
//!
//! States are the words clients see and match on (`PENDING`, `RUNNING`, ...), so they are
//! kept as strings, defined once in [`status`] and [`instance_state`].

use std::collections::HashMap;

use prost::Message;

use crate::pb;
use crate::state::json_string;
use crate::wire::DecodeError;
use crate::RemoteError;

/// Job states, as clients see them.
pub mod status {
    /// Waiting for nodes.
    pub const PENDING: &str = "PENDING";
    /// The entrypoint runs.
    pub const RUNNING: &str = "RUNNING";
    /// The entrypoint exited with code 0 and every instance stopped.
    pub const DONE: &str = "DONE";
    /// The entrypoint failed, could not start, or the job could not get its instances.
    pub const FAILED: &str = "FAILED";
    /// Cancelled; its instances are stopping.
    pub const CANCELLING: &str = "CANCELLING";
    /// Cancelled, and every process of it is gone.
    pub const CANCELLED: &str = "CANCELLED";

    /// Whether a job in state `s` has ended.
    pub fn is_final(s: &str) -> bool {
        matches!(s, DONE | FAILED | CANCELLED)
    }
}

/// Instance states, as clients see them.
pub mod instance_state {
    /// Its node serves the job.
    pub const UP: &str = "UP";
    /// Its node was lost while the job ran.
    pub const LOST: &str = "LOST";
    /// The job ended and the instance's processes are gone.
    pub const STOPPED: &str = "STOPPED";
}

/// What a job runs: an uploaded binary or directory (by content id), and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    /// `None`: no payload (refused at submit).
    pub kind: Option<PayloadKind>,
    /// For directories: the file to run, relative to the directory's root (may be empty when
    /// `command` names a program).
    pub entrypoint: String,
    /// The program, and its first arguments, that runs the payload (`python3`); empty: the
    /// binary or the entrypoint is itself the program.
    pub command: Vec<String>,
}

/// An uploaded payload, by its content id (a build id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// A binary.
    Binary(String),
    /// A directory archive.
    Directory(String),
}

/// A job as submitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobSpec {
    pub name: String,
    pub pool: String,
    pub payload: Payload,
    pub args: Vec<String>,
    pub env: HashMap<String, String>,
    pub target_instances: u32,
    /// 0 at submit: the same as `target_instances`.
    pub min_instances: u32,
    /// How long the job may wait for `min_instances` nodes, in milliseconds (0: the default).
    pub instance_timeout_ms: u64,
    /// The input of a `#[starling::job]` function.
    pub input: Vec<u8>,
    /// How many instances may be lost before the job fails; `None`: any number, while at
    /// least `min_instances` remain.
    pub max_instance_failures: Option<u32>,
}

/// One instance of a running or ended job, as the head saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceState {
    pub index: u32,
    pub node: u64,
    /// [`instance_state`]: UP, LOST or STOPPED.
    pub state: String,
    /// Unix milliseconds when it was lost, and why.
    pub lost_ms: u64,
    pub reason: String,
}

/// A job as clients see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobInfo {
    pub id: u64,
    pub spec: JobSpec,
    /// [`status`]: PENDING, RUNNING, DONE, FAILED, CANCELLING, CANCELLED.
    pub status: String,
    /// Why it is pending, or why it failed.
    pub message: String,
    /// The entrypoint's exit code, once it exited.
    pub exit_code: Option<i32>,
    /// Unix milliseconds.
    pub created_ms: u64,
    pub started_ms: u64,
    pub completed_ms: u64,
    /// The nodes of its instances (instance k on `nodes[k]`).
    pub nodes: Vec<u64>,
    /// The value of a `#[starling::job]` function (filled in by the head from its file).
    pub result: Vec<u8>,
    /// The error of a `#[starling::job]` function.
    pub error: Option<RemoteError>,
    /// Every instance the job had, lost ones and replacements included.
    pub instances: Vec<InstanceState>,
}

/// A compute pool as created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub min_nodes: u32,
    /// 0: no limit (nodes join by themselves).
    pub max_nodes: u32,
    /// CPUs of each node the launcher starts (0: the machine's).
    pub num_cpus_per_node: u32,
    /// Whether the head starts and stops the pool's nodes itself.
    pub launched: bool,
    /// Launched nodes idle this long are stopped, down to `min_nodes` (milliseconds).
    pub idle_timeout_ms: u64,
}

/// A pool as clients see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolInfo {
    pub spec: PoolSpec,
    pub nodes: Vec<u64>,
    /// Nodes allocated to jobs.
    pub busy: u32,
    /// Nodes the launcher started that have not joined yet.
    pub starting: u32,
}

/// What instance 0 of a job runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entrypoint {
    pub payload: Payload,
    pub args: Vec<String>,
    pub env: HashMap<String, String>,
    /// The head's address, for the entrypoint's own connection.
    pub head: String,
    /// The input of a `#[starling::job]` function.
    pub input: Vec<u8>,
}

/// A node's part in a job: which instance it is, and for instance 0, what to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobInstance {
    pub job: u64,
    pub instance: u32,
    pub num_instances: u32,
    pub entrypoint: Option<Entrypoint>,
}

/// What a `#[starling::job]` function reported: its value, or its error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobResult {
    pub job: u64,
    pub outcome: Result<Vec<u8>, RemoteError>,
}

/// One file of a directory payload as it travels: its path in the directory, its mode, its
/// bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirFile {
    pub path: String,
    pub mode: u32,
    pub data: Vec<u8>,
}

/// A directory payload's archive: every regular file, encoded for upload.
pub fn encode_archive(files: Vec<DirFile>) -> Vec<u8> {
    pb::DirArchive {
        files: files
            .into_iter()
            .map(|f| pb::DirFile {
                path: f.path,
                mode: f.mode,
                data: f.data,
            })
            .collect(),
    }
    .encode_to_vec()
}

/// The files of an archive made by [`encode_archive`] (paths unchecked: see
/// [`wire::check_archive_path`](crate::wire::check_archive_path)).
pub fn decode_archive(bytes: &[u8]) -> Result<Vec<DirFile>, DecodeError> {
    Ok(pb::DirArchive::decode(bytes)?
        .files
        .into_iter()
        .map(|f| DirFile {
            path: f.path,
            mode: f.mode,
            data: f.data,
        })
        .collect())
}

impl JobInfo {
    /// The record the head keeps of a job on its disk.
    pub fn to_bytes(&self) -> Vec<u8> {
        pb::JobInfo::from(self.clone()).encode_to_vec()
    }

    /// A record made by [`JobInfo::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<JobInfo, DecodeError> {
        Ok(pb::JobInfo::decode(bytes)?.into())
    }
}

impl PoolSpec {
    /// The record the head keeps of a pool on its disk.
    pub fn to_bytes(&self) -> Vec<u8> {
        pb::PoolSpec::from(self.clone()).encode_to_vec()
    }

    /// A record made by [`PoolSpec::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<PoolSpec, DecodeError> {
        Ok(pb::PoolSpec::decode(bytes)?.into())
    }
}

// ---------------------------------------------------------------------------------------------
// Protobuf forms.

impl From<JobResult> for pb::JobResult {
    fn from(r: JobResult) -> Self {
        pb::JobResult {
            job: r.job,
            kind: Some(match r.outcome {
                Ok(v) => pb::job_result::Kind::Value(v),
                Err(e) => pb::job_result::Kind::Error((&e).into()),
            }),
        }
    }
}

impl TryFrom<pb::JobResult> for JobResult {
    type Error = DecodeError;

    fn try_from(r: pb::JobResult) -> Result<Self, DecodeError> {
        let outcome = match r.kind {
            Some(pb::job_result::Kind::Value(v)) => Ok(v),
            Some(pb::job_result::Kind::Error(e)) => Err(e.into()),
            None => return Err(DecodeError("a job result needs a value or an error".into())),
        };
        Ok(JobResult {
            job: r.job,
            outcome,
        })
    }
}

impl From<pb::Payload> for Payload {
    fn from(p: pb::Payload) -> Self {
        Payload {
            kind: p.kind.map(|k| match k {
                pb::payload::Kind::Binary(b) => PayloadKind::Binary(b),
                pb::payload::Kind::Directory(d) => PayloadKind::Directory(d),
            }),
            entrypoint: p.entrypoint,
            command: p.command,
        }
    }
}

impl From<Payload> for pb::Payload {
    fn from(p: Payload) -> Self {
        pb::Payload {
            kind: p.kind.map(|k| match k {
                PayloadKind::Binary(b) => pb::payload::Kind::Binary(b),
                PayloadKind::Directory(d) => pb::payload::Kind::Directory(d),
            }),
            entrypoint: p.entrypoint,
            command: p.command,
        }
    }
}

impl From<pb::JobSpec> for JobSpec {
    fn from(s: pb::JobSpec) -> Self {
        JobSpec {
            name: s.name,
            pool: s.pool,
            payload: s.payload.map(Payload::from).unwrap_or_default(),
            args: s.args,
            env: s.env,
            target_instances: s.target_instances,
            min_instances: s.min_instances,
            instance_timeout_ms: s.instance_timeout_ms,
            input: s.input,
            max_instance_failures: s.max_instance_failures,
        }
    }
}

impl From<JobSpec> for pb::JobSpec {
    fn from(s: JobSpec) -> Self {
        pb::JobSpec {
            name: s.name,
            pool: s.pool,
            // A spec without a payload travels without one (it is refused at submit).
            payload: (s.payload != Payload::default()).then(|| s.payload.into()),
            args: s.args,
            env: s.env,
            target_instances: s.target_instances,
            min_instances: s.min_instances,
            instance_timeout_ms: s.instance_timeout_ms,
            input: s.input,
            max_instance_failures: s.max_instance_failures,
        }
    }
}

impl From<pb::InstanceState> for InstanceState {
    fn from(i: pb::InstanceState) -> Self {
        InstanceState {
            index: i.index,
            node: i.node,
            state: i.state,
            lost_ms: i.lost_ms,
            reason: i.reason,
        }
    }
}

impl From<InstanceState> for pb::InstanceState {
    fn from(i: InstanceState) -> Self {
        pb::InstanceState {
            index: i.index,
            node: i.node,
            state: i.state,
            lost_ms: i.lost_ms,
            reason: i.reason,
        }
    }
}

impl From<pb::JobInfo> for JobInfo {
    fn from(j: pb::JobInfo) -> Self {
        JobInfo {
            id: j.id,
            spec: j.spec.map(JobSpec::from).unwrap_or_default(),
            status: j.status,
            message: j.message,
            exit_code: j.exit_code,
            created_ms: j.created_ms,
            started_ms: j.started_ms,
            completed_ms: j.completed_ms,
            nodes: j.nodes,
            result: j.result,
            error: j.error.map(RemoteError::from),
            instances: j.instances.into_iter().map(InstanceState::from).collect(),
        }
    }
}

impl From<JobInfo> for pb::JobInfo {
    fn from(j: JobInfo) -> Self {
        pb::JobInfo {
            id: j.id,
            spec: Some(j.spec.into()),
            status: j.status,
            message: j.message,
            exit_code: j.exit_code,
            created_ms: j.created_ms,
            started_ms: j.started_ms,
            completed_ms: j.completed_ms,
            nodes: j.nodes,
            result: j.result,
            error: j.error.as_ref().map(pb::RemoteError::from),
            instances: j.instances.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<pb::PoolSpec> for PoolSpec {
    fn from(s: pb::PoolSpec) -> Self {
        PoolSpec {
            name: s.name,
            min_nodes: s.min_nodes,
            max_nodes: s.max_nodes,
            num_cpus_per_node: s.num_cpus_per_node,
            launched: s.launched,
            idle_timeout_ms: s.idle_timeout_ms,
        }
    }
}

impl From<PoolSpec> for pb::PoolSpec {
    fn from(s: PoolSpec) -> Self {
        pb::PoolSpec {
            name: s.name,
            min_nodes: s.min_nodes,
            max_nodes: s.max_nodes,
            num_cpus_per_node: s.num_cpus_per_node,
            launched: s.launched,
            idle_timeout_ms: s.idle_timeout_ms,
        }
    }
}

impl From<PoolInfo> for pb::PoolInfo {
    fn from(p: PoolInfo) -> Self {
        pb::PoolInfo {
            spec: Some(p.spec.into()),
            nodes: p.nodes,
            busy: p.busy,
            starting: p.starting,
        }
    }
}

impl From<pb::PoolInfo> for PoolInfo {
    fn from(p: pb::PoolInfo) -> Self {
        PoolInfo {
            spec: p.spec.map(PoolSpec::from).unwrap_or_default(),
            nodes: p.nodes,
            busy: p.busy,
            starting: p.starting,
        }
    }
}

impl From<Entrypoint> for pb::Entrypoint {
    fn from(e: Entrypoint) -> Self {
        pb::Entrypoint {
            payload: Some(e.payload.into()),
            args: e.args,
            env: e.env,
            head: e.head,
            input: e.input,
        }
    }
}

impl From<pb::Entrypoint> for Entrypoint {
    fn from(e: pb::Entrypoint) -> Self {
        Entrypoint {
            payload: e.payload.map(Payload::from).unwrap_or_default(),
            args: e.args,
            env: e.env,
            head: e.head,
            input: e.input,
        }
    }
}

impl From<JobInstance> for pb::JobInstance {
    fn from(j: JobInstance) -> Self {
        pb::JobInstance {
            job: j.job,
            instance: j.instance,
            num_instances: j.num_instances,
            entrypoint: j.entrypoint.map(Into::into),
        }
    }
}

impl From<pb::JobInstance> for JobInstance {
    fn from(j: pb::JobInstance) -> Self {
        JobInstance {
            job: j.job,
            instance: j.instance,
            num_instances: j.num_instances,
            entrypoint: j.entrypoint.map(Entrypoint::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_survives_its_protobuf_form() {
        let info = JobInfo {
            id: 7,
            spec: JobSpec {
                name: "train".into(),
                pool: "gpu".into(),
                payload: Payload {
                    kind: Some(PayloadKind::Directory("ab".repeat(32))),
                    entrypoint: "run.sh".into(),
                    command: vec!["bash".into()],
                },
                args: vec!["--epochs".into(), "3".into()],
                env: HashMap::from([("SEED".into(), "1".into())]),
                target_instances: 3,
                min_instances: 2,
                instance_timeout_ms: 5_000,
                input: vec![1, 2, 3],
                max_instance_failures: Some(1),
            },
            status: status::RUNNING.into(),
            message: "m".into(),
            exit_code: Some(-9),
            created_ms: 1,
            started_ms: 2,
            completed_ms: 3,
            nodes: vec![4, 5, 6],
            result: vec![9],
            error: Some(RemoteError {
                type_name: "panic".into(),
                message: "boom".into(),
                backtrace: String::new(),
            }),
            instances: vec![InstanceState {
                index: 1,
                node: 5,
                state: instance_state::LOST.into(),
                lost_ms: 10,
                reason: "heartbeat timeout".into(),
            }],
        };
        assert_eq!(JobInfo::from(pb::JobInfo::from(info.clone())), info);
        let pool = PoolInfo {
            spec: PoolSpec {
                name: "gpu".into(),
                min_nodes: 1,
                max_nodes: 4,
                num_cpus_per_node: 2,
                launched: true,
                idle_timeout_ms: 60_000,
            },
            nodes: vec![1, 2],
            busy: 1,
            starting: 1,
        };
        assert_eq!(PoolInfo::from(pb::PoolInfo::from(pool.clone())), pool);
        let instance = JobInstance {
            job: 7,
            instance: 0,
            num_instances: 3,
            entrypoint: Some(Entrypoint {
                payload: info.spec.payload.clone(),
                args: vec!["a".into()],
                env: HashMap::new(),
                head: "127.0.0.1:1".into(),
                input: vec![],
            }),
        };
        assert_eq!(
            JobInstance::from(pb::JobInstance::from(instance.clone())),
            instance
        );
    }
}

/// Names a job in the job RPCs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobRef {
    pub id: u64,
}

/// Names a pool in the pool RPCs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolRef {
    pub name: String,
}

/// A read of one instance's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogRequest {
    pub job: u64,
    pub instance: u32,
    /// Bytes of the log to skip (for following).
    pub offset: u64,
}

/// A piece of a log: an instance's (`JobLogs`) or a node's file (`ReadLog`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogChunk {
    pub data: Vec<u8>,
    /// Where the next read starts.
    pub offset: u64,
    /// Whether no more output will come: the job has ended (`JobLogs`), the process has exited
    /// (`ReadLog`).
    pub ended: bool,
}

/// A read of a log file of a node (its `ObjectService.ReadLog`): a worker process's
/// (`worker-<job>-<pid>.log`) or, with `pid` 0, the node agent's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogFileRequest {
    pub job: u64,
    pub pid: u32,
    /// Bytes of the file to skip (for following).
    pub offset: u64,
    /// Nonzero: only the lines the process printed while it ran this task (the file's lines
    /// tagged `[T<task>]`).
    pub task: u64,
}

impl JobInfo {
    /// As one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"job_id\":{},\"name\":{},\"status\":{},\"pool\":{},\"message\":{},\"nodes\":[{}],\
             \"created_ms\":{},\"started_ms\":{},\"completed_ms\":{},\"exit_code\":{},\
             \"error\":{},\"target_instances\":{},\"instances\":[{}]}}",
            self.id,
            json_string(&self.spec.name),
            json_string(&self.status),
            json_string(&self.spec.pool),
            json_string(&self.message),
            self.nodes
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.created_ms,
            self.started_ms,
            self.completed_ms,
            self.exit_code.map_or("null".into(), |c| c.to_string()),
            self.error
                .as_ref()
                .map_or("null".into(), |e| json_string(&e.to_string())),
            self.spec.target_instances,
            self.instances
                .iter()
                .map(|i| format!(
                    "{{\"index\":{},\"node\":{},\"state\":{},\"lost_ms\":{},\"reason\":{}}}",
                    i.index,
                    i.node,
                    json_string(&i.state),
                    i.lost_ms,
                    json_string(&i.reason)
                ))
                .collect::<Vec<_>>()
                .join(","),
        )
    }
}

impl PoolInfo {
    /// As one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"name\":{},\"nodes\":{},\"busy\":{},\"starting\":{},\"min_nodes\":{},\"max_nodes\":{}}}",
            json_string(&self.spec.name),
            self.nodes.len(),
            self.busy,
            self.starting,
            self.spec.min_nodes,
            self.spec.max_nodes,
        )
    }
}
