//! Worker processes keep the store files their tasks read mapped, for the next task that reads
//! the same object, and let a mapping go once its object is freed, even while idle. Checked
//! from outside, in the worker process's `/proc/<pid>/maps`, on a local cluster with one
//! worker process.

use std::time::{Duration, Instant};

use starling::{Config, Runtime};

const WAIT: Duration = Duration::from_secs(60);

/// The length of `data`, and this worker process's id.
#[starling::remote]
fn length_and_pid(data: Vec<u8>) -> (u64, u32) {
    (data.len() as u64, std::process::id())
}

/// The lines of `pid`'s memory map that name store file `object`.
fn mapped(pid: u32, object: starling::ObjectId) -> Vec<String> {
    let name = format!("/{}", object.0);
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let l = l.trim_end_matches(" (deleted)");
            l.ends_with(&name)
        })
        .map(String::from)
        .collect()
}

#[test]
fn a_read_object_stays_mapped_until_it_is_freed() {
    let rt = Runtime::start(Config::default().threads(1)).expect("a local cluster starts");
    let _g = rt.enter();
    // Over the inline limit: a file in the node's store.
    let big = starling::put(vec![7u8; 1 << 20]).expect("put");
    let object = big.id();
    let first = length_and_pid::remote(&big);
    let (len, pid) = starling::get_timeout(&first, WAIT).expect("first read");
    assert_eq!(len, 1 << 20);
    assert!(
        !mapped(pid, object).is_empty(),
        "worker {pid} no longer maps object {object:?} after its task"
    );
    // A second task reads it from the kept mapping.
    let second = length_and_pid::remote(&big);
    assert_eq!(
        starling::get_timeout(&second, WAIT).expect("second read"),
        (1 << 20, pid)
    );
    drop((first, second, big));
    let until = Instant::now() + Duration::from_secs(20);
    while !mapped(pid, object).is_empty() {
        assert!(
            Instant::now() < until,
            "worker {pid} still maps freed object {object:?}: {:?}",
            mapped(pid, object)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
