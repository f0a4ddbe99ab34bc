//! The job table's I/O: where it lives on the head's disk, how it is read back at start, and
//! the checks of a payload that read its archive.
//!
//! The table itself, every state change of jobs and pools, is the state machine
//! [`starling_scheduler::jobs`]; it asks for writes through
//! [`JobTransport`](starling_scheduler::jobs::JobTransport), which the head's `Outbox`
//! implements by queueing them to `JobFiles` (a thread of its own, in order, never under the
//! head's lock).
//!
//! ```text
//! DATA_DIR/jobs/<id>/job.pb            the job (JobInfo), rewritten on every change
//! DATA_DIR/jobs/<id>/instance-<k>.log  the output of instance k's processes
//! DATA_DIR/jobs/<id>/result.bin        the value of a #[starling::job] function
//! DATA_DIR/pools/<hex name>.pb         a pool (PoolSpec)
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use starling_proto::jobs::{JobInfo, JobSpec, PayloadKind, PoolSpec};
use starling_scheduler::jobs::JobError;
use tonic::Status;

use super::files::Files;

/// Starts and stops node agents for the pools the head launches itself. The first
/// implementation starts `starling worker` processes on the head's machine.
pub trait Launcher: Send + Sync {
    /// Starts one node agent that joins `pool` at the head `head`; returns its process id.
    fn launch(&self, head: &str, pool: &PoolSpec) -> Result<u32, String>;
    /// Stops the node agent with process id `pid` (one this launcher started).
    fn stop(&self, pid: u32);
}

/// The job table on the head's disk.
#[derive(Clone, Debug)]
pub(crate) struct JobFiles {
    dir: PathBuf,
    pool_dir: PathBuf,
    /// Where writes go: a thread of their own, never under the head's lock.
    files: Files,
}

impl JobFiles {
    /// The table under `data_dir` (its directories made private if new), and what it holds:
    /// every job and pool as last written. Unreadable records are skipped.
    pub fn load(data_dir: &Path) -> std::io::Result<(JobFiles, Vec<JobInfo>, Vec<PoolSpec>)> {
        let dir = data_dir.join("jobs");
        let pool_dir = data_dir.join("pools");
        for d in [&dir, &pool_dir] {
            starling_proto::dirs::ensure_dir(d).map_err(std::io::Error::other)?;
        }
        let mut jobs = Vec::new();
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let Ok(bytes) = std::fs::read(entry.path().join("job.pb")) else {
                continue;
            };
            if let Ok(info) = JobInfo::from_bytes(&bytes) {
                jobs.push(info);
            }
        }
        let mut pools = Vec::new();
        for entry in std::fs::read_dir(&pool_dir)?.flatten() {
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            if let Ok(spec) = PoolSpec::from_bytes(&bytes) {
                pools.push(spec);
            }
        }
        let files = JobFiles {
            dir,
            pool_dir,
            files: Files::start(),
        };
        Ok((files, jobs, pools))
    }

    fn job_dir(&self, id: u64) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// Where instance `instance`'s log of job `id` is kept.
    pub fn log_path(&self, id: u64, instance: u32) -> PathBuf {
        self.job_dir(id).join(format!("instance-{instance}.log"))
    }

    /// Where the value of job `id`'s `#[starling::job]` function is kept.
    pub fn result_path(&self, id: u64) -> PathBuf {
        self.job_dir(id).join("result.bin")
    }

    /// Queues `info`'s record (a failed write is retried on the job's next change).
    pub fn write_job(&self, info: &JobInfo) {
        self.files
            .write(self.job_dir(info.id).join("job.pb"), info.to_bytes());
    }

    pub fn write_pool(&self, spec: &PoolSpec) {
        self.files
            .write(self.pool_path(&spec.name), spec.to_bytes());
    }

    pub fn remove_pool(&self, name: &str) {
        self.files.remove_file(self.pool_path(name));
    }

    pub fn remove_job(&self, id: u64) {
        self.files.remove_dir(self.job_dir(id));
    }

    pub fn write_result(&self, id: u64, value: Vec<u8>) {
        self.files.write(self.result_path(id), value);
    }

    fn pool_path(&self, name: &str) -> PathBuf {
        self.pool_dir.join(format!("{}.pb", hex(name)))
    }

    /// The file thread: [`Files::flush`] it, outside the lock, before reading a file the table
    /// writes.
    pub fn files(&self) -> Files {
        self.files.clone()
    }
}

