//! The turn-state contract (`turns/contract/scenarios.json`, issue 20) run against every
//! surface this binary serves: `toolgate hook` (state files), `/v1/hooks` and `/v1/decide`
//! in memory, and both over a real `redis-server` (`--state`). The Python and Node packages run the
//! same file (`bindings/python/tests`, `bindings/node/test`). A scenario a surface cannot run (`needs`) is skipped
//! there, and each driver says which ones in [`Surface::can`].
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::redis_support::{redis_available, Redis};
use crate::server_support::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;

const SCENARIOS: &str = include_str!("../../turns/contract/scenarios.json");

/// One surface under test, driven with Claude Code's event shapes.
trait Surface {
    /// Whether it can run a step of kind `need` (`lose`, `policy`).
    fn can(&self, need: &str) -> bool;
    /// Sends `event`; the decision ("deny", "allow" or "" for none).
    fn send(&mut self, event: &Value) -> String;
    /// Loses the session's state as this backend can (a corrupt file, a flushed store).
    fn lose(&mut self);
    /// Replaces the serving policy with `text`.
    fn set_policy(&mut self, text: &str);
    /// Which reading of unseen turn ids a per-mode expectation takes here (`need_signal`:
    /// only a prompt starts a turn).
    fn reading(&self) -> &'static str {
        "need_signal"
    }
}

struct Contract {
    file: Value,
}

impl Contract {
    fn load() -> Contract {
        Contract {
            file: serde_json::from_str(SCENARIOS).unwrap(),
        }
    }

    fn policy(&self, name: &str) -> &str {
        self.file["policies"][name].as_str().unwrap()
    }

    fn base_policy(&self) -> &str {
        self.policy(self.file["policy"].as_str().unwrap())
    }

    /// Runs every scenario on the surface `make` builds (one per scenario, so none sees
    /// another's state); returns the names of those it skipped.
    fn run<'s>(&self, label: &str, mut make: impl FnMut() -> Box<dyn Surface + 's>) -> Vec<String> {
        let mut skipped = Vec::new();
        for scenario in self.file["scenarios"].as_array().unwrap() {
            let name = scenario["name"].as_str().unwrap();
            let mut surface = make();
            let needs: Vec<&str> = scenario["needs"]
                .as_array()
                .map(|a| a.iter().map(|n| n.as_str().unwrap()).collect())
                .unwrap_or_default();
            if let Some(missing) = needs.iter().find(|n| !surface.can(n)) {
                skipped.push(format!("{name} (no {missing})"));
                continue;
            }
            let session = format!("contract-{name}");
            for (i, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
                let at = format!("{label}: {name}, step {i} {step}");
                if let Some(id) = step["signal"].as_str() {
                    let event = json!({"session_id": session, "prompt_id": id,
                                       "hook_event_name": "UserPromptSubmit", "prompt": "hi"});
                    assert_eq!(surface.send(&event), "", "{at}");
                } else if let Some(tool) = step["call"].as_str() {
                    let want = match &step["expect"] {
                        Value::String(s) => s.as_str(),
                        per_mode => per_mode[surface.reading()].as_str().unwrap(),
                    };
                    let event = json!({"session_id": session, "prompt_id": step["turn"],
                                       "hook_event_name": "PreToolUse", "tool_name": tool,
                                       "tool_input": {}, "tool_use_id": format!("u{i}")});
                    let got = match surface.send(&event).as_str() {
                        "deny" => "deny",
                        _ => "allow",
                    };
                    assert_eq!(got, want, "{at}");
                } else if let Some(tool) = step["post"].as_str() {
                    let event = json!({"session_id": session, "prompt_id": step["turn"],
                                       "hook_event_name": "PostToolUse", "tool_name": tool,
                                       "tool_input": {}, "tool_use_id": format!("u{i}"),
                                       "tool_response": {}});
                    assert_eq!(surface.send(&event), "", "{at}");
                } else if step["lose"] == true {
                    surface.lose();
                } else if let Some(policy) = step["policy"].as_str() {
                    surface.set_policy(self.policy(policy));
                } else {
                    panic!("unknown step {at}");
                }
            }
        }
        skipped
    }
}

