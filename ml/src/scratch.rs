//! Node-local scratch: per-row state of a shard kept between its tasks in memory-mapped files
//! on the node: the rows grouped by the tree node they are at in the tree being grown (`part`,
//! see [`crate::partition`]), and the rows' margins and fixed-point gradients (`mar`). Also a
//! level's histograms (`hist`), when the fit's driver shares the directory (it leaves a
//! `starling-ml-<fit>.driver` marker there): the driver reads them from a mapping it keeps,
//! instead of a new store file per level and shard.
//!
//! Any worker process on the node continues where the previous task left off, updating the
//! file in place: nothing is copied, nothing goes through the object store. A file's stamp says
//! which round (and level) its contents are after; a task that finds another stamp (or no file:
//! it ran on another node, or the node restarted) recomputes them from the trees and splits it
//! is given, so the scratch changes the speed of a fit, never its result.
//!
//! Files live in `$STARLING_ML_SCRATCH`, else this user's private `<shm root>/ml` (see
//! `starling::dirs`), named `starling-ml-<fit>-<rank>.<kind>` (mode 0600); the driver removes
//! them when the fit ends.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memmap2::{MmapMut, MmapOptions};

/// Bytes before the positions: magic, round, depth, rows.
const HEADER: usize = 16;
const MAGIC: u32 = 0x5354_4d4c; // "STML"

/// The directory scratch files go in: this user's shared-memory directory (private: the files
/// hold training data), or `STARLING_ML_SCRATCH`.
fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STARLING_ML_SCRATCH") {
        return PathBuf::from(d);
    }
    starling::dirs::shm_root().join("ml")
}

/// [`dir`]: the default created 0700 if missing and checked to be this user's alone; a
/// directory named by `STARLING_ML_SCRATCH` used as it is (without it, nothing is kept).
fn private_dir() -> io::Result<PathBuf> {
    if std::env::var_os("STARLING_ML_SCRATCH").is_some() {
        return Ok(dir());
    }
    starling::dirs::ensure_dir(&dir()).map_err(io::Error::other)
}

/// Rows grouped by tree node.
pub const PARTITION: &str = "part";
/// Margins then gradients.
pub const MARGINS: &str = "mar";
/// A level's histograms, left for a driver on the same node (see [`mark_driver`]).
pub const HIST: &str = "hist";

/// What the names of a fit's shard files start with.
fn fit_prefix(fit: u64) -> String {
    format!("starling-ml-{fit:016x}-")
}

fn path(fit: u64, rank: u32, kind: &str) -> PathBuf {
    dir().join(format!("{}{rank}.{kind}", fit_prefix(fit)))
}

/// One shard's scratch file of `len` 32-bit words, mapped.
pub struct Scratch {
    map: Option<MmapMut>,
    len: usize,
    key: Key,
}

/// What a mapping is of: the file's path, inode and size.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    fit: u64,
    path: PathBuf,
    inode: u64,
    size: u64,
}

/// Mappings this process keeps between tasks (of the latest fit only): a fresh mapping costs
/// a page fault per page touched, which for a shard's scratch is as much as the level pass.
/// A mapping is reused only while its file is the same file (same inode) of the same size.
static MAPPED: Mutex<Vec<(Key, MmapMut)>> = Mutex::new(Vec::new());

/// Most mappings kept.
const KEEP: usize = 16;

impl Scratch {
    /// Opens (creating it if needed) the `kind` file of shard `rank` of `fit`, sized for `len`
    /// words. A new or resized file has no valid stamp.
    pub fn open(fit: u64, rank: u32, kind: &str, len: usize) -> io::Result<Self> {
        Self::open_with(fit, rank, kind, len, true)
    }

