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
    /// The value of field `key` as text, for filters (`None`: no such field): `actor_id`,
    /// `class_name`, `name`, `state`, `node_id`, `job_id` (ids as their numbers).
    pub fn field(&self, key: &str) -> Option<String> {
        Some(match key {
            "actor_id" | "id" => self.id.0.to_string(),
            "class_name" | "class" => self.class_name.clone(),
            "name" => self.name.clone(),
            "state" => self.state.clone(),
            "node_id" | "node" => self.node.map(|n| n.0.to_string()).unwrap_or_default(),
            "job_id" | "job" => self.job.0.to_string(),
            _ => return None,
        })
    }

    /// The actors of `actors` that pass every filter; an unknown field is an error naming the
    /// known ones.
    pub fn filter(
        actors: Vec<ActorStatus>,
        filters: &[crate::state::Filter],
    ) -> Result<Vec<ActorStatus>, String> {
        if let Some(f) = filters
            .iter()
            .find(|f| ActorStatus::default().field(&f.key).is_none())
        {
            return Err(format!(
                "unknown actor field `{}` in filter `{f}`; known: actor_id, class_name, name, \
                 state, node_id, job_id",
                f.key
            ));
        }
        Ok(actors
            .into_iter()
            .filter(|a| {
                filters
                    .iter()
                    .all(|f| a.field(&f.key).is_some_and(|v| f.accepts(&v)))
            })
            .collect())
    }

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
