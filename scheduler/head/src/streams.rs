//! Streaming tasks at the head: their items, on their way from the worker process that runs the
//! task to the session that submitted it, and that session's progress, back to the producer.
//!
//! A streaming task's function yields items; the worker process `put`s each (an object of its
//! own session, stored like any put) and says [`ClientOp::StreamItem`](starling_proto::session::ClientOp)
//! right after. The head then counts one handle of the submitter (whose session is the one the
//! task id names) on the object, sends it the value if it has one, and forwards the item; the
//! worker releases its own handle after, on the same ordered stream, so the count never touches
//! zero in between. The submitter says how many items it took (`StreamAck`), which the head
//! passes to whichever process runs the task now, and to a new run of it (a retry starts from
//! item 0: items the submitter already has are dropped here, and the new producer learns how
//! far the submitter got before its first item).
//!
//! **Invariant:** the submitter is told each item index of a task at most once, in order from
//! 0, however many runs the task takes.

use std::collections::HashMap;

use starling_proto::session::{HeadOp, StreamAck, StreamItem};
use starling_proto::{session_of, JobId, TaskId, WorkerId};
use starling_scheduler::{reactor, TaskState};
use tonic::Status;

use super::state::{bad, own_id, same_job, subscribe, State};

/// The streams of running streaming tasks, by task.
#[derive(Default)]
pub(crate) struct Streams {
    routes: HashMap<TaskId, Route>,
}

#[derive(Default)]
struct Route {
    /// The index of the next item the submitter is to be told.
    next: u64,
    /// Items the submitter took (its last `StreamAck`).
    consumed: u64,
    /// The session that yielded the last item (0: none yet).
    producer: u64,
}

impl Streams {
    /// Forgets the streams of tasks that ended (finished, failed for good, cancelled).
    pub(crate) fn prune(&mut self, live: impl Fn(TaskId) -> bool) {
        if !self.routes.is_empty() {
            self.routes.retain(|t, _| live(*t));
        }
    }

    /// Forgets the stream of `task`.
    pub(crate) fn end(&mut self, task: TaskId) {
        if !self.routes.is_empty() {
            self.routes.remove(&task);
        }
    }
}

/// Session `client`, a worker process (`worker`), yielded `item` of the streaming task it runs.
pub(crate) fn on_item(
    st: &mut State,
    client: u64,
    worker: Option<WorkerId>,
    item: StreamItem,
) -> Result<(), Status> {
    let Some(worker) = worker else {
        return Err(bad("only worker processes yield items"));
    };
    own_id(client, item.object.0, "yield object")?;
    let StreamItem {
        task,
        index,
        object,
    } = item;
    // Only the run the head has placed there now: a cancelled task or one moved elsewhere says
    // nothing more (the worker lets go of its put, which is then freed).
    let runs_here = matches!(
        st.core.task_state(task),
        Some(TaskState::Running { worker: w, .. }) if *w == worker
    );
    if !runs_here {
        return Ok(());
    }
    if !st.core.task_spec(task).is_some_and(|s| s.extras.streaming) {
        return Err(bad(&format!("task {task} is not a streaming task")));
    }
    let route = st.streams.routes.entry(task).or_default();
    if route.producer != client || index == 0 {
        // A new run (a retry, or the task placed again; item 0 starts every run): it resumes
        // where the submitter is.
        route.producer = client;
        if route.consumed > 0 {
            let consumed = route.consumed;
            st.out
                .queue_client(client, HeadOp::StreamAck(StreamAck { task, consumed }));
        }
    }
    if index < route.next {
        // A run after a retry yields again what the submitter already has.
        return Ok(());
    }
    if index > route.next {
        return Err(bad(&format!(
            "item {index} of task {task} before item {}",
            route.next
        )));
    }
    route.next += 1;
    let submitter = session_of(task.0);
    if !st.out.clients.contains_key(&submitter) {
        // The submitter is gone: nobody takes the items (its session released the task).
        return Ok(());
    }
    if reactor::on_add_ref(&mut st.core, &mut st.out, object) {
        if let Some(conn) = st.out.clients.get_mut(&submitter) {
            conn.add_handle(object);
        }
        subscribe(st, submitter, object);
        st.out.queue_client(submitter, HeadOp::StreamItem(item));
    }
    Ok(())
}

/// Session `client`, of `job`, took `ack.consumed` items of its streaming task `ack.task`.
pub(crate) fn on_ack(
    st: &mut State,
    client: u64,
    job: JobId,
    ack: StreamAck,
) -> Result<(), Status> {
    same_job(st.session_jobs(), job, ack.task.0, "take items of")?;
    if session_of(ack.task.0) != client {
        return Err(Status::permission_denied(format!(
            "session {client} did not submit task {}",
            ack.task
        )));
    }
    if st.core.task_state(ack.task).is_none() {
        return Ok(());
    }
    let route = st.streams.routes.entry(ack.task).or_default();
    if ack.consumed <= route.consumed {
        return Ok(());
    }
    route.consumed = ack.consumed;
    let producer = route.producer;
    if producer != 0 {
        st.out.queue_client(producer, HeadOp::StreamAck(ack));
    }
    Ok(())
}