    /// Opens the `kind` file of shard `rank` of `fit` if it exists with room for `len` words.
    pub fn open_existing(fit: u64, rank: u32, kind: &str, len: usize) -> io::Result<Self> {
        let size = (HEADER + 4 * len) as u64;
        let meta = std::fs::metadata(path(fit, rank, kind))?;
        if meta.len() != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("scratch file of {} bytes, not {size}", meta.len()),
            ));
        }
        Self::open_with(fit, rank, kind, len, false)
    }

    fn open_with(fit: u64, rank: u32, kind: &str, len: usize, create: bool) -> io::Result<Self> {
        let path = path(fit, rank, kind);
        let size = (HEADER + 4 * len) as u64;
        if let Ok(meta) = std::fs::metadata(&path) {
            let key = Key {
                fit,
                path: path.clone(),
                inode: meta.ino(),
                size,
            };
            let mut mapped = MAPPED.lock().unwrap_or_else(|e| e.into_inner());
            if meta.len() == size {
                if let Some(at) = mapped.iter().position(|(k, _)| *k == key) {
                    let (key, map) = mapped.swap_remove(at);
                    return Ok(Scratch {
                        map: Some(map),
                        len,
                        key,
                    });
                }
            }
        }
        if create {
            private_dir()?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        let meta = file.metadata()?;
        if meta.len() != size {
            file.set_len(0)?;
            file.set_len(size)?;
        }
        // SAFETY: the file is this fit's own scratch, written only by the tasks of one shard,
        // which the driver runs one at a time (and a `hist` file read by the driver between
        // them); its size is fixed for the fit, so nothing truncates it while it is mapped.
        let map = unsafe { MmapOptions::new().populate().map_mut(&file)? };
        Ok(Scratch {
            map: Some(map),
            len,
            key: Key {
                fit,
                path,
                inode: meta.ino(),
                size,
            },
        })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().expect("mapped until dropped")
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.map.as_deref_mut().expect("mapped until dropped")
    }

    fn word(&self, i: usize) -> u32 {
        let b = self.bytes();
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    }

    /// The `(round, depth)` the positions are after, if the file holds a complete set.
    pub fn stamp(&self) -> Option<(u32, u32)> {
        (self.word(0) == MAGIC && self.word(3) as usize == self.len)
            .then(|| (self.word(1), self.word(2)))
    }

    /// Marks the positions as being after `(round, depth)` (call once they are all written).
    pub fn set_stamp(&mut self, at: Option<(u32, u32)>) {
        let (magic, (round, depth)) = match at {
            Some(at) => (MAGIC, at),
            None => (0, (0, 0)),
        };
        for (i, w) in [magic, round, depth, self.len as u32]
            .into_iter()
            .enumerate()
        {
            self.bytes_mut()[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
    }

    /// The words as bytes, to read in place.
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[HEADER..HEADER + 4 * self.len]
    }

    /// The words as bytes, to write in place.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.bytes_mut()[HEADER..HEADER + 4 * len]
    }

    /// The words, to read and update in place.
    pub fn as_mut_slice(&mut self) -> &mut [u32] {
        let len = self.len;
        let bytes = &mut self.bytes_mut()[HEADER..HEADER + 4 * len];
        // SAFETY: a mapping starts on a page boundary and HEADER is a multiple of 4, so the
        // bytes are aligned for u32; every bit pattern is a valid u32; the length is exact.
        unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u32>(), self.len) }
    }

    /// The words split at `mid`, the first part as `f32`s and the rest as `i32`s (margins
    /// and gradients).
    pub fn f32s_and_i32s(&mut self, mid: usize) -> (&mut [f32], &mut [i32]) {
        let (a, b) = self.as_mut_slice().split_at_mut(mid);
        // SAFETY: f32 and i32 have the size and alignment of u32, and every bit pattern is a
        // valid value of each.
        unsafe {
            (
                std::slice::from_raw_parts_mut(a.as_mut_ptr().cast::<f32>(), a.len()),
                std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<i32>(), b.len()),
            )
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Some(map) = self.map.take() else { return };
        let mut mapped = MAPPED.lock().unwrap_or_else(|e| e.into_inner());
        // Only the latest fit's mappings stay (an earlier fit's files are gone or going).
        mapped.retain(|(k, _)| k.fit == self.key.fit && k.path != self.key.path);
        if mapped.len() < KEEP {
            mapped.push((self.key.clone(), map));
        }
    }
}

/// Removes the scratch files of shard `rank` of `fit` (if any), and this process's mappings
/// of them.
pub fn remove(fit: u64, rank: u32) {
    let kinds = [PARTITION, MARGINS, HIST];
    let paths = kinds.map(|kind| path(fit, rank, kind));
    MAPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(k, _)| !paths.contains(&k.path));
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

/// The marker a fit's driver leaves in the scratch directory: tasks that see it share the
/// driver's scratch (same host, same directory), so they may leave results there for it.
fn driver_marker(fit: u64) -> PathBuf {
    dir().join(format!("starling-ml-{fit:016x}.driver"))
}

/// Marks this process as the driver of `fit` for tasks that share its scratch directory
/// (the marker holds this process's id), after removing what the fits of drivers that died
/// on this host left in the directory.
pub fn mark_driver(fit: u64) -> io::Result<()> {
    sweep_dead_drivers(&private_dir()?);
    starling::dirs::write_file(
        &driver_marker(fit),
        std::process::id().to_string().as_bytes(),
    )
}

