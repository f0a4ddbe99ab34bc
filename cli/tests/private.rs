//! What a cluster keeps on a host is its user's alone: a head, a node agent, their worker
//! processes and a driver, all on their default directories, leave nothing another local user
//! can read or plant, and they refuse to start in a runtime directory another user could enter.
//!
//! Every process gets a `TMPDIR` of the test's own, so its runtime directory
//! (`$TMPDIR/starling-<uid>`) is the test's; the shared-memory store is this user's
//! `/dev/shm/starling-<uid>`.

mod harness;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use harness::{examples_dir, output_within, Cluster, PAYLOAD, STARLING};

/// The user another local user is played by (when the test runs as root): `nobody`.
const OTHER_UID: u32 = 65534;

/// Every path under `dir` (not following symlinks), with its mode.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, u32, bool)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        out.push((e.path(), meta.mode() & 0o7777, meta.is_dir()));
        if meta.is_dir() {
            walk(&e.path(), out);
        }
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).map_or(0, |m| m.mode() & 0o7777)
}

#[test]
fn what_a_cluster_keeps_is_its_users_alone() {
    // A driver whose objects cross the store (a 5 MB object, a file in the store).
    let mut c = Cluster::start_private("private", 1, &[]);
    let p = c.run("cluster_big_object", &["5000000"]);
    c.check(
        p.get(&c, "checksum_ok") == "true",
        "the big object came back wrong",
    );
    // Then a node of pool p for a job.
    c.worker_args = vec!["--pool".into(), "p".into()];
    c.start_agent("worker-2");
    c.wait_alive(2);
    // A job with a secret in its environment, holding its task while the files are looked at.
    let marks = c.dir.join("marks");
    std::fs::create_dir_all(&marks).expect("create the marks directory");
    let bin = examples_dir().join("job_ending");
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--target-instances",
        "1",
        "--env",
        "API_KEY=hunter2",
        bin.to_str().expect("utf-8 path"),
        "--",
        marks.to_str().expect("utf-8 path"),
        "wait",
    ]);
    let job = out.lines().next().unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + PAYLOAD;
    while std::fs::read_dir(&marks).map_or(0, |d| d.count()) == 0 {
        c.check(Instant::now() < deadline, "the job's task never started");
        std::thread::sleep(Duration::from_millis(50));
    }

    let root = c.runtime_dir();
    let shm = PathBuf::from(format!(
        "/dev/shm/starling-{}",
        starling_proto::dirs::euid()
    ));
    // The job's log appears with the entrypoint's first output, a moment after its task starts.
    let job_log =
        |found: &[(PathBuf, u32, bool)]| found.iter().any(|(p, ..)| p.ends_with("instance-0.log"));
    let mut found = Vec::new();
    walk(&root, &mut found);
    while !job_log(&found) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        found.clear();
        walk(&root, &mut found);
    }
    let agent = c.procs[1].child.id();
    let stores: Vec<PathBuf> = std::fs::read_dir(&shm)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("store-{agent}-")))
        })
        .collect();
    c.check(
        stores.len() == 1,
        &format!("the agent's store in {shm:?}: {stores:?}"),
    );
    for s in &stores {
        found.push((s.clone(), mode(s), true));
        walk(s, &mut found);
    }
    for (name, what) in [
        ("job.pb", "the job's record with its environment"),
        ("token", "the cluster token"),
        ("instance-0.log", "the job's log"),
    ] {
        c.check(
            found.iter().any(|(p, ..)| p.ends_with(name)),
            &format!(
                "no {name} ({what}) under {}: the layout changed",
                root.display()
            ),
        );
    }
    c.check(
        found
            .iter()
            .any(|(p, ..)| p.to_string_lossy().contains("bin-cache/")),
        "no binary in the agent's cache",
    );
    // The roots are 0700; nothing under them is open to group or others.
    for r in [&root, &shm] {
        c.check(
            mode(r) == 0o700,
            &format!("{} has mode {:o}", r.display(), mode(r)),
        );
    }
    let open: Vec<String> = found
        .iter()
        .filter(|(_, m, _)| m & 0o077 != 0)
        .map(|(p, m, _)| format!("{} {m:04o}", p.display()))
        .collect();
    c.check(
        open.is_empty(),
        &format!("open to other users:\n{}", open.join("\n")),
    );
    let secret = found
        .iter()
        .find(|(p, ..)| p.ends_with("job.pb"))
        .map(|(p, ..)| std::fs::read(p).unwrap_or_default())
        .unwrap_or_default();
    c.check(
        secret.windows(7).any(|w| w == b"hunter2"),
        "job.pb does not hold the environment: the test looks at the wrong file",
    );

    // Played for real where the test may switch users: another user can read none of it and
    // cannot plant a binary in the cache.
    if starling_proto::dirs::euid() == 0 {
        let files: Vec<&PathBuf> = found.iter().filter(|(.., d)| !d).map(|(p, ..)| p).collect();
        let cache = found
            .iter()
            .find(|(p, _, d)| *d && p.ends_with("bin-cache"))
            .map(|(p, ..)| p.clone())
            .unwrap_or_else(|| c.fail("no bin-cache directory"));
        let script = format!(
            "for f in \"$@\"; do cat \"$f\" >/dev/null 2>&1 && echo \"read $f\"; done; \
             touch {}/planted 2>/dev/null && echo planted; true",
            cache.display()
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&script).arg("sh").args(&files);
        cmd.uid(OTHER_UID).gid(OTHER_UID);
        let (status, stdout, stderr) = output_within(&mut cmd, PAYLOAD)
            .unwrap_or_else(|e| c.fail(&format!("the other user's reader: {e}")));
        c.check(
            status.success() && stdout.trim().is_empty(),
            &format!(
                "uid {OTHER_UID} got in ({} files tried):\n{stdout}{stderr}",
                files.len()
            ),
        );
        c.check(
            files.len() >= 5,
            &format!("only {} files tried", files.len()),
        );
    }
    c.cli_ok(&["job", "cancel", &job]);
}

