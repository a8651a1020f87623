//! Per-session hook state on disk: the turn, its latches and the calls that ran.
//!
//! One JSON file per session in the state directory, next to a lock file. Every hook process
//! takes the session's lock for its whole read-judge-write, so two hooks of one session
//! running at once cannot lose a latch; the file is replaced atomically (written beside it,
//! then renamed), so a crash leaves the old state or the new one, never half of either.
//!
//! A state file that cannot be read (corrupt, or written by a newer toolgate) fails closed:
//! the session is taken as latched, with no earlier calls, until the next turn starts.

use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use toolgate_engine::Latched;

/// The newest state format this build reads and writes.
const VERSION: u64 = 1;
/// How many earlier calls are kept for `called_before` (the oldest are dropped first).
pub const MAX_CALLED: usize = 1000;

/// What a session remembers between hook runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionState {
    /// The agent's id of the current turn, when it sends one.
    pub turn: Option<String>,
    /// The current turn's latches.
    pub latched: Latched,
    /// How many turns have started in this session: 0 until the agent signals one.
    pub turns: u64,
    /// Earlier calls in this session, oldest first: the tool, whether it succeeded, and the
    /// turn it ran in (`None` before the agent signalled any turn, or in a state file from
    /// before turns were counted: its age is unknown, so `called_within` does not count it).
    pub called: Vec<(String, bool, Option<u64>)>,
    /// True when the stored state could not be read and this one fails closed.
    pub recovered: bool,
}

impl SessionState {
    /// Starts a new turn: its latches are clear.
    pub fn start_turn(&mut self, turn: Option<String>) {
        self.turn = turn;
        self.turns = self.turns.saturating_add(1);
        self.latched = Latched::Flag(false);
        self.recovered = false;
    }

    /// Remembers that `tool` ran, and whether it succeeded.
    pub fn record_call(&mut self, tool: &str, ok: bool) {
        let turn = (self.turns > 0).then_some(self.turns);
        self.called.push((tool.to_string(), ok, turn));
        if self.called.len() > MAX_CALLED {
            let excess = self.called.len() - MAX_CALLED;
            self.called.drain(..excess);
        }
    }

    /// The state a stored file that cannot be read stands for: every latch set.
    fn fail_closed() -> Self {
        SessionState {
            turn: None,
            turns: 0,
            latched: Latched::Flag(true),
            called: Vec::new(),
            recovered: true,
        }
    }

