//! Private per-user directories and files.
//!
//! Everything Starling keeps on a host by default (object stores, spill, logs, the binary
//! cache, head data, job environments, results, tokens) lives under one directory per user:
//! [`runtime_root`] (`$XDG_RUNTIME_DIR/starling`, else `<temp dir>/starling-<uid>`) and, for
//! shared-memory stores, [`shm_root`] (`/dev/shm/starling-<uid>`). Another local user must not
//! be able to read what is there, nor plant a file there that an agent would execute or map.
//!
//! # Invariants
//! - [`ensure_dir`] creates missing directories with mode 0700 and refuses, with a
//!   [`DirError`] that says what to do, a directory that belongs to another user, is writable
//!   by other users, or is a symlink; a default root must moreover be closed to group and
//!   others entirely (0700). Every existing ancestor must belong to this user or root and,
//!   where others may write to it, carry the sticky bit (as `/tmp` and `/dev/shm` do), so no
//!   one else can swap a component of the path.
//! - Files written through [`create_file`], [`append_file`] and [`write_file`] are 0600
//!   whatever the umask.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The variable that, when set to an existing directory, holds this user's runtime directory.
pub const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";

/// Why a directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Creating or inspecting it failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// It belongs to someone else.
    #[error(
        "{} belongs to uid {owner}, not to this user (uid {uid}): another user may have made it \
         to read or plant files; remove it, or choose another directory",
        path.display()
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective user.
        uid: u32,
    },
    /// Others may enter or write it.
    #[error(
        "{} has mode {mode:04o}: other users could {}; run `chmod 700 {}`",
        path.display(),
        if mode & 0o022 != 0 { "plant files in it" } else { "read what is in it" },
        path.display()
    )]
    TooOpen {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A component of its path could be replaced by another user.
    #[error(
        "{} is not safe: {why}, so another user could replace {}",
        ancestor.display(),
        path.display()
    )]
    UnsafeAncestor {
        /// The directory asked for.
        path: PathBuf,
        /// The offending ancestor.
        ancestor: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// It is a symlink or not a directory.
    #[error("{} is not a directory (a symlink or a file is refused)", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
}

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The per-user root of everything Starling keeps on this host by default:
/// `$XDG_RUNTIME_DIR/starling` where that variable names an existing directory, else
/// `<temp dir>/starling-<uid>`. Only the path: [`ensure_dir`] creates and checks it.
pub fn runtime_root() -> PathBuf {
    if let Some(xdg) = std::env::var_os(XDG_RUNTIME_DIR).map(PathBuf::from) {
        if xdg.is_absolute() && xdg.is_dir() {
            return xdg.join("starling");
        }
    }
    std::env::temp_dir().join(format!("starling-{}", euid()))
}

/// The per-user root for shared-memory object stores: `/dev/shm/starling-<uid>` where there is
/// a `/dev/shm`, else `<runtime root>/shm`. Only the path.
pub fn shm_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join(format!("starling-{}", euid()))
    } else {
        runtime_root().join("shm")
    }
}

/// Whether `path` is one of the default roots, which must be 0700.
fn is_default_root(path: &Path) -> bool {
    path == runtime_root() || path == shm_root()
}

