//! Worker-process logs: task markers, line tagging, and the pump that copies a process's
//! stdout and stderr into its log file.
//!
//! A worker process runs many tasks one after another, so its raw output does not say which
//! task printed what. The worker loop therefore prints a marker line, [`task_marker`], on stdout
//! *and* stderr when it starts a task (`\x1e[starling task T42]`) and when it finishes one
//! (`\x1e[starling task -]`). The agent strips the markers and prefixes every other line with
//! the task and the stream: `[T42] out|text`, `[-] err|text` outside tasks. Each stream carries
//! its own markers because the two pipes are read independently and their relative order is
//! lost.
//!
//! # Invariants
//! - Marker lines never reach the log file; every other byte does, one tagged line per input
//!   line (a line longer than [`MAX_LINE`] is cut into several).
//! - Marker parsing and tagging are pure ([`parse_marker`], [`LineTagger`], [`LineSplitter`]);
//!   only the pump (`pump` and the `starling-logs` thread behind it) does I/O.
//! - The pump drains every pipe to its end even when the log file cannot be written, so a
//!   worker never blocks on a full pipe for longer than the pump's batching wait.

use std::collections::HashSet;
use std::fmt;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use starling_proto::node::{JobLog, NodeBatch, NodeOp};
use starling_proto::{JobId, TaskId};

/// What starts every marker; the ASCII record separator keeps it out of ordinary output.
pub const TASK_MARKER_PREFIX: &str = "\x1e[starling task ";

/// The longest line written as one; longer input is split so memory stays bounded.
pub const MAX_LINE: usize = 64 * 1024;

/// The marker line (without its newline) a worker process prints on stdout and stderr when it
/// starts `Some(task)` or finishes a task (`None`).
pub fn task_marker(task: Option<TaskId>) -> String {
    match task {
        Some(t) => format!("{TASK_MARKER_PREFIX}{t}]"),
        None => format!("{TASK_MARKER_PREFIX}-]"),
    }
}

/// A parsed marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A task started.
    Task(TaskId),
    /// The running task finished.
    Idle,
}

/// If `line` (without its newline; a trailing `\r` is ignored) ends with a marker, returns the
/// text before the marker and the marker. The text is usually empty; it is not when the task
/// printed a partial line (`print!` without a newline) just before the marker.
pub fn parse_marker(line: &str) -> Option<(&str, Marker)> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let start = line.rfind(TASK_MARKER_PREFIX)?;
    let inner = line[start + TASK_MARKER_PREFIX.len()..].strip_suffix(']')?;
    let marker = if inner == "-" {
        Marker::Idle
    } else {
        let digits = inner.strip_prefix('T')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Marker::Task(TaskId(digits.parse().ok()?))
    };
    Some((&line[..start], marker))
}

/// The most bytes of a log file one read ([`read_log`]) looks at.
pub const READ_LOG_BYTES: usize = 1 << 20;

/// The worker processes whose log files are still written (started, and their output not yet
/// drained to its end), by job and pid: a reader of a log whose process is not here has read
/// everything once it reaches the end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Writing(Arc<Mutex<HashSet<(JobId, u32)>>>);

impl Writing {
    pub(crate) fn started(&self, job: JobId, pid: u32) {
        self.0.lock().insert((job, pid));
    }

    pub(crate) fn ended(&self, job: JobId, pid: u32) {
        self.0.lock().remove(&(job, pid));
    }

    pub(crate) fn contains(&self, job: JobId, pid: u32) -> bool {
        self.0.lock().contains(&(job, pid))
    }
}

/// The name of worker process `pid`'s log file in the node's log directory.
pub fn worker_log_name(job: JobId, pid: u32) -> String {
    format!("worker-{job}-{pid}.log")
}

