//! Backpressure on drivers' submissions.
//!
//! Every task the head holds costs it memory until the task ends. Past `limit` live tasks the
//! head takes no more batches from the driver that sent the last one until the count falls to
//! 7/8 of the limit: its session stream is not read (HTTP/2 flow control then fills, and the
//! driver's own bounded send queue makes `remote()` wait), and a local driver's thread waits
//! in `local_batch`. Nothing is refused and nothing is lost: the driver only waits.
//!
//! Worker processes never wait: the tasks that would free room run on workers, and a worker
//! whose stream stopped being read could not report them done. Their nested submissions are
//! taken past the limit.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

/// The default limit of live tasks at the head: room for the 1,000,000-task flood of the
/// benches, about 1.7 GB of head memory at its measured cost per queued task.
pub const DEFAULT_MAX_LIVE_TASKS: usize = 2_000_000;

pub(crate) struct Room {
    limit: AtomicUsize,
    full: AtomicBool,
    /// Drivers waiting now (shown in status).
    waiting: AtomicUsize,
    notify: Notify,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Room {
    pub fn new(limit: usize) -> Self {
        Room {
            limit: AtomicUsize::new(limit.max(1)),
            full: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            notify: Notify::new(),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit.max(1), Ordering::Relaxed);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Called with the live task count after every change of state.
    pub fn update(&self, live: usize) {
        let limit = self.limit();
        if live >= limit {
            self.full.store(true, Ordering::Release);
        } else if live <= limit - limit / 8 && self.full.swap(false, Ordering::AcqRel) {
            self.notify.notify_waiters();
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Drivers waiting for room now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits (a session stream's task) until there is room.
    pub async fn wait(&self) {
        let _w = Waiting::new(&self.waiting);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.is_full() {
                return;
            }
            notified.await;
        }
    }

    /// Waits (a local driver's thread) until there is room.
    pub fn wait_blocking(&self) {
        let _w = Waiting::new(&self.waiting);
        let mut g = self.lock.lock();
        while self.is_full() {
            self.cv.wait(&mut g);
        }
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_full_room_opens_at_seven_eighths_of_its_limit() {
        let room = Arc::new(Room::new(800));
        room.update(800);
        assert!(room.is_full());
        let r = room.clone();
        let waiter = std::thread::spawn(move || r.wait_blocking());
        // Still over 7/8: the waiter stays.
        room.update(701);
        assert!(room.is_full());
        room.update(700);
        assert!(!room.is_full());
        waiter.join().unwrap();
        assert_eq!(room.waiting(), 0);
    }

    #[test]
    fn an_async_waiter_is_woken_when_room_opens() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let room = Arc::new(Room::new(8));
        room.update(9);
        let r = room.clone();
        rt.block_on(async move {
            let w = tokio::spawn(async move { r.wait().await });
            tokio::task::yield_now().await;
            room.update(0);
            w.await.unwrap();
        });
    }
}
