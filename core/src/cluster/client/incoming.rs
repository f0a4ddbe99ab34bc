//! The receiving side of a session: the reader task, what the head pushes (values, tasks for
//! a worker process, cancels, `alive`), and the local cluster's direct deliveries.

use super::*;

/// Handles what the head pushes until the session ends.
pub(super) async fn read_loop(
    client: std::sync::Weak<Client>,
    (first, mut incoming): (Vec<HeadOp>, Incoming),
    runs: Option<crossbeam::channel::Sender<RunTask>>,
) {
    let mut pending = Some(first);
    let end = loop {
        let next = match pending.take() {
            Some(ops) => Ok(Some(HeadBatch { ops })),
            None => {
                use tokio_stream::StreamExt;
                // A live head is never silent this long (it says `alive` on quiet sessions).
                match tokio::time::timeout(SILENCE_LIMIT, incoming.next()).await {
                    Ok(next) => next.transpose(),
                    Err(_) => {
                        break format!(
                            "the head sent nothing for {SILENCE_LIMIT:?} (stopped, hung or cut off)"
                        )
                    }
                }
            }
        };
        match next {
            Ok(Some(batch)) => {
                let Some(c) = client.upgrade() else { return };
                for op in batch.ops {
                    c.handle_op(op, runs.as_ref());
                }
            }
            Ok(None) => break "the head closed the session".to_string(),
            Err(s) => break s.message().to_string(),
        }
    };
    if let Some(c) = client.upgrade() {
        let addr = c.addr.clone();
        c.session_lost(Error::HeadLost { addr, why: end });
    }
    // Dropping `runs` ends a worker process's task loop.
}

/// Batches a head in this process hands over before the client exists (the welcome), then
/// straight to the client.
#[derive(Default)]
pub(super) struct LocalInbox {
    pub(super) client: OnceLock<std::sync::Weak<Client>>,
    pub(super) early: Mutex<Vec<HeadOp>>,
}

impl LocalInbox {
    pub(super) fn deliver(&self, batch: HeadBatch) {
        // The lock orders deliveries with `connect_local` draining the early ones.
        let mut early = self.early.lock();
        match self.client.get().and_then(std::sync::Weak::upgrade) {
            Some(c) => {
                drop(early);
                for op in batch.ops {
                    c.handle_op(op, None);
                }
            }
            None => early.extend(batch.ops),
        }
    }
}

impl Client {
    pub(super) fn handle_op(
        self: &Arc<Self>,
        op: HeadOp,
        runs: Option<&crossbeam::channel::Sender<RunTask>>,
    ) {
        match op {
            HeadOp::Value(v) => self.receive_value(v),
            HeadOp::Run(run) => {
                if let Some(r) = runs {
                    let _ = r.send(run);
                    crate::cluster::worker::run_arrived();
                }
            }
            HeadOp::Cancel(t) => {
                self.cancelled.lock().insert(t.0);
            }
            HeadOp::Infeasible { task, reason } => super::warn_infeasible(task, &reason),
            HeadOp::StreamItem(item) => self.receive_item(item),
            HeadOp::StreamAck(ack) => self.receive_ack(ack),
            HeadOp::Welcome(_) | HeadOp::Alive => {}
        }
    }

    /// Whether to ask the head again for an object whose value could not be fetched.
    pub(super) fn ask_again(&self, object: ObjectId) -> bool {
        if self.closed_error().is_some() {
            return false;
        }
        let mut r = self.refetches.lock();
        let tries = r.entry(object).or_insert(0);
        *tries += 1;
        if *tries > REFETCH_TRIES {
            r.remove(&object);
            return false;
        }
        true
    }

    pub(super) fn receive_value(self: &Arc<Self>, v: ObjectValue) {
        let object = v.object;
        match v.value {
            // A value answered straight by an actor's worker may have settled it already.
            Value::Inline(bytes) => {
                if self.store.put(object, Blob::new(bytes)) {
                    self.no_longer_in_flight();
                }
            }
            Value::Failure(failure) => {
                self.no_longer_in_flight();
                self.store.fail(object, Arc::new(failure));
            }
            Value::Location(location) => {
                self.no_longer_in_flight();
                let me = self.clone();
                self.rt.spawn(async move {
                    let spill = me.local.as_ref().map(|l| l.spill_dir.clone());
                    let fetched = objects::fetch(
                        object,
                        &location,
                        &me.addr,
                        &me.creds,
                        spill.as_deref(),
                        me.head_epoch(),
                    )
                    .await;
                    match fetched {
                        Ok(blob) => {
                            me.refetches.lock().remove(&object);
                            me.store.put(object, blob);
                        }
                        // Its node may be gone: the head makes lost objects again from their
                        // lineage, so ask it where the value is now (a few times, backing off).
                        Err(_) if me.ask_again(object) => {
                            let tries = me.refetches.lock().get(&object).copied().unwrap_or(1);
                            let pause = Duration::from_millis(250 * u64::from(tries))
                                .min(REFETCH_MAX_PAUSE);
                            tokio::time::sleep(pause).await;
                            me.in_flight.fetch_add(1, Ordering::Relaxed);
                            me.send(ClientOp::Subscribe(object));
                        }
                        Err(_) => me.store.fail(
                            object,
                            Arc::new(TaskFailure {
                                task: object.task(),
                                attempt: 0,
                                kind: FailureKind::ObjectLost(object),
                            }),
                        ),
                    }
                });
            }
        }
    }
}

/// A node as the head's status reports it.
pub(crate) fn node_info(n: starling_proto::status::NodeStatus) -> NodeInfo {
    NodeInfo {
        id: n.id,
        address: n.address,
        resources: n.total,
        available: n.available,
        alive: n.alive,
    }
}
