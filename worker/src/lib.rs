//! The node side of Starling.
//!
//! Today this crate holds the node object store ([`store::ObjectStore`]): the table of object
//! values on one node, with wakers for whoever waits on a value. The in-process runtime uses it
//! as its only store; the node agent (worker-process pool, logs) builds on it next.

pub mod store;