/// Removes the files of fits whose marker names a process that no longer runs (a driver that
/// crashed or was killed mid-fit never removes them). Returns the fits swept. Sweeping a live
/// fit by mistake (a driver in another pid namespace sharing the directory) costs it speed, not
/// its result: its tasks rebuild what they find missing, and its driver reads its histograms
/// as values.
fn sweep_dead_drivers(dir: &Path) -> Vec<u64> {
    // Liveness from /proc: where there is none, nothing is swept.
    if !Path::new("/proc/self").exists() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    // The fit of a marker naming a process that is gone.
    let dead = |name: &str| {
        let fit = name
            .strip_prefix("starling-ml-")?
            .strip_suffix(".driver")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())?;
        let pid: u32 = std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (!Path::new("/proc").join(pid.to_string()).exists()).then_some(fit)
    };
    let swept: Vec<(u64, &String)> = names
        .iter()
        .filter_map(|n| dead(n).map(|fit| (fit, n)))
        .collect();
    for (fit, marker) in &swept {
        let prefix = fit_prefix(*fit);
        for name in names.iter().filter(|n| n.starts_with(&prefix)) {
            let _ = std::fs::remove_file(dir.join(name));
        }
        let _ = std::fs::remove_file(dir.join(marker));
    }
    swept.into_iter().map(|(fit, _)| fit).collect()
}

/// Whether the driver of `fit` shares this process's scratch directory.
pub fn driver_here(fit: u64) -> bool {
    driver_marker(fit).exists()
}

/// Ends [`mark_driver`] and drops this process's mappings of the fit's files.
pub fn unmark_driver(fit: u64) {
    let _ = std::fs::remove_file(driver_marker(fit));
    MAPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(k, _)| k.fit != fit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_of_fits_whose_driver_died_are_swept() {
        let dir = std::env::temp_dir().join(format!("starling-ml-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A process that has exited: its id names no process (until reused, which a test
        // run does not wait for).
        let dead = std::process::Command::new("true")
            .spawn()
            .and_then(|mut c| c.wait().map(|_| c.id()))
            .unwrap();
        let (gone, live) = (0xdead_u64, 0x11fe_u64);
        for (fit, pid) in [(gone, dead), (live, std::process::id())] {
            std::fs::write(
                dir.join(format!("starling-ml-{fit:016x}.driver")),
                pid.to_string(),
            )
            .unwrap();
            for kind in ["0.part", "0.mar", "1.hist"] {
                std::fs::write(dir.join(format!("starling-ml-{fit:016x}-{kind}")), b"x").unwrap();
            }
        }
        std::fs::write(dir.join("unrelated"), b"x").unwrap();
        assert_eq!(sweep_dead_drivers(&dir), vec![gone]);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                format!("starling-ml-{live:016x}-0.mar"),
                format!("starling-ml-{live:016x}-0.part"),
                format!("starling-ml-{live:016x}-1.hist"),
                format!("starling-ml-{live:016x}.driver"),
                "unrelated".to_string(),
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn positions_persist_between_openings_with_their_stamp() {
        let fit = 0x7e57_0000_0000_0001 ^ u64::from(std::process::id());
        let mut p = Scratch::open(fit, 3, PARTITION, 5).unwrap();
        assert_eq!(p.stamp(), None, "a new file has no stamp");
        p.as_mut_slice().copy_from_slice(&[1, 2, 3, 4, 5]);
        p.set_stamp(Some((7, 2)));
        drop(p);
        let mut q = Scratch::open(fit, 3, PARTITION, 5).unwrap();
        assert_eq!(q.stamp(), Some((7, 2)));
        assert_eq!(q.as_mut_slice(), &[1, 2, 3, 4, 5]);
        drop(q);
        // Another size: the old contents do not count.
        let mut r = Scratch::open(fit, 3, PARTITION, 6).unwrap();
        assert_eq!(r.stamp(), None);
        let (f, i) = r.f32s_and_i32s(2);
        f[1] = -1.5;
        i[3] = -7;
        assert_eq!(r.as_mut_slice()[1], (-1.5f32).to_bits());
        assert_eq!(r.as_mut_slice()[5], (-7i32) as u32);
        drop(r);
        remove(fit, 3);
        assert!(!path(fit, 3, PARTITION).exists());
    }
}