/// Creates `path` (and missing parents) with mode 0700 if it is missing, then checks that it
/// and its ancestors are safe for this user's private files (see the module's invariants).
/// Returns the path made absolute.
pub fn ensure_dir(path: &Path) -> Result<PathBuf, DirError> {
    let io = |path: &Path, source| DirError::Io {
        path: path.to_path_buf(),
        source,
    };
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| io(path, e))?.join(path)
    };
    // Existing ancestors, outermost first, before anything is made inside them: a default
    // root must be this user's and 0700; any other must be this user's or root's and, where
    // others may write to it, sticky (they cannot rename or remove entries they do not own).
    // Missing ones are made below, 0700.
    let mut ancestors: Vec<&Path> = path.ancestors().skip(1).collect();
    ancestors.reverse();
    for ancestor in ancestors {
        if std::fs::symlink_metadata(ancestor).is_err() {
            break;
        }
        if is_default_root(ancestor) {
            check_own(ancestor)?;
            continue;
        }
        let meta = std::fs::metadata(ancestor).map_err(|e| io(ancestor, e))?;
        let unsafe_because = |why: String| DirError::UnsafeAncestor {
            path: path.clone(),
            ancestor: ancestor.to_path_buf(),
            why,
        };
        if meta.uid() != 0 && meta.uid() != euid() {
            return Err(unsafe_because(format!("it belongs to uid {}", meta.uid())));
        }
        let mode = meta.mode();
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(unsafe_because(format!(
                "it has mode {:04o} (writable by others, without the sticky bit)",
                mode & 0o7777
            )));
        }
    }
    if std::fs::symlink_metadata(&path).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|e| io(&path, e))?;
    }
    check_own(&path)?;
    Ok(path)
}

/// Checks a directory of this user's: a real directory (not a symlink), this user's, closed
/// to writes by others, and to everything by others if it is a default root.
fn check_own(path: &Path) -> Result<(), DirError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| DirError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let path = path.to_path_buf();
    if !meta.is_dir() {
        return Err(DirError::NotADirectory { path });
    }
    let uid = euid();
    if meta.uid() != uid {
        return Err(DirError::NotOwned {
            owner: meta.uid(),
            uid,
            path,
        });
    }
    let mode = meta.mode() & 0o7777;
    let closed = if is_default_root(&path) { 0o077 } else { 0o022 };
    if mode & closed != 0 {
        return Err(DirError::TooOpen { path, mode });
    }
    Ok(())
}

/// Creates `path` and missing parents with mode 0700, without [`ensure_dir`]'s checks: for
/// directories inside one already checked.
pub fn create_dir(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Creates (or truncates) `path` for writing, mode 0600 for a new file.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Opens `path` for appending, creating it with mode 0600.
pub fn append_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Writes `bytes` to `path` (created with mode 0600, or truncated).
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_file(path)?.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("starling-dirs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn created_directories_and_files_are_private() {
        let d = scratch("create");
        let deep = d.join("a/b");
        assert_eq!(ensure_dir(&deep).unwrap(), deep);
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&d.join("a")), 0o700);
        assert_eq!(mode(&deep), 0o700);
        write_file(&deep.join("f"), b"x").unwrap();
        assert_eq!(mode(&deep.join("f")), 0o600);
        drop(append_file(&deep.join("g")).unwrap());
        assert_eq!(mode(&deep.join("g")), 0o600);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn open_or_linked_directories_are_refused() {
        let d = scratch("open");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ensure_dir(&d).unwrap_err();
        assert!(matches!(e, DirError::TooOpen { mode: 0o777, .. }), "{e}");
        assert!(e.to_string().contains("chmod 700"), "{e}");
        // A directory inside a world-writable, non-sticky one could be swapped.
        let e = ensure_dir(&d.join("inner")).unwrap_err();
        assert!(matches!(e, DirError::UnsafeAncestor { .. }), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("/", d.join("link")).unwrap();
        let e = ensure_dir(&d.join("link")).unwrap_err();
        assert!(matches!(e, DirError::NotADirectory { .. }), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn another_users_directory_is_refused() {
        // Root makes one that belongs to `nobody`; anyone else finds one in `/`, root's.
        let (d, owner) = if euid() == 0 {
            let d = scratch("owner");
            std::fs::create_dir_all(&d).unwrap();
            std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
            (d, 65534)
        } else {
            (PathBuf::from("/"), 0)
        };
        let e = ensure_dir(&d).unwrap_err();
        assert!(
            matches!(&e, DirError::NotOwned { owner: o, .. } if *o == owner),
            "{e}"
        );
        assert!(e.to_string().contains("another user"), "{e}");
        if owner != 0 {
            std::fs::remove_dir_all(&d).unwrap();
        }
    }
}
