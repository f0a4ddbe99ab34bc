//! The object directory: where each object is, whether it exists yet, and who refers to it.
//!
//! # Invariants
//! - An entry exists from the moment its task is submitted (or its value `put`) until it is
//!   freed; a freed id is never reused.
//! - `handles` counts live `ObjectRef` groups in drivers and workers; `task_refs` counts tasks
//!   not yet finished that take the object as an argument. An object is freed exactly when both
//!   are zero and it is no longer pending.
//! - `dependents` is non-empty only while the object is pending.

use std::sync::Arc;

use starling_proto::{NodeId, TaskFailure, TaskId};

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
}

#[derive(Debug)]
pub(crate) struct ObjectEntry {
    pub state: ObjectState,
    pub handles: u32,
    pub task_refs: u32,
    /// Tasks waiting for this object (only while pending). Usually zero or one, so a `Vec`.
    pub dependents: Vec<TaskId>,
}

impl ObjectEntry {
    pub fn pending(handles: u32) -> Self {
        ObjectEntry {
            state: ObjectState::Pending,
            handles,
            task_refs: 0,
            dependents: Vec::new(),
        }
    }

    /// Whether nothing refers to the object and it has settled, so it can be freed.
    #[inline]
    pub fn is_garbage(&self) -> bool {
        self.handles == 0 && self.task_refs == 0 && self.state != ObjectState::Pending
    }

    pub fn location(&self) -> Option<NodeId> {
        match self.state {
            ObjectState::Ready { node, .. } => Some(node),
            _ => None,
        }
    }
}
