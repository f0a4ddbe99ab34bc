//! Newtype ids. Each is a `u64` with a one-letter `Display` prefix (`T42`, `O42`, `N1`, `W3`, `J7`).
//!
//! Task and object ids share one number space: the object a task returns has the same number as
//! the task (`ObjectId::from(task)`), so no table is needed to map one to the other. Objects made
//! by `put` take fresh numbers from the same counter.

use std::fmt;

macro_rules! define_id_type {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[derive(serde::Serialize, serde::Deserialize)]
        pub struct $name(pub u64);

        impl $name {
            /// The raw number.
            #[inline]
            pub const fn as_u64(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl From<u64> for $name {
            #[inline]
            fn from(v: u64) -> Self {
                Self(v)
            }
        }
    };
}

define_id_type!(
    /// A task: one call of a remote function.
    TaskId, "T"
);
define_id_type!(
    /// An object: a task's return value or a `put` value.
    ObjectId, "O"
);
define_id_type!(
    /// A node: one host (or one node agent) with a resource set.
    NodeId, "N"
);
define_id_type!(
    /// A worker: one executor slot (a thread in-process, a process on a node).
    WorkerId, "W"
);
define_id_type!(
    /// A multi-node job.
    JobId, "J"
);

impl From<TaskId> for ObjectId {
    /// The id of the object a task returns.
    #[inline]
    fn from(t: TaskId) -> Self {
        ObjectId(t.0)
    }
}

impl ObjectId {
    /// The task whose return value this object is (or would be, for a `put` object).
    #[inline]
    pub const fn task(self) -> TaskId {
        TaskId(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_compact() {
        assert_eq!(TaskId(42).to_string(), "T42");
        assert_eq!(format!("{:?}", NodeId(1)), "N1");
        assert_eq!(ObjectId::from(TaskId(9)), ObjectId(9));
    }
}