fn decision(v: &Value) -> String {
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `toolgate hook claude-code`: a process per event, state in files.
struct HookFile {
    dir: PathBuf,
}

impl HookFile {
    fn new(policy: &str) -> HookFile {
        let dir = temp_dir("contract-hook");
        std::fs::write(dir.join("contract.gate"), policy).unwrap();
        HookFile { dir }
    }
}

impl Surface for HookFile {
    fn can(&self, _: &str) -> bool {
        true
    }

    fn send(&mut self, event: &Value) -> String {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["hook", "claude-code", "--policy"])
            .arg(self.dir.join("contract.gate"))
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(event.to_string().as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        match out.status.code() {
            Some(0) if stdout.trim().is_empty() => String::new(),
            Some(0) => decision(&serde_json::from_str(&stdout).unwrap()),
            // Exit 2 blocks the call (the hook's answer when it cannot judge one).
            Some(2) => "deny".into(),
            other => panic!(
                "hook exited {other:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    fn lose(&mut self) {
        for entry in std::fs::read_dir(self.dir.join("state")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                std::fs::write(&path, "{\"version\":2,\"state\":").unwrap();
            }
        }
    }

    fn set_policy(&mut self, text: &str) {
        std::fs::write(self.dir.join("contract.gate"), text).unwrap();
    }
}

impl Drop for HookFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `POST /v1/hooks/claude-code` on a running server; its turn state in memory, or in a
/// shared store it can flush.
struct HttpHooks<'a> {
    server: Rc<Server>,
    redis: Option<&'a Redis>,
    base_policy: String,
    changed_policy: bool,
}

impl Surface for HttpHooks<'_> {
    fn can(&self, need: &str) -> bool {
        // A server in memory loses its state only with the process, and with it every
        // session; the shared store can lose it under a running server.
        need != "lose" || self.redis.is_some()
    }

    fn send(&mut self, event: &Value) -> String {
        let (st, v) = post_json(&self.server.addr, "/v1/hooks/claude-code", event);
        assert_eq!(st, 200, "{v}");
        decision(&v)
    }

    fn lose(&mut self) {
        let redis = self.redis.unwrap();
        assert_eq!(redis.command(&["FLUSHALL"]).as_deref(), Some("+OK"));
    }

    fn set_policy(&mut self, text: &str) {
        std::fs::write(self.server.dir.join("contract.gate"), text).unwrap();
        // An explicit reload applies a change the gate would hold as a widening.
        let (st, v) = post_json(&self.server.addr, "/v1/reload", &json!({}));
        assert_eq!(st, 200, "{v}");
        self.changed_policy = true;
    }
}

impl Drop for HttpHooks<'_> {
    fn drop(&mut self) {
        if self.changed_policy && !std::thread::panicking() {
            let base = self.base_policy.clone();
            self.set_policy(&base);
        }
    }
}

/// `POST /v1/decide` with `session` and `turn`: the executor's batch endpoint, one call per
/// batch here. Its turn ids are the executor's own and a prompt has no event of its own, so
/// an unseen id starts a turn, and is the only sign of one (the `no_signal` reading). The server keeps latches only; `called` is the executor's fact, so the driver
/// carries the calls it was told ran, as an executor does.
struct HttpDecide<'a> {
    hooks: HttpHooks<'a>,
    ran: Vec<Value>,
}

impl Surface for HttpDecide<'_> {
    fn can(&self, need: &str) -> bool {
        self.hooks.can(need)
    }

    fn send(&mut self, event: &Value) -> String {
        match event["hook_event_name"].as_str().unwrap() {
            "UserPromptSubmit" => String::new(),
            "PostToolUse" => {
                self.ran
                    .push(json!({"tool": event["tool_name"], "ok": true}));
                String::new()
            }
            _ => {
                let body = json!({
                    "session": event["session_id"], "turn": event["prompt_id"],
                    "facts": {"stage": "main", "called": self.ran},
                    "calls": [{"id": event["tool_use_id"], "tool": event["tool_name"], "args": {}}],
                });
                let (st, v) = post_json(&self.hooks.server.addr, "/v1/decide", &body);
                assert_eq!(st, 200, "{v}");
                if v["decisions"][0]["allow"] == true {
                    "allow".into()
                } else {
                    "deny".into()
                }
            }
        }
    }

    fn lose(&mut self) {
        self.hooks.lose();
    }

    fn set_policy(&mut self, text: &str) {
        self.hooks.set_policy(text);
    }

    fn reading(&self) -> &'static str {
        "no_signal"
    }
}