/// A `TMPDIR` whose runtime directory is prepared by `prepare`.
fn tmpdir(name: &str, prepare: impl FnOnce(&Path)) -> PathBuf {
    let dir = std::env::temp_dir()
        .join("starling-cli-tests")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test's TMPDIR");
    let root = dir.join(format!("starling-{}", starling_proto::dirs::euid()));
    std::fs::create_dir_all(&root).expect("create the runtime directory");
    prepare(&root);
    dir
}

/// Runs `cmd` with `TMPDIR=tmp`; fails unless it exits non-zero saying `says`.
fn refuses(cmd: &mut Command, tmp: &Path, says: &str) {
    cmd.env("TMPDIR", tmp)
        .env_remove("STARLING_HEAD")
        .env_remove("STARLING_TOKEN")
        .env_remove("XDG_RUNTIME_DIR");
    let (status, stdout, stderr) =
        output_within(cmd, PAYLOAD).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        !status.success() && stderr.contains(says),
        "{cmd:?} should refuse, saying {says:?}; it exited with {status}:\n{stdout}{stderr}"
    );
}

/// Everything that keeps files on its own (`starling head`, `starling worker`, a driver that
/// starts a local cluster) refuses a runtime directory another user could enter or made.
fn all_refuse(tmp: &Path, says: &str) {
    refuses(
        Command::new(STARLING).args(["head", "--port", "0", "--dashboard-port", "0"]),
        tmp,
        says,
    );
    refuses(
        Command::new(STARLING).args(["worker", "--head", "127.0.0.1:9", "--num-cpus", "1"]),
        tmp,
        says,
    );
    refuses(
        &mut Command::new(examples_dir().join("quickstart")),
        tmp,
        says,
    );
}

#[test]
fn a_runtime_directory_another_user_could_enter_is_refused() {
    let open = tmpdir("open-runtime-dir", |root| {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o777))
            .expect("chmod the runtime directory");
    });
    all_refuse(&open, "chmod 700");
    let readable = tmpdir("readable-runtime-dir", |root| {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the runtime directory");
    });
    all_refuse(&readable, "read what is in it");
    // Made by another user (only root can play one): refused however closed it is.
    if starling_proto::dirs::euid() == 0 {
        let theirs = tmpdir("others-runtime-dir", |root| {
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
                .expect("chmod the runtime directory");
            std::os::unix::fs::chown(root, Some(OTHER_UID), Some(OTHER_UID))
                .expect("chown the runtime directory");
        });
        all_refuse(&theirs, &format!("belongs to uid {OTHER_UID}"));
    }
}