/// A refusal of the job table as the gRPC status clients see.
pub(crate) fn status_of(e: JobError) -> Status {
    match e {
        JobError::Invalid(m) => Status::invalid_argument(m),
        JobError::NotFound(m) => Status::not_found(m),
        JobError::Conflict(m) => Status::failed_precondition(m),
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Checks that a job's payload was uploaded and, for a directory, that its entrypoint is in it
/// and can run. It reads the payload's archive, so the head calls it before taking its lock;
/// [`Jobs::submit`](starling_scheduler::jobs::Jobs::submit) checks the rest.
#[allow(clippy::result_large_err)]
pub(crate) fn check_payload(spec: &JobSpec, bin_dir: &Path) -> Result<(), Status> {
    let refuse = |why: String| Err(Status::invalid_argument(why));
    let payload = &spec.payload;
    match &payload.kind {
        Some(PayloadKind::Binary(b)) => {
            if !starling_proto::is_build_id(b) || !bin_dir.join(b).is_file() {
                return refuse(format!("payload binary {b} was not uploaded"));
            }
        }
        Some(PayloadKind::Directory(d)) => {
            if !starling_proto::is_build_id(d) || !bin_dir.join(d).is_file() {
                return refuse(format!("payload directory {d} was not uploaded"));
            }
            check_entrypoint(&bin_dir.join(d), &payload.entrypoint, &payload.command)
                .map_err(Status::invalid_argument)?;
        }
        None => return refuse("a job needs a payload".into()),
    }
    Ok(())
}

/// Refuses a directory payload whose entrypoint is missing, or not executable when no
/// command runs it.
fn check_entrypoint(archive: &Path, entrypoint: &str, command: &[String]) -> Result<(), String> {
    if entrypoint.is_empty() {
        if command.is_empty() {
            return Err("a directory payload needs an entrypoint or a command".into());
        }
        return Ok(());
    }
    let bytes = std::fs::read(archive).map_err(|e| format!("cannot read the payload: {e}"))?;
    let files = starling_proto::jobs::decode_archive(&bytes)
        .map_err(|_| "the payload directory is not a valid archive".to_string())?;
    for f in &files {
        starling_proto::wire::check_archive_path(&f.path).map_err(|e| e.0)?;
    }
    let want = entrypoint.trim_start_matches("./");
    starling_proto::wire::check_archive_path(want).map_err(|e| format!("entrypoint: {}", e.0))?;
    match files.iter().find(|f| f.path == want) {
        None => Err(format!("entrypoint `{entrypoint}` is not in the directory")),
        Some(f) if f.mode & 0o111 == 0 && command.is_empty() => {
            Err(format!("entrypoint `{entrypoint}` is not executable"))
        }
        Some(_) => Ok(()),
    }
}

/// Appends log bytes; best effort (a full disk must not stop the head).
pub(crate) fn append_log(path: &Path, data: &[u8]) {
    if let Some(dir) = path.parent() {
        let _ = starling_proto::dirs::create_dir(dir);
    }
    if let Ok(mut f) = starling_proto::dirs::append_file(path) {
        let _ = f.write_all(data);
    }
}

#[cfg(test)]
mod tests {
    //! Submit validation against random and hostile job specs: every spec is either refused
    //! with a clear status or accepted as a job that can run.

    use super::*;
    use crate::state::{now, Outbox};
    use starling_proto::fuzz::{self, Rng};
    use starling_proto::jobs::Payload;
    use starling_scheduler::jobs::{Jobs, MAX_NAME_BYTES};
    use starling_scheduler::Core;

    // Payload ids are build ids: the SHA-256 of the bytes, in lowercase hex.
    const BINARY: &str = "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff";
    const DIRECTORY: &str = "0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d";
    const BAD_DIRECTORY: &str = "0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e";

    fn setup(tag: &str) -> (PathBuf, Jobs, Outbox) {
        let root =
            std::env::temp_dir().join(format!("starling-jobs-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let bin = root.join("binaries");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join(BINARY), b"\x7fELF").unwrap();
        let dir = |path: &str| {
            starling_proto::jobs::encode_archive(vec![starling_proto::jobs::DirFile {
                path: path.into(),
                mode: 0o755,
                data: b"#!/bin/sh\n".to_vec(),
            }])
        };
        std::fs::write(bin.join(DIRECTORY), dir("run.sh")).unwrap();
        std::fs::write(bin.join(BAD_DIRECTORY), dir("../run.sh")).unwrap();
        let (files, _, _) = JobFiles::load(&root).unwrap();
        let mut jobs = Jobs::new();
        let mut out = Outbox::default();
        out.job_files = Some(files);
        jobs.create_pool(
            &mut out,
            PoolSpec {
                name: "p".into(),
                max_nodes: 4,
                ..Default::default()
            },
            false,
        )
        .unwrap();
        (root, jobs, out)
    }

    #[test]
    fn the_table_changes_without_waiting_for_its_disk() {
        let (root, mut jobs, mut out) = setup("stalled");
        let table = out.job_files.clone().expect("a table on disk");
        // A disk that does not answer: the table goes on, nothing is written meanwhile.
        let hold = table.files().stall();
        let info = jobs.submit(&mut out, 7, valid(), now()).expect("accepted");
        jobs.set_result(&mut out, info.id, Ok(b"42".to_vec()))
            .expect("a result");
        let job_pb = root.join("jobs").join("7").join("job.pb");
        assert!(!job_pb.exists(), "a write happened while the disk stalled");
        // The disk answers: what was decided is written, in order.
        drop(hold);
        table.files().flush();
        let kept = JobInfo::from_bytes(&std::fs::read(&job_pb).unwrap()).unwrap();
        assert_eq!(kept.id, 7);
        assert_eq!(std::fs::read(table.result_path(7)).unwrap(), b"42");
        let (_, infos, pools) = JobFiles::load(&root).unwrap();
        let mut again = Jobs::new();
        let last = again.restore(&mut Outbox::default(), infos, pools, now());
        assert_eq!(last, 7);
        let restored = again.info(7).expect("a restarted head finds the job");
        assert_eq!(restored.status, "FAILED", "it was unfinished: {restored:?}");
        let _ = std::fs::remove_dir_all(root);
    }

    fn valid() -> JobSpec {
        JobSpec {
            pool: "p".into(),
            payload: Payload {
                kind: Some(PayloadKind::Binary(BINARY.into())),
                entrypoint: String::new(),
                command: Vec::new(),
            },
            target_instances: 2,
            ..Default::default()
        }
    }

    fn refusal(jobs: &mut Jobs, out: &mut Outbox, root: &Path, spec: JobSpec) -> String {
        let s = check_payload(&spec, &root.join("binaries"))
            .and_then(|()| jobs.submit(out, 1, spec, now()).map_err(status_of))
            .expect_err("refused");
        assert!(
            matches!(
                s.code(),
                tonic::Code::InvalidArgument | tonic::Code::NotFound
            ),
            "{s:?}"
        );
        s.message().to_string()
    }

    #[test]
    fn hostile_specs_are_refused_with_a_reason() {
        let (root, mut jobs, mut out) = setup("refuse");
        let cases: Vec<(JobSpec, &str)> = vec![
            (
                JobSpec {
                    env: [("A=B".to_string(), "v".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                JobSpec {
                    env: [(String::new(), "v".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                JobSpec {
                    env: [("K".to_string(), "a\0b".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                JobSpec {
                    args: vec!["ok".into(), "a\0b".into()],
                    ..valid()
                },
                "NUL",
            ),
            (
                JobSpec {
                    name: "x".repeat(10_000),
                    ..valid()
                },
                "job name",
            ),
            (
                JobSpec {
                    name: "two\nlines".into(),
                    ..valid()
                },
                "job name",
            ),
            (
                JobSpec {
                    payload: Payload {
                        kind: Some(PayloadKind::Directory(BAD_DIRECTORY.into())),
                        entrypoint: "../run.sh".into(),
                        command: Vec::new(),
                    },
                    ..valid()
                },
                "`..`",
            ),
            (
                JobSpec {
                    payload: Payload {
                        kind: Some(PayloadKind::Directory(DIRECTORY.into())),
                        entrypoint: "/bin/sh".into(),
                        command: Vec::new(),
                    },
                    ..valid()
                },
                "absolute",
            ),
            (
                JobSpec {
                    payload: Payload {
                        kind: Some(PayloadKind::Binary("../../etc/passwd".into())),
                        entrypoint: String::new(),
                        command: Vec::new(),
                    },
                    ..valid()
                },
                "was not uploaded",
            ),
            (
                JobSpec {
                    payload: Payload {
                        kind: Some(PayloadKind::Binary(String::new())),
                        entrypoint: String::new(),
                        command: Vec::new(),
                    },
                    ..valid()
                },
                "was not uploaded",
            ),
            (
                JobSpec {
                    target_instances: 0,
                    ..valid()
                },
                "target_instances",
            ),
            (
                JobSpec {
                    min_instances: 3,
                    ..valid()
                },
                "min_instances",
            ),
            (
                JobSpec {
                    target_instances: u32::MAX,
                    ..valid()
                },
                "max_nodes",
            ),
            (
                JobSpec {
                    pool: "nope".into(),
                    ..valid()
                },
                "unknown pool",
            ),
        ];
        for (spec, says) in cases {
            let m = refusal(&mut jobs, &mut out, &root, spec);
            assert!(m.contains(says), "{m:?} should say {says:?}");
        }
        assert!(jobs.list().is_empty(), "nothing refused was queued");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn fuzz_submit_accepts_only_runnable_jobs() {
        let (root, mut jobs, mut out) = setup("fuzz");
        let bin = root.join("binaries");
        let mut next = 1;
        let mut accepted = 0u64;
        fuzz::run("job submit", 2.0, 200, |rng: &mut Rng| {
            let id = |rng: &mut Rng| match rng.below(5) {
                0 => BINARY.to_string(),
                1 => DIRECTORY.to_string(),
                2 => BAD_DIRECTORY.to_string(),
                3 => "f".repeat(rng.below(100)),
                _ => rng.string(),
            };
            let kind = match rng.below(3) {
                0 => Some(PayloadKind::Binary(id(rng))),
                1 => Some(PayloadKind::Directory(id(rng))),
                _ => None,
            };
            let small = |rng: &mut Rng| match rng.below(3) {
                0 => rng.edgy_u64() as u32,
                _ => rng.below(6) as u32,
            };
            let spec = JobSpec {
                name: rng.string(),
                pool: rng.pick(&["p", "p", "", "nope", "p/../x"]).to_string(),
                payload: if rng.one_in(8) {
                    Payload::default()
                } else {
                    Payload {
                        kind,
                        entrypoint: rng
                            .pick(&["run.sh", "./run.sh", "", "../run.sh", "/run.sh", "x"])
                            .to_string(),
                        command: match rng.below(4) {
                            0 => vec!["python3".into()],
                            1 => vec![rng.string()],
                            _ => Vec::new(),
                        },
                    }
                },
                args: (0..rng.below(3)).map(|_| rng.string()).collect(),
                env: (0..rng.below(3))
                    .map(|_| (rng.string(), rng.string()))
                    .collect(),
                target_instances: small(rng),
                min_instances: small(rng),
                instance_timeout_ms: rng.edgy_u64(),
                input: Vec::new(),
                max_instance_failures: rng.one_in(2).then(|| rng.below(4) as u32),
            };
            let mut spec = spec;
            let n = rng.below(16);
            spec.input = rng.bytes(n);
            let submitted = check_payload(&spec, &bin).and_then(|()| {
                jobs.submit(&mut out, next, spec.clone(), now())
                    .map_err(status_of)
            });
            match submitted {
                Ok(info) => {
                    accepted += 1;
                    let s = info.spec;
                    assert!(1 <= s.min_instances && s.min_instances <= s.target_instances);
                    assert!(s.min_instances <= 4, "the pool has at most 4 nodes");
                    assert_eq!(s.pool, "p");
                    assert!(!s.name.is_empty() && s.name.len() <= MAX_NAME_BYTES);
                    assert!(s
                        .env
                        .keys()
                        .all(|k| !k.is_empty() && !k.contains(['=', '\0'])));
                    assert!(s.args.iter().all(|a| !a.contains('\0')));
                    assert!(s.instance_timeout_ms > 0);
                    // A pending job can always be cancelled.
                    let mut core = Core::new();
                    jobs.cancel(&mut out, &mut core, next, now()).unwrap();
                    jobs.delete(&mut out, next).unwrap();
                    next += 1;
                }
                Err(s) => {
                    assert!(
                        matches!(
                            s.code(),
                            tonic::Code::InvalidArgument | tonic::Code::NotFound
                        ),
                        "{s:?}"
                    );
                    assert!(!s.message().is_empty());
                }
            }
        });
        assert!(
            accepted > 0,
            "some random specs are valid, so acceptance was checked"
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