#[test]
fn toolgate_hook_with_state_files_keeps_the_contract() {
    let contract = Contract::load();
    let policy = contract.base_policy().to_string();
    let skipped = contract.run("toolgate hook", || Box::new(HookFile::new(&policy)));
    assert!(skipped.is_empty(), "{skipped:?}");
}

#[test]
fn v1_hooks_in_memory_keeps_the_contract() {
    let contract = Contract::load();
    let policy = contract.base_policy().to_string();
    let server = Rc::new(start(
        "contract-memory",
        &[("contract.gate", &policy)],
        &["--poll-ms", "0"],
    ));
    let skipped = contract.run("/v1/hooks (memory)", || {
        Box::new(HttpHooks {
            server: server.clone(),
            redis: None,
            base_policy: policy.clone(),
            changed_policy: false,
        })
    });
    assert_eq!(
        skipped,
        ["lost_state_keeps_every_turn_latched_until_the_next_signal (no lose)"]
    );
}

#[test]
fn v1_hooks_over_redis_keeps_the_contract() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("contract", false);
    let contract = Contract::load();
    let policy = contract.base_policy().to_string();
    let url = redis.url();
    let server = Rc::new(start(
        "contract-redis",
        &[("contract.gate", &policy)],
        &["--poll-ms", "0", "--state", &url, "--state-new"],
    ));
    let skipped = contract.run("/v1/hooks (redis)", || {
        Box::new(HttpHooks {
            server: server.clone(),
            redis: Some(&redis),
            base_policy: policy.clone(),
            changed_policy: false,
        })
    });
    assert!(skipped.is_empty(), "{skipped:?}");
}

#[test]
fn v1_decide_in_memory_keeps_the_contract() {
    let contract = Contract::load();
    let policy = contract.base_policy().to_string();
    let server = Rc::new(start(
        "contract-decide-memory",
        &[("contract.gate", &policy)],
        &["--poll-ms", "0"],
    ));
    let skipped = contract.run("/v1/decide (memory)", || {
        Box::new(HttpDecide {
            hooks: HttpHooks {
                server: server.clone(),
                redis: None,
                base_policy: policy.clone(),
                changed_policy: false,
            },
            ran: Vec::new(),
        })
    });
    assert_eq!(
        skipped,
        ["lost_state_keeps_every_turn_latched_until_the_next_signal (no lose)"]
    );
}

#[test]
fn v1_decide_over_redis_keeps_the_contract() {
    if !redis_available() {
        return;
    }
    let redis = Redis::start("contract-decide", false);
    let contract = Contract::load();
    let policy = contract.base_policy().to_string();
    let url = redis.url();
    // A server and key prefix per scenario: after `lose`, every turn the store does not hold
    // stays latched for the session TTLs (the `no_signal` reading), and would leak into the
    // next scenario's turns.
    let mut n = 0;
    let skipped = contract.run("/v1/decide (redis)", || {
        n += 1;
        let prefix = format!("contract{n}");
        let server = start(
            &format!("contract-decide-redis-{n}"),
            &[("contract.gate", &policy)],
            &[
                "--poll-ms",
                "0",
                "--state",
                &url,
                "--state-new",
                "--state-prefix",
                &prefix,
            ],
        );
        Box::new(HttpDecide {
            hooks: HttpHooks {
                server: Rc::new(server),
                redis: Some(&redis),
                base_policy: policy.clone(),
                changed_policy: false,
            },
            ran: Vec::new(),
        })
    });
    assert!(skipped.is_empty(), "{skipped:?}");
}