    fn to_json(&self) -> Value {
        let latched = match &self.latched {
            Latched::Flag(b) => Value::Bool(*b),
            Latched::ByName(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.to_string(), Value::Bool(*v)))
                    .collect::<Map<_, _>>(),
            ),
        };
        let called: Vec<Value> = self
            .called
            .iter()
            .map(|(tool, ok, turn)| match turn {
                Some(t) => json!({"tool": tool, "ok": ok, "turn": t}),
                None => json!({"tool": tool, "ok": ok}),
            })
            .collect();
        json!({"version": VERSION, "turn": self.turn, "turns": self.turns, "latched": latched, "called": called})
    }

    fn from_json(text: &str) -> Option<Self> {
        let Value::Object(top) = toolgate_engine::parse_json(text).ok()? else {
            return None;
        };
        if top.get("version")?.as_u64()? != VERSION {
            return None;
        }
        let turn = match top.get("turn")? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            _ => return None,
        };
        let latched = match top.get("latched")? {
            Value::Bool(b) => Latched::Flag(*b),
            Value::Object(m) => Latched::ByName(
                m.iter()
                    .map(|(k, v)| Some((k.as_str().into(), v.as_bool()?)))
                    .collect::<Option<_>>()?,
            ),
            _ => return None,
        };
        let called = top
            .get("called")?
            .as_array()?
            .iter()
            .map(|c| {
                let turn = match c.get("turn") {
                    None => None,
                    Some(t) => Some(t.as_u64()?),
                };
                Some((
                    c.get("tool")?.as_str()?.to_string(),
                    c.get("ok")?.as_bool()?,
                    turn,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        // Absent in files written before turns were counted: their calls stay undated.
        let turns = match top.get("turns") {
            None => 0,
            Some(t) => t.as_u64()?,
        };
        // A call dated after the session's last turn, or in turn 0, cannot have been written
        // by `record_call`: the file is corrupt, and read as such (every latch set) rather
        // than trusted to make an old call look recent.
        if called
            .iter()
            .any(|c| c.2.is_some_and(|t| t == 0 || t > turns))
        {
            return None;
        }
        Some(SessionState {
            turn,
            turns,
            latched,
            called,
            recovered: false,
        })
    }
}

/// The state directory: one state file and one lock file per session.
pub struct StateDir {
    dir: PathBuf,
}

/// A session's state, held under its lock until dropped.
pub struct Locked {
    /// The state read (or the fail-closed state, when the file could not be read).
    pub state: SessionState,
    path: PathBuf,
    _lock: File,
}

/// Why the state directory could not be used. The hook then fails closed: the call is denied.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The directory, lock or state file could not be created, locked, read or written.
    #[error("hook state `{path}`: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
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
    /// `~/.local/state/toolgate/hooks`, else under the system's temporary directory.
    pub fn default_path() -> PathBuf {
        let base = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".local/state"))
            })
            .unwrap_or_else(std::env::temp_dir);
        base.join("toolgate").join("hooks")
    }

    /// Takes `session`'s lock (waiting for another hook of the same session) and reads its
    /// state. A session with no file yet starts empty.
    pub fn lock(&self, agent: &str, session: &str) -> Result<Locked, StateError> {
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let stem = format!("{agent}-{}", file_stem(session));
        let path = self.dir.join(format!("{stem}.json"));
        let lock_path = self.dir.join(format!("{stem}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        lock.lock().map_err(io(&lock_path))?;
        let state = match std::fs::read_to_string(&path) {
            Ok(text) => SessionState::from_json(&text).unwrap_or_else(SessionState::fail_closed),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SessionState::default(),
            Err(_) => SessionState::fail_closed(),
        };
        Ok(Locked {
            state,
            path,
            _lock: lock,
        })
    }
}

impl Locked {
    /// Writes the state back atomically (a temporary file beside it, then a rename), still
    /// under the lock. There is no fsync: it doubled the hook's wall time, and what it guards
    /// against is a power loss, which ends the agent's turn too. After one, the file holds
    /// the old state, the new one, or something unreadable, which fails closed.
    pub fn save(&self) -> Result<(), StateError> {
        let tmp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let mut file = File::create(&tmp).map_err(io(&tmp))?;
        file.write_all(self.state.to_json().to_string().as_bytes())
            .map_err(io(&tmp))?;
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
    use super::*;

    /// Calls carry the turn they ran in; a file from before turns were counted reads back
    /// with its calls undated, never as recent.
    #[test]
    fn calls_keep_their_turn_and_old_files_read_as_undated() {
        let mut s = SessionState::default();
        s.record_call("before_any_turn", true);
        s.start_turn(None);
        s.start_turn(None);
        s.record_call("read", true);
        assert_eq!(s.called[0].2, None);
        assert_eq!(s.called[1].2, Some(2));
        let back = SessionState::from_json(&s.to_json().to_string()).unwrap();
        assert_eq!(back, s);
        let old = r#"{"version": 1, "turn": null, "latched": false, "called": [{"tool": "read", "ok": true}]}"#;
        let old = SessionState::from_json(old).unwrap();
        assert_eq!((old.turns, old.called[0].2), (0, None));
        for bad in [
            r#"{"version": 1, "turn": null, "turns": "2", "latched": false, "called": []}"#,
            r#"{"version": 1, "turn": null, "turns": 2, "latched": false, "called": [{"tool": "read", "ok": true, "turn": 3}]}"#,
            r#"{"version": 1, "turn": null, "turns": 2, "latched": false, "called": [{"tool": "read", "ok": true, "turn": 0}]}"#,
        ] {
            assert_eq!(SessionState::from_json(bad), None, "{bad}");
        }
    }

    #[test]
    fn state_round_trips_and_bad_files_fail_closed() {
        let mut s = SessionState::default();
        s.start_turn(Some("p1".into()));
        s.latched = Latched::ByName([("untrusted".into(), true)].into());
        s.record_call("verify", true);
        let back = SessionState::from_json(&s.to_json().to_string()).unwrap();
        assert_eq!(back, s);
        for bad in [
            "",
            "{",
            "[]",
            r#"{"version": 2, "turn": null, "latched": false, "called": []}"#,
            r#"{"version": 1, "turn": null, "latched": "yes", "called": []}"#,
            r#"{"version": 1, "turn": null, "latched": false, "latched": true, "called": []}"#,
        ] {
            assert!(SessionState::from_json(bad).is_none(), "{bad}");
        }
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