/// One read of a log file: the bytes after `offset` (at most [`READ_LOG_BYTES`]), and where
/// the next read starts. With `task`, only its lines (`[T<task>] ...`), and only whole lines:
/// a line still being written is left for the next read.
pub fn read_log(
    file: &mut std::fs::File,
    offset: u64,
    task: Option<TaskId>,
) -> std::io::Result<(Vec<u8>, u64, bool)> {
    file.seek(SeekFrom::Start(offset))?;
    let mut data = Vec::new();
    file.take(READ_LOG_BYTES as u64).read_to_end(&mut data)?;
    let at_end = data.len() < READ_LOG_BYTES;
    let Some(task) = task else {
        let next = offset + data.len() as u64;
        return Ok((data, next, at_end));
    };
    let whole = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let tag = format!("[{task}] ");
    let mut kept = Vec::new();
    for line in data[..whole].split_inclusive(|b| *b == b'\n') {
        if line.starts_with(tag.as_bytes()) {
            kept.extend_from_slice(line);
        }
    }
    Ok((kept, offset + whole as u64, at_end && whole == data.len()))
}

/// Which pipe a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output: tagged `out|`.
    Out,
    /// Standard error: tagged `err|`.
    Err,
}

impl Stream {
    fn tag(self) -> &'static str {
        match self {
            Stream::Out => "out|",
            Stream::Err => "err|",
        }
    }
}

/// Tags the lines of one stream with the task that printed them.
#[derive(Debug)]
pub struct LineTagger {
    stream: Stream,
    task: Option<TaskId>,
}

impl LineTagger {
    /// A tagger for `stream`, outside any task.
    pub fn new(stream: Stream) -> Self {
        LineTagger { stream, task: None }
    }

    /// The task this stream is in, as far as its markers say.
    pub fn task(&self) -> Option<TaskId> {
        self.task
    }

    /// Consumes one line (without its newline): a marker updates the current task and writes
    /// nothing (but any text before it); any other line is appended to `out`, tagged, with a
    /// newline.
    pub fn tag(&mut self, line: &str, out: &mut String) {
        match parse_marker(line) {
            Some((before, marker)) => {
                if !before.is_empty() {
                    self.push(before, out);
                }
                self.task = match marker {
                    Marker::Task(t) => Some(t),
                    Marker::Idle => None,
                };
            }
            None => self.push(line.strip_suffix('\r').unwrap_or(line), out),
        }
    }

    fn push(&self, text: &str, out: &mut String) {
        use fmt::Write as _;
        // Writing into a String cannot fail.
        let _ = match self.task {
            Some(t) => writeln!(out, "[{t}] {}{text}", self.stream.tag()),
            None => writeln!(out, "[-] {}{text}", self.stream.tag()),
        };
    }
}

/// Splits a byte stream into lines and tags them; bytes may arrive in any chunking.
#[derive(Debug)]
pub struct LineSplitter {
    tagger: LineTagger,
    pending: Vec<u8>,
}

impl LineSplitter {
    /// A splitter for `stream`.
    pub fn new(stream: Stream) -> Self {
        LineSplitter {
            tagger: LineTagger::new(stream),
            pending: Vec::new(),
        }
    }

    /// Feeds `bytes`; every completed line is tagged into `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&self.pending[start..start + pos]);
            self.tagger.tag(&line, out);
            start += pos + 1;
        }
        self.pending.drain(..start);
        // A runaway line without newlines is cut rather than buffered without bound.
        while self.pending.len() >= MAX_LINE {
            let rest = self.pending.split_off(MAX_LINE);
            let line = String::from_utf8_lossy(&self.pending);
            self.tagger.tag(&line, out);
            self.pending = rest;
        }
    }

    /// The stream ended: a last line without a newline is still written.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            let line = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            self.tagger.tag(&line, out);
        }
    }
}

/// Where the output of a multi-node job's processes goes besides their log files: to the head,
/// which keeps each instance's log.
#[derive(Clone, Debug)]
pub(crate) struct Tee {
    pub job: starling_proto::JobId,
    pub tx: tokio::sync::mpsc::UnboundedSender<NodeBatch>,
}

