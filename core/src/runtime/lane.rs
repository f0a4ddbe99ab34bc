//! Async tasks run together on one executor thread (`max_concurrency`).
//!
//! The scheduler may hand a worker several tasks of async functions at once (each allows it
//! and holds its own resources). The executor thread starts each one's future in its [`Lane`]
//! (a tokio `LocalSet` on the thread's current-thread runtime, with timers and I/O) and drives
//! them all while it has nothing else to start; it stops driving as soon as a new task arrives
//! (the [`Signal`] wakes it), starts that one, and goes on. A future that ends reports its
//! task's outcome from within the lane. Dropping the lane drops the futures still in it: that
//! is how a worker whose tasks were force-cancelled stops the async tasks it ran.

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;

/// Wakes the threads driving lanes when work arrives for them (a task handed to their worker,
/// or a force-cancel).
#[derive(Default)]
pub(crate) struct Signal {
    /// Threads waiting in [`Lane::drive`]: when none is, [`Signal::notify`] costs one load.
    waiting: AtomicUsize,
    wakers: Mutex<Vec<Waker>>,
}

impl Signal {
    /// Wakes every thread driving a lane (call after queueing the work).
    pub(crate) fn notify(&self) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        for w in std::mem::take(&mut *self.wakers.lock()) {
            w.wake();
        }
    }

    fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.lock();
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

/// The async tasks one executor thread runs together.
pub(crate) struct Lane {
    local: tokio::task::LocalSet,
    in_flight: Rc<Cell<usize>>,
    /// Woken when one of the lane's futures ends, so `drive` sees it.
    ended: Rc<Cell<Option<Waker>>>,
    signal: Arc<Signal>,
}

impl Lane {
    pub(crate) fn new(signal: Arc<Signal>) -> Lane {
        Lane {
            local: tokio::task::LocalSet::new(),
            in_flight: Rc::default(),
            ended: Rc::default(),
            signal,
        }
    }

    /// Futures started and not ended.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Starts `task` in the lane; it runs while the lane is driven.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.in_flight.set(self.in_flight.get() + 1);
        let in_flight = self.in_flight.clone();
        let ended = self.ended.clone();
        self.local.spawn_local(async move {
            /// Counts the future out however it ends (a panic included).
            struct Out(Rc<Cell<usize>>, Rc<Cell<Option<Waker>>>);
            impl Drop for Out {
                fn drop(&mut self) {
                    self.0.set(self.0.get().saturating_sub(1));
                    if let Some(w) = self.1.take() {
                        w.wake();
                    }
                }
            }
            let _out = Out(in_flight, ended);
            task.await;
        });
    }

    /// Runs the lane's futures until `arrived()` holds (checked whenever the signal or a
    /// future's end wakes this thread) or none is left.
    pub(crate) fn drive(&self, arrived: impl Fn() -> bool) {
        if self.in_flight() == 0 {
            return;
        }
        self.signal.waiting.fetch_add(1, Ordering::SeqCst);
        let until = std::future::poll_fn(|cx| {
            // Registered before looking, so work queued after the look wakes this poll.
            self.signal.register(cx.waker());
            self.ended.set(Some(cx.waker().clone()));
            if arrived() || self.in_flight() == 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        super::exec::block_on(self.local.run_until(until));
        self.signal.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn futures_interleave_and_drive_returns_when_work_arrives_or_all_ended() {
        let signal = Arc::new(Signal::default());
        let lane = Lane::new(signal.clone());
        let order = Rc::new(std::cell::RefCell::new(Vec::new()));
        for (name, ms) in [("slow", 40u64), ("fast", 5)] {
            let order = order.clone();
            lane.spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                order.borrow_mut().push(name);
            });
        }
        assert_eq!(lane.in_flight(), 2);
        // Work arriving from another thread ends a drive early.
        let arrived = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, s) = (arrived.clone(), signal.clone());
        let t = std::thread::spawn(move || {
            a.store(true, Ordering::SeqCst);
            s.notify();
        });
        lane.drive(|| arrived.load(Ordering::SeqCst));
        t.join().unwrap();
        assert!(arrived.load(Ordering::SeqCst));
        // Driven on, both end, the short one first although it started second.
        lane.drive(|| false);
        assert_eq!(lane.in_flight(), 0);
        assert_eq!(*order.borrow(), ["fast", "slow"]);
    }

    #[test]
    fn dropping_the_lane_drops_its_futures() {
        let lane = Lane::new(Arc::default());
        let dropped = Rc::new(Cell::new(false));
        struct Flag(Rc<Cell<bool>>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let flag = Flag(dropped.clone());
        lane.spawn(async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        lane.drive(|| true);
        assert!(!dropped.get());
        drop(lane);
        assert!(dropped.get());
    }
}
