//! Newtype ids. Each is a `u64` with a one-letter `Display` prefix (`T42`, `O42`, `N1`, `W3`, `J7`).
//!
//! Task and object ids share one number space: the object a task returns has the same number as
//! the task (`ObjectId::from(task)`), so no table is needed to map one to the other. Objects made
//! by `put` take fresh numbers from the same counter.
//!
//! In a cluster, the top 24 bits of a task or object id are the number of the session that
//! made it ([`SESSION_SHIFT`]) and the rest count up within that session ([`COUNTER_MASK`]):
//! the head hands each session its range (`Welcome::id_base`), so ids are made without asking
//! it, and an id names its owner's session (and so its job).

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

        impl crate::id_table::TableId for $name {
            #[inline]
            fn number(self) -> u64 {
                self.0
            }
            #[inline]
            fn of(number: u64) -> Self {
                Self(number)
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

/// Where a session's number starts in an id: bits `SESSION_SHIFT..64` are the session's,
/// the bits below count up within it.
pub const SESSION_SHIFT: u32 = 40;

/// One more than the largest session number (`number << SESSION_SHIFT` must fit in an id).
pub const SESSION_END: u64 = 1 << (64 - SESSION_SHIFT);

/// The bits of an id that count up within its session.
pub const COUNTER_MASK: u64 = (1 << SESSION_SHIFT) - 1;

/// The number of the session that made id `id` (0 outside a cluster).
#[inline]
pub const fn session_of(id: u64) -> u64 {
    id >> SESSION_SHIFT
}

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