impl Tee {
    fn send(&self, text: &str) {
        let op = NodeOp::JobLog(JobLog {
            job: self.job,
            data: text.as_bytes().to_vec(),
        });
        let _ = self.tx.send(NodeBatch { ops: vec![op] });
    }
}

/// Copies `stdout` and `stderr` of one process into `file` (and `tee`), tagged, until both end
/// (the process exited and nobody else holds the pipes); the receiver resolves then. With no
/// file the output is drained and dropped.
///
/// Every process of this agent's is read by one thread, `starling-logs` ([`Pumps`]). A worker
/// writes a marker on both pipes around every task, so a reader woken by every write (as a
/// tokio task per process was) is woken up to four times per task, on the cores the tasks and
/// the head need: on a two-core local cluster that cost a fifth of the no-op task throughput.
/// The thread instead waits for any pipe to have something, drains every pipe, and after a
/// round that read little (under [`BATCH_BELOW`] bytes in all) waits [`BATCH_WAIT`] before it
/// looks again, letting markers and short lines pile up in the pipes, which wakes nobody. After
/// a larger round it looks again at once, so a task that writes a lot is never held back by a
/// full pipe; a process that exits (its pipes hang up) ends the wait at once, as its exit is
/// reported only after its output is read. Lines reach the log at most [`BATCH_WAIT`] later.
pub(crate) fn pump(
    stdout: std::os::fd::OwnedFd,
    stderr: std::os::fd::OwnedFd,
    file: Option<std::fs::File>,
    tee: Option<Tee>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let pumps = Pumps::get()?;
    let (done, ended) = tokio::sync::oneshot::channel();
    let stream = |fd: std::os::fd::OwnedFd, which| {
        let f = std::fs::File::from(fd);
        set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&f));
        Pipe {
            file: f,
            lines: LineSplitter::new(which),
            open: true,
        }
    };
    pumps.procs.lock().push(Pumped {
        pipes: [stream(stdout, Stream::Out), stream(stderr, Stream::Err)],
        file,
        tee,
        done: Some(done),
    });
    pumps.wake();
    Ok(ended)
}

/// [`pump`] for a child's pipes.
pub(crate) fn spawn_pump(
    stdout: tokio::process::ChildStdout,
    stderr: tokio::process::ChildStderr,
    file: Option<std::fs::File>,
    tee: Option<Tee>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    pump(stdout.into_owned_fd()?, stderr.into_owned_fd()?, file, tee)
}

/// A round of [`Pumps`] that read less than this makes it wait [`BATCH_WAIT`].
pub(crate) const BATCH_BELOW: usize = 4096;

/// How long [`Pumps`] lets small writes pile up.
pub(crate) const BATCH_WAIT: std::time::Duration = std::time::Duration::from_millis(5);

/// One stream of a pumped process.
struct Pipe {
    file: std::fs::File,
    lines: LineSplitter,
    open: bool,
}

