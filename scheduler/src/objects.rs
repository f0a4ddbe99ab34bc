//! The object directory: where each object is, whether it exists yet, and who refers to it.
//!
//! # Invariants
//! - An entry exists from the moment its task is submitted (or its value `put`) until it is
//!   freed; a freed id is never reused.
//! - `handles` counts live `ObjectRef` groups in drivers and workers (one per process that
//!   holds a ref, plus one per ref group a process deserialized); `task_refs` counts tasks not
//!   yet finished that take the object as an argument or carry a ref to it nested in one;
//!   `nested_in` counts the stored values (of other objects) that hold a ref to it. An object is
//!   freed exactly when all three are zero and it is no longer pending.
//! - A value that holds refs is listed in `Core::nested` (with the objects it refers to) exactly
//!   while it is stored: when it goes (freed, released for lineage, lost with its node), each of
//!   those objects loses one `nested_in`.
//! - `dependents` is non-empty only while the object is pending.
//! - Lineage (when the scheduler keeps it, see [`Core::set_lineage`](crate::Core::set_lineage)):
//!   `lineage` is the spec of the task that makes the object, kept while the entry lives and
//!   dropped when the object fails; `lineage_refs` counts the live entries whose lineage takes the
//!   object as an argument. An object nobody refers to any more loses its value but keeps its
//!   entry ([`ObjectState::Released`]) while `lineage_refs > 0`, so an object made from it can be
//!   made again after a node loss; the entry goes when `lineage_refs` reaches zero.

use std::sync::Arc;

use starling_proto::{NodeId, TaskFailure, TaskId, TaskSpec};

/// The state of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectState {
    /// Its task has not finished yet.
    Pending,
    /// It has a value, stored on `node`.
    Ready {
        /// Where the value lives.
        node: NodeId,
        /// Encoded size in bytes.
        size: u64,
    },
    /// It will never have a value.
    Failed(Arc<TaskFailure>),
    /// It had a value, which is gone (nobody referred to it, or its node was lost); its task can
    /// make it again.
    Released,
}

#[derive(Debug)]
pub(crate) struct ObjectEntry {
    pub state: ObjectState,
    pub handles: u32,
    pub task_refs: u32,
    /// Stored values of other objects that hold a ref to this one.
    pub nested_in: u32,
    /// Tasks waiting for this object (only while pending). Usually zero or one, so a `Vec`.
    pub dependents: Vec<TaskId>,
    /// The task that makes it, to run again if its value is lost.
    pub lineage: Option<Arc<TaskSpec>>,
    /// Live entries whose lineage takes this object as an argument.
    pub lineage_refs: u32,
}

impl ObjectEntry {
    pub fn pending(handles: u32) -> Self {
        ObjectEntry {
            state: ObjectState::Pending,
            handles,
            task_refs: 0,
            nested_in: 0,
            dependents: Vec::new(),
            lineage: None,
            lineage_refs: 0,
        }
    }

    /// An object with a value on `node` (a `put`): one handle, no lineage.
    pub fn ready(node: NodeId, size: u64) -> Self {
        ObjectEntry {
            state: ObjectState::Ready { node, size },
            ..Self::pending(1)
        }
    }

    /// Whether nothing refers to the object and it has settled, so its value can be freed (and
    /// the entry too, unless lineage still needs it).
    #[inline]
    pub fn is_garbage(&self) -> bool {
        !self.is_needed() && self.state != ObjectState::Pending
    }

    /// Whether a handle, a task or another object's value needs the value.
    #[inline]
    pub fn is_needed(&self) -> bool {
        self.handles > 0 || self.task_refs > 0 || self.nested_in > 0
    }

    pub fn location(&self) -> Option<NodeId> {
        match self.state {
            ObjectState::Ready { node, .. } => Some(node),
            _ => None,
        }
    }
}
