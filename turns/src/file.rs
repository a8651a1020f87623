//! The file backend: one session's [`SessionTurns`] per file, for `toolgate hook` (a process
//! per agent event).
//!
//! One JSON file per (agent, policy module, session) in the state directory, next to a lock
//! file. Every hook process takes the session's lock for its whole read-judge-write, so two
//! hooks of one session running at once cannot lose a latch; the file is replaced atomically
//! (written to a new file beside it, then renamed), so a crash leaves the old state or the
//! new one, never half of either.
//!
//! The directory is the user's own: it is created with mode 0700, and one that another user
//! owns or may write is refused, since whoever can replace a latched session's file can
//! unlatch it. There is no shared fallback (such as the system's temporary directory) when
//! no home directory is known. Files are opened without following symlinks, and a temporary
//! file is created exclusively under a random name.
//!
//! A state file that cannot be read (corrupt, truncated, empty, from another version, larger
//! than [`MAX_STATE_BYTES`]) fails closed: [`SessionTurns::recovered`], every latch set until
//! the user's next explicit turn signal.

use crate::codec;
pub use crate::codec::MAX_STATE_BYTES;
use crate::session::SessionTurns;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The state directory: one state file and one lock file per session.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

/// A session's state, held under its lock until dropped.
pub struct Locked {
    /// The state read (or the fail-closed state, when the file could not be read).
    pub state: SessionTurns,
    path: PathBuf,
    _lock: File,
}

/// Why the state directory could not be used. The hook then fails closed: the call is denied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The directory, lock or state file could not be created, locked, read or written.
    #[error("hook state `{path}`: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The directory is not safe to keep state in.
    #[error("hook state directory `{path}` {why}; latches kept there could be replaced by another user (use a directory only you can write, mode 0700)")]
    Unsafe {
        /// The directory.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// No directory was given and none can be derived.
    #[error("no hook state directory: neither XDG_STATE_HOME nor HOME is set; give --state-dir")]
    NoDefault,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.display().to_string(),
        source,
    }
}

impl StateDir {
    /// A state directory at `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir { dir: dir.into() }
    }

    /// The default directory: `$XDG_STATE_HOME/toolgate/hooks`, else
    /// `~/.local/state/toolgate/hooks`. No fallback is shared with other users.
    pub fn default_path() -> Result<PathBuf, StateError> {
        let base = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".local/state"))
            })
            .ok_or(StateError::NoDefault)?;
        Ok(base.join("toolgate").join("hooks"))
    }

    /// Creates the directory (mode 0700) if needed and checks that only this user owns and
    /// may write it.
    fn prepare(&self) -> Result<(), StateError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io(&self.dir))?;
        let meta = std::fs::metadata(&self.dir).map_err(io(&self.dir))?;
        let unsafe_dir = |why: String| StateError::Unsafe {
            path: self.dir.display().to_string(),
            why,
        };
        if !meta.is_dir() {
            return Err(unsafe_dir("is not a directory".into()));
        }
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(unsafe_dir(format!(
                "is owned by uid {}, not by this user (uid {me})",
                meta.uid()
            )));
        }
        let mode = meta.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(unsafe_dir(format!(
                "may be written by its group or by others (mode {:o})",
                mode & 0o777
            )));
        }
        Ok(())
    }

    /// Takes the lock of `session` under `module` (waiting for another hook of the same
    /// session) and reads its state. A session with no file yet starts empty.
    pub fn lock(&self, agent: &str, module: &str, session: &str) -> Result<Locked, StateError> {
        self.prepare()?;
        let stem = format!("{agent}-{module}-{}", file_stem(session));
        let path = self.dir.join(format!("{stem}.json"));
        let lock_path = self.dir.join(format!("{stem}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(no_follow())
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        lock.lock().map_err(io(&lock_path))?;
        let state = match OpenOptions::new()
            .read(true)
            .custom_flags(no_follow())
            .open(&path)
        {
            Ok(file) => read_state(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SessionTurns::default(),
            Err(_) => SessionTurns::recovered(),
        };
        Ok(Locked {
            state,
            path,
            _lock: lock,
        })
    }
}

/// `O_NOFOLLOW`: a symlink planted where a state file goes is an error, not a redirect.
fn no_follow() -> i32 {
    // The flag's bits fit an `i32`, the type `custom_flags` takes.
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0)
}

/// The state in `file`, or the fail-closed state when it cannot be read.
fn read_state(file: File) -> SessionTurns {
    let mut text = String::new();
    let read = file.take(MAX_STATE_BYTES + 1).read_to_string(&mut text);
    if read.is_err() || text.len() as u64 > MAX_STATE_BYTES {
        return SessionTurns::recovered();
    }
    codec::decode_or_recovered(&text)
}

impl Locked {
    /// Writes the state back atomically (a new file beside it, then a rename), still under
    /// the lock. There is no fsync: it doubled the hook's wall time, and what it guards
    /// against is a power loss, which ends the agent's turn too. After one, the file holds
    /// the old state, the new one, or something unreadable, which fails closed.
    pub fn save(&self) -> Result<(), StateError> {
        let text = codec::encode(&self.state).map_err(|e| StateError::Io {
            path: self.path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|e| StateError::Io {
            path: self.path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let suffix: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = self.path.with_extension(format!("json.{suffix}.tmp"));
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(no_follow())
            .open(&tmp)
            .map_err(io(&tmp))?;
        if let Err(e) = out.write_all(&text) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(&tmp)(e));
        }
        std::fs::rename(&tmp, &self.path).map_err(io(&self.path))
    }
}

/// A file name for a session id: the id itself when it is short and plain, else a hash of it
/// (an id is agent input and may hold `/` or `..`).
fn file_stem(session: &str) -> String {
    let plain = !session.is_empty()
        && session.len() <= 64
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        session.to_string()
    } else {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(session.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("h{}", &hex[..32])
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("toolgate-turns-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_directory_others_may_write_is_refused_and_a_new_one_is_private() {
        let dir = temp("modes");
        let d = StateDir::new(&dir);
        let locked = d.lock("claude-code", "m", "s1").unwrap();
        locked.save().unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let file_mode = std::fs::metadata(dir.join("claude-code-m-s1.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(file_mode, 0o600);
        drop(locked);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = d.lock("claude-code", "m", "s1").err().unwrap();
        assert!(matches!(err, StateError::Unsafe { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlinked_state_file_is_not_followed() {
        let dir = temp("symlink");
        let d = StateDir::new(&dir);
        drop(d.lock("cursor", "m", "s").unwrap());
        let target = dir.join("elsewhere.json");
        std::fs::write(&target, "planted").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("cursor-m-s.json")).unwrap();
        let locked = d.lock("cursor", "m", "s").unwrap();
        assert!(locked.state.is_recovered());
        drop(locked);
        std::os::unix::fs::symlink(&target, dir.join("cursor-m-t.lock")).unwrap();
        assert!(d.lock("cursor", "m", "t").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn session_ids_never_escape_the_directory() {
        assert_eq!(file_stem("abc-123_X"), "abc-123_X");
        for hostile in ["../../etc/passwd", "a/b", "", ".", &"x".repeat(65)] {
            let stem = file_stem(hostile);
            assert!(
                stem.starts_with('h') && stem.len() == 33,
                "{hostile}: {stem}"
            );
        }
        assert_ne!(file_stem("a/b"), file_stem("a/c"));
    }
}
