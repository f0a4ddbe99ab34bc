//! The cluster's status, as `starling status` shows it.

use crate::node::StoreUsage;
use crate::state::json_string;
use crate::{JobId, NodeId, ResourceSet, TaskId};

/// Which part of the cluster to describe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusRequest {
    /// Set by a job's processes: only the job's instances are listed.
    pub job: JobId,
}

/// Asks why a task has not started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingRequest {
    pub task: TaskId,
}

/// Why a task has not started (`None`: it runs, ended, or is unknown).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingReply {
    pub reason: Option<String>,
}

/// Asks for the live actor of a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActorNameRequest {
    pub name: String,
}

/// The live actor of a name (`None`: none has it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActorNameReply {
    pub actor: Option<TaskId>,
}

/// One node as the head sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeStatus {
    pub id: NodeId,
    pub address: String,
    pub total: ResourceSet,
    pub available: ResourceSet,
    pub alive: bool,
    pub workers: u32,
    pub store: StoreUsage,
    pub pool: String,
}

/// The cluster's nodes and the head's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusReply {
    pub nodes: Vec<NodeStatus>,
    pub submitted: u64,
    pub queued: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub objects: u64,
    pub head_store_bytes: u64,
    /// Task runs retried after a lost worker, a lost argument or an application error.
    pub retried: u64,
    /// Task runs made to remake objects lost with their node (lineage reconstruction).
    pub reconstructed: u64,
    /// Values the head holds on its disk, past its memory budget.
    pub head_spilled_bytes: u64,
    /// Tasks the head holds (queued, waiting for arguments or running).
    pub live: u64,
    /// The limit of live tasks past which drivers that submit more wait.
    pub max_live: u64,
    /// Drivers waiting for room now.
    pub drivers_waiting: u32,
    /// The most tasks the head held at once since it started.
    pub peak_live: u64,
    /// Tasks no node can hold now (they wait for one that can).
    pub infeasible: u64,
    /// The first few of them, with why.
    pub infeasible_tasks: Vec<(TaskId, String)>,
    /// Every actor the head knows (dead ones too), oldest first.
    pub actors: Vec<ActorStatus>,
}

/// One actor as the head sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActorStatus {
    /// The actor (its creation task's id).
    pub id: TaskId,
    pub class_name: String,
    /// Its name (empty: none).
    pub name: String,
    /// `PENDING_CREATION`, `ALIVE`, `RESTARTING` or `DEAD`.
    pub state: String,
    /// Why it died (empty unless dead).
    pub cause: String,
    /// The node it runs on (alive only).
    pub node: Option<NodeId>,
    pub restarts: u32,
    pub calls_served: u64,
    /// The job that created it.
    pub job: JobId,
}

impl ActorStatus {
    /// As one JSON object (Ray's field names: `actor_id`, `class_name`, `state`,
    /// `death_cause`, `num_restarts`, ..).
    pub fn to_json(&self) -> String {
        format!(
            "{{\"actor_id\":{},\"class_name\":{},\"name\":{},\"state\":{},\"death_cause\":{},\
             \"node_id\":{},\"num_restarts\":{},\"calls_served\":{},\"job_id\":{}}}",
            json_string(&self.id.to_string()),
            json_string(&self.class_name),
            json_string(&self.name),
            json_string(&self.state),
            json_string(&self.cause),
            self.node
                .map_or("null".into(), |n| json_string(&n.to_string())),
            self.restarts,
            self.calls_served,
            json_string(&self.job.to_string()),
        )
    }
}

impl NodeStatus {
    /// As one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"node_id\":{},\"address\":{},\"state\":{},\"pool\":{},\"workers\":{},\
             \"cpu_total\":{},\"cpu_available\":{},\"store_memory_bytes\":{},\
             \"store_spilled_bytes\":{},\"store_objects\":{},\"resources\":{{{}}}}}",
            json_string(&self.id.to_string()),
            json_string(&self.address),
            json_string(if self.alive { "ALIVE" } else { "DEAD" }),
            json_string(&self.pool),
            self.workers,
            self.total.get("CPU"),
            self.available.get("CPU"),
            self.store.memory_bytes,
            self.store.spilled_bytes,
            self.store.objects,
            self.total
                .iter_units()
                .map(|(name, _)| format!(
                    "{}:{{\"total\":{},\"available\":{}}}",
                    json_string(name),
                    self.total.get(name),
                    self.available.get(name)
                ))
                .collect::<Vec<_>>()
                .join(","),
        )
    }
}