/// A process whose output is pumped.
struct Pumped {
    pipes: [Pipe; 2],
    file: Option<std::fs::File>,
    tee: Option<Tee>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The processes this agent's log thread reads, and the pipe that wakes it for a new one.
struct Pumps {
    procs: Mutex<Vec<Pumped>>,
    wake_rx: std::io::PipeReader,
    wake_tx: std::io::PipeWriter,
}

static PUMPS: std::sync::OnceLock<Arc<Pumps>> = std::sync::OnceLock::new();

impl Pumps {
    /// The set, its thread started on first use.
    fn get() -> std::io::Result<Arc<Pumps>> {
        if let Some(p) = PUMPS.get() {
            return Ok(p.clone());
        }
        let (wake_rx, wake_tx) = std::io::pipe()?;
        set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&wake_rx));
        set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&wake_tx));
        let fresh = Arc::new(Pumps {
            procs: Mutex::new(Vec::new()),
            wake_rx,
            wake_tx,
        });
        // Two callers may race here: the first set wins, the other's pipe is dropped unused.
        if PUMPS.set(fresh.clone()).is_ok() {
            let run = fresh.clone();
            std::thread::Builder::new()
                .name("starling-logs".into())
                .spawn(move || run.run())?;
        }
        Ok(PUMPS.get().expect("set above").clone())
    }

    fn wake(&self) {
        let _ = (&self.wake_tx).write(&[1]);
    }

    fn run(&self) {
        use std::os::fd::AsRawFd;
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            // Wait until a pipe has something (or ended), or a process is added.
            let mut fds = vec![libc::pollfd {
                fd: self.wake_rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            fds.extend(self.open_fds(libc::POLLIN));
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the whole call.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            while matches!((&self.wake_rx).read(&mut buf), Ok(n) if n > 0) {}
            let mut procs = self.procs.lock();
            let mut read = 0;
            for p in procs.iter_mut() {
                read += p.drain(&mut buf);
            }
            procs.retain_mut(|p| {
                let ended = p.pipes.iter().all(|s| !s.open);
                if ended {
                    if let Some(done) = p.done.take() {
                        let _ = done.send(());
                    }
                }
                !ended
            });
            drop(procs);
            if read < BATCH_BELOW {
                // No events asked for: poll still reports a hang-up (a process exited), not
                // readable data, so the wait ends early only for an exit.
                let mut fds = self.open_fds(0);
                // SAFETY: as above.
                unsafe {
                    libc::poll(
                        fds.as_mut_ptr(),
                        fds.len() as libc::nfds_t,
                        BATCH_WAIT.as_millis() as libc::c_int,
                    )
                };
            }
        }
    }

    /// A pollfd asking for `events` per open pipe.
    fn open_fds(&self, events: libc::c_short) -> Vec<libc::pollfd> {
        use std::os::fd::AsRawFd;
        self.procs
            .lock()
            .iter()
            .flat_map(|p| p.pipes.iter())
            .filter(|s| s.open)
            .map(|s| libc::pollfd {
                fd: s.file.as_raw_fd(),
                events,
                revents: 0,
            })
            .collect()
    }
}

impl Pumped {
    /// Reads everything both pipes hold now into the log; returns the bytes read.
    fn drain(&mut self, buf: &mut [u8]) -> usize {
        let mut text = String::new();
        let mut read = 0;
        for s in self.pipes.iter_mut().filter(|s| s.open) {
            loop {
                match s.file.read(buf) {
                    Ok(0) => {
                        s.open = false;
                        s.lines.finish(&mut text);
                        break;
                    }
                    Ok(n) => {
                        read += n;
                        s.lines.feed(&buf[..n], &mut text);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        s.open = false;
                        s.lines.finish(&mut text);
                        break;
                    }
                }
            }
        }
        if !text.is_empty() {
            if let Some(t) = &self.tee {
                t.send(&text);
            }
            // Each batch is written at once, so the log is readable while the process runs.
            if let Some(f) = self.file.as_mut() {
                if f.write_all(text.as_bytes()).is_err() {
                    self.file = None;
                }
            }
        }
        read
    }
}

