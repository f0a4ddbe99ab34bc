//! The node side of Starling.
//!
//! - [`store::ObjectStore`]: the table of object values on one node, with wakers for whoever
//!   waits on a value. The in-process runtime uses it as its only store.
//! - [`agent`]: the node agent of a cluster node. It registers with the head, runs the worker
//!   processes of each job (re-executing the job's binary in worker mode), keeps one log file
//!   per process, serves the node's large objects to other nodes, and spills the node's object
//!   files to disk when they outgrow their memory cap.
//!
//! **Architecture invariant:** nothing here knows a user type; objects are opaque bytes and
//! worker processes are opaque executables.

pub mod agent;
pub mod store;