fn set_nonblocking(fd: std::os::fd::RawFd) {
    // SAFETY: fcntl on a descriptor this function's caller owns; flags only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// The agent's own log (`log_dir/agent-N<id>.log`): worker starts and exits, restart limits,
/// binary downloads, spill errors. Best effort: a log that cannot be written is not an error
/// worth stopping a node for.
#[derive(Debug)]
pub(crate) struct AgentLog {
    file: Mutex<Option<std::fs::File>>,
    echo: bool,
}

impl AgentLog {
    /// Opens (appends to) `path`, echoing lines to stderr if `echo`; on failure the log
    /// discards lines (but still echoes).
    pub(crate) fn open(path: &Path, echo: bool) -> Self {
        let file = starling_proto::dirs::append_file(path).ok();
        AgentLog {
            file: Mutex::new(file),
            echo,
        }
    }

    /// A log that discards everything.
    #[cfg(test)]
    pub(crate) fn discard() -> Self {
        AgentLog {
            file: Mutex::new(None),
            echo: false,
        }
    }

    /// Appends one timestamped line.
    pub(crate) fn line(&self, args: fmt::Arguments<'_>) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let text = format!("{}.{:03} {args}\n", now.as_secs(), now.subsec_millis());
        if self.echo {
            eprint!("{text}");
        }
        let mut file = self.file.lock();
        if let Some(f) = file.as_mut() {
            if f.write_all(text.as_bytes()).is_err() {
                *file = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        let m = task_marker(Some(TaskId(42)));
        assert_eq!(m, "\x1e[starling task T42]");
        assert_eq!(parse_marker(&m), Some(("", Marker::Task(TaskId(42)))));
        let idle = task_marker(None);
        assert_eq!(idle, "\x1e[starling task -]");
        assert_eq!(parse_marker(&idle), Some(("", Marker::Idle)));
        assert_eq!(
            parse_marker(&format!("{m}\r")),
            Some(("", Marker::Task(TaskId(42))))
        );
    }

    #[test]
    fn markers_after_partial_output() {
        let line = format!("progress 50%{}", task_marker(None));
        assert_eq!(parse_marker(&line), Some(("progress 50%", Marker::Idle)));
    }

    #[test]
    fn not_markers() {
        for line in [
            "",
            "hello",
            "[starling task T1]",
            "\x1e[starling task T]",
            "\x1e[starling task T+1]",
            "\x1e[starling task 1]",
            "\x1e[starling task T1] trailing",
            "\x1e[starling task Tx]",
            "\x1e[starling task T99999999999999999999999]",
        ] {
            assert_eq!(parse_marker(line), None, "{line:?}");
        }
    }

    #[test]
    fn tagger_follows_markers() {
        let mut t = LineTagger::new(Stream::Out);
        let mut out = String::new();
        t.tag("before", &mut out);
        t.tag(&task_marker(Some(TaskId(7))), &mut out);
        assert_eq!(t.task(), Some(TaskId(7)));
        t.tag("inside\r", &mut out);
        t.tag(&format!("tail{}", task_marker(None)), &mut out);
        t.tag("after", &mut out);
        assert_eq!(
            out,
            "[-] out|before\n[T7] out|inside\n[T7] out|tail\n[-] out|after\n"
        );
        let mut e = LineTagger::new(Stream::Err);
        let mut out = String::new();
        e.tag("boom", &mut out);
        assert_eq!(out, "[-] err|boom\n");
    }

    #[test]
    fn splitter_handles_any_chunking() {
        let input = format!(
            "a\n{}\nb1\nb2\n{}\nc",
            task_marker(Some(TaskId(3))),
            task_marker(None)
        );
        let expected = "[-] out|a\n[T3] out|b1\n[T3] out|b2\n[-] out|c\n";
        for chunk in 1..input.len() {
            let mut s = LineSplitter::new(Stream::Out);
            let mut out = String::new();
            for piece in input.as_bytes().chunks(chunk) {
                s.feed(piece, &mut out);
            }
            s.finish(&mut out);
            assert_eq!(out, expected, "chunk size {chunk}");
        }
    }

    #[test]
    fn splitter_cuts_long_lines_and_keeps_invalid_utf8() {
        let mut s = LineSplitter::new(Stream::Err);
        let mut out = String::new();
        s.feed(&vec![b'x'; MAX_LINE + 10], &mut out);
        assert_eq!(out.lines().count(), 1);
        s.feed(b"\n\xff\n", &mut out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1], "[-] err|xxxxxxxxxx");
        assert_eq!(lines[2], "[-] err|\u{fffd}");
    }

    #[test]
    fn log_reads_follow_a_file_and_keep_a_tasks_lines() {
        let dir = std::env::temp_dir().join(format!("starling-log-reads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.log");
        std::fs::write(&path, "[T1] out|one\n[T2] out|two\n[T1] err|thr").unwrap();
        let mut f = std::fs::File::open(&path).unwrap();
        // Everything, then nothing new at the end.
        let (data, next, at_end) = read_log(&mut f, 0, None).unwrap();
        assert_eq!((data.len() as u64, next, at_end), (38, 38, true));
        assert_eq!(
            read_log(&mut f, next, None).unwrap(),
            (Vec::new(), 38, true)
        );
        // One task's whole lines; the line being written waits for its end.
        let (data, next, at_end) = read_log(&mut f, 0, Some(TaskId(1))).unwrap();
        assert_eq!(
            (&data[..], next, at_end),
            (&b"[T1] out|one\n"[..], 26, false)
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"ee\n")
            .unwrap();
        let (data, next, at_end) = read_log(&mut f, next, Some(TaskId(1))).unwrap();
        assert_eq!(
            (&data[..], next, at_end),
            (&b"[T1] err|three\n"[..], 41, true)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What the pump writes to a log file for a process whose stdout and stderr `write` fills
    /// (the pipes end when it returns).
    fn pumped(
        name: &str,
        write: impl FnOnce(&mut std::io::PipeWriter, &mut std::io::PipeWriter),
    ) -> String {
        let dir = std::env::temp_dir().join(format!("starling-logs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.log");
        let file = std::fs::File::create(&path).unwrap();
        let (out_r, mut out_w) = std::io::pipe().unwrap();
        let (err_r, mut err_w) = std::io::pipe().unwrap();
        let pumping = pump(out_r.into(), err_r.into(), Some(file), None).unwrap();
        write(&mut out_w, &mut err_w);
        drop((out_w, err_w));
        pumping.blocking_recv().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        text
    }

    #[test]
    fn pump_writes_both_streams() {
        let text = pumped("both", |out, err| {
            let marked = format!(
                "{}\nhi\n{}\n",
                task_marker(Some(TaskId(1))),
                task_marker(None)
            );
            out.write_all(marked.as_bytes()).unwrap();
            err.write_all(b"warn").unwrap();
        });
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        assert_eq!(lines, ["[-] err|warn", "[T1] out|hi"]);
        let log = AgentLog::discard();
        log.line(format_args!("ignored"));
    }

    /// Every line of a writer of far more than a pipe holds arrives.
    #[test]
    fn pump_keeps_up_with_a_large_writer() {
        let line = "x".repeat(99);
        let text = pumped("big", |out, _| {
            for _ in 0..20_000 {
                writeln!(out, "{line}").unwrap();
            }
        });
        assert_eq!(text.lines().count(), 20_000);
        assert!(text.lines().all(|l| l == format!("[-] out|{line}")));
    }

    /// One thread reads many processes at once, each into its own log, tagged by its own
    /// markers.
    #[test]
    fn one_pump_serves_many_processes_apart() {
        let logs: Vec<String> = std::thread::scope(|s| {
            let each: Vec<_> = (0..16u64)
                .map(|p| {
                    s.spawn(move || {
                        pumped(&format!("many{p}"), |out, err| {
                            for t in 0..50 {
                                let task = TaskId(p * 1000 + t);
                                writeln!(out, "{}", task_marker(Some(task))).unwrap();
                                writeln!(err, "{}", task_marker(Some(task))).unwrap();
                                writeln!(out, "line {t}").unwrap();
                            }
                        })
                    })
                })
                .collect();
            each.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (p, text) in logs.iter().enumerate() {
            let want: Vec<String> = (0..50)
                .map(|t| format!("[{}] out|line {t}", TaskId(p as u64 * 1000 + t)))
                .collect();
            assert_eq!(text.lines().collect::<Vec<_>>(), want, "process {p}");
        }
    }
}
