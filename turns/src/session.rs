//! The turn state of one session on a surface that sees one call at a time: `toolgate hook`
//! (a process per event, state in a file), `/v1/hooks` (state in memory or Redis) and the
//! MCP proxy (state per connection).
//!
//! The contract, the same on every surface:
//!
//! - **Turn ids are remembered.** A session keeps the ids of its [`KEPT_TURNS`] most recent
//!   turns, each with its own latches. A call of an older kept turn is judged with that
//!   turn's latches, never the current one's. A latched turn pushed out leaves a fingerprint
//!   of its ids; a late call of it is judged with every latch set.
//! - **What starts a turn** is the agent's explicit new-turn signal ([`SessionTurns::signal`]:
//!   a user prompt event), or, where the agent's turn ids *are* its signal (the MCP proxy,
//!   [`NewIds::StartTurn`]), an id never seen before. On the hook surfaces
//!   ([`NewIds::NeedSignal`]) an id merely different from the last one never starts a turn:
//!   the first unseen id after a signal names the turn the signal started, and any other
//!   unseen id is judged with every latch set.
//! - **No late event of an older turn resets the current one.** A repeated signal of a known
//!   turn changes nothing; a late post-tool event is dated by its own turn.
//! - **The policy travels with the state** ([`PolicyStamp`]): the latch names of the policies
//!   that judged the current turn. A set latch the judging policy no longer declares (a
//!   reload, a policy file caught half-way through a rewrite) makes every call of the turn a
//!   denial ([`TurnError::PolicyChanged`]) until the next signal.
//! - **Unreadable state** ([`SessionTurns::recovered`]) is one turn with every latch set and
//!   no known id, so every call is judged latched until the user's next explicit signal.
//!
//! Ids are kept as 64-bit fingerprints (the first 8 bytes of their SHA-256), so an id of any
//! length costs 8 bytes and a state file never holds agent text.

use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::VecDeque;
use toolgate_engine::{CalledTool, LatchState, Latched, Policy};

/// Turns per session whose exact state is kept.
pub const KEPT_TURNS: usize = 16;
/// Ids one turn may be known by (its own, and ones an agent sent for it before a signal).
pub const MAX_TURN_IDS: usize = 8;
/// Most fingerprints of pushed-out latched turns one session keeps; past it a new turn is
/// refused rather than a latched one forgotten.
pub const MAX_FORGOTTEN: usize = 4096;
/// How many earlier calls are kept for `called_before` (the oldest are dropped first).
pub const MAX_CALLED: usize = 1000;

/// The fingerprint of an agent's turn id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnKey(u64);

impl TurnKey {
    /// The fingerprint of `id`.
    pub fn of(id: &str) -> TurnKey {
        let digest = sha2::Sha256::digest(id.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        TurnKey(u64::from_be_bytes(first))
    }

    /// The fingerprint's value.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// How a surface reads a turn id it has never seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewIds {
    /// The id is the agent's signal of a new turn (the MCP proxy's `io.toolgate/turn`).
    StartTurn,
    /// Only [`SessionTurns::signal`] starts a turn; an unseen id names the turn a signal just
    /// started, or is judged with every latch set (the coding-agent hooks).
    NeedSignal,
}

/// The latch names of the policies that judged the current turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyStamp {
    /// The policy module.
    pub module: String,
    /// The revision that judged last.
    pub revision: String,
    /// Every latch name a policy that judged this turn declared (sorted).
    pub latches: Vec<String>,
}

impl PolicyStamp {
    fn of(policy: &Policy) -> PolicyStamp {
        let mut latches: Vec<String> = policy.latches().map(str::to_string).collect();
        latches.sort();
        PolicyStamp {
            module: policy.module().to_string(),
            revision: policy.revision().to_string(),
            latches,
        }
    }

    /// Adds `policy`'s latch names: a latch stays remembered for the rest of the turn.
    fn absorb(&mut self, policy: &Policy) {
        for name in policy.latches() {
            if let Err(at) = self.latches.binary_search_by(|n| n.as_str().cmp(name)) {
                self.latches.insert(at, name.to_string());
            }
        }
        self.module = policy.module().to_string();
        self.revision = policy.revision().to_string();
    }
}

/// One kept turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Its number in the session: 0 before the agent signalled any turn.
    pub number: u64,
    /// The ids it is known by.
    pub ids: Vec<TurnKey>,
    /// Its latches (`true`: every latch, whatever the policy declares).
    pub latched: Latched,
}

/// An earlier call of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Called {
    /// The tool.
    pub tool: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// The turn it ran in; `None` when unknown (a late event of a turn no longer kept, or a
    /// call before any signal), so `called_within` never counts it as recent.
    pub turn: Option<u64>,
}

/// Where a call was placed, for the judge and for logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// The current turn.
    Current,
    /// An earlier turn the session still keeps.
    Earlier,
    /// A latched turn the session no longer keeps: every latch is set.
    Forgotten,
    /// An id the session cannot place (no signal announced it): every latch is set.
    Unknown,
}

/// The turn a call belongs to and the latches to judge it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Where it was placed.
    pub placement: Placement,
    /// The kept turn the judgement's latches are recorded into, if any.
    pub turn: Option<u64>,
    /// The fingerprint of an id the session could not place: if the judgement latches, the
    /// id is remembered as a latched turn, so no later signal can adopt it unlatched.
    pub unplaced: Option<TurnKey>,
    /// The latches, in the judging policy's names.
    pub latched: Latched,
}

/// Why a call cannot be judged; the surface denies it with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// A set latch of this turn is not declared by the judging policy.
    #[error("the policy changed under a latched turn: latch `{latch}` is set in this turn but the policy judging it (`{module}` revision {revision}) does not declare it, so no call of this turn can be judged until the user's next message")]
    PolicyChanged {
        /// The latch.
        latch: String,
        /// The judging policy's module.
        module: String,
        /// Its revision.
        revision: String,
    },
    /// The session has pushed out [`MAX_FORGOTTEN`] latched turns.
    #[error("this session has {MAX_FORGOTTEN} earlier latched turns, the most one session may hold; start a new session")]
    TooManyTurns,
    /// One turn was sent under more than [`MAX_TURN_IDS`] ids.
    #[error("this turn was sent under more than {MAX_TURN_IDS} ids; it cannot be told apart from another turn")]
    TooManyIds,
}

/// The turn state of one session (see the module docs for the contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionTurns {
    /// The policies that judged the current turn; `None` before any judgement.
    policy: Option<PolicyStamp>,
    /// The number of the most recent turn.
    turns: u64,
    /// The kept turns, oldest first; the last is the current one. Never empty.
    recent: VecDeque<Turn>,
    /// Fingerprints of latched turns no longer kept.
    forgotten: Vec<TurnKey>,
    /// The current turn was started by a signal that named no id (or is the session's first
    /// turn): the first unseen id names it.
    awaiting_id: bool,
    /// The state could not be read; every latch is set until the next signal.
    recovered: bool,
    /// Earlier calls, oldest first.
    called: Vec<Called>,
    /// The current turn's tool outputs, for `facts.outputs` (kept in memory only: see
    /// `outputs.rs`). Absent from a state written before they existed: a fresh turn 0, which
    /// the first signal replaces.
    #[serde(default)]
    outputs: crate::outputs::TurnOutputs,
}

impl Default for SessionTurns {
    fn default() -> Self {
        SessionTurns {
            policy: None,
            turns: 0,
            recent: VecDeque::from([Turn {
                number: 0,
                ids: Vec::new(),
                latched: Latched::Flag(false),
            }]),
            forgotten: Vec::new(),
            awaiting_id: true,
            recovered: false,
            called: Vec::new(),
            outputs: crate::outputs::TurnOutputs::default(),
        }
    }
}

impl SessionTurns {
    /// The state that stands for one that could not be read: every latch set, no id known,
    /// until the next signal.
    pub fn recovered() -> Self {
        let mut s = SessionTurns {
            recovered: true,
            awaiting_id: false,
            outputs: crate::outputs::TurnOutputs::lost(0),
            ..SessionTurns::default()
        };
        if let Some(t) = s.recent.back_mut() {
            t.latched = Latched::Flag(true);
        }
        s
    }

    /// True when this state stands for one that could not be read.
    pub fn is_recovered(&self) -> bool {
        self.recovered
    }

    /// The number of the most recent turn (0 before any signal).
    pub fn turns(&self) -> u64 {
        self.turns
    }

    /// The current turn's latches as stored.
    pub fn current_latched(&self) -> &Latched {
        match self.recent.back() {
            Some(t) => &t.latched,
            None => &Latched::Flag(true),
        }
    }

    /// Whether any kept turn or fingerprint holds a latch (such a session is never dropped
    /// to make room).
    pub fn holds_latch(&self) -> bool {
        !self.forgotten.is_empty() || self.recent.iter().any(|t| t.latched.any())
    }

    /// The earlier calls, oldest first.
    pub fn called(&self) -> &[Called] {
        &self.called
    }

    /// The agent's explicit new-turn signal (a user prompt), with the turn's id when the
    /// agent sends one. A signal naming a turn the session already knows changes nothing: it
    /// is a late or repeated event, and must not reset the current turn.
    pub fn signal(&mut self, policy: &Policy, id: Option<&str>) -> Result<(), TurnError> {
        let key = id.map(TurnKey::of);
        if let Some(k) = key {
            if self.find(k).is_some() || self.forgotten.contains(&k) {
                return Ok(());
            }
        }
        self.push_turn(key)?;
        self.awaiting_id = key.is_none();
        self.recovered = false;
        self.policy = Some(PolicyStamp::of(policy));
        Ok(())
    }

    /// Places a call sent under `id` (or none) into its turn, and gives the latches to judge
    /// it with in `policy`'s names. Under [`NewIds::StartTurn`] an unseen id starts a turn.
    pub fn place(
        &mut self,
        policy: &Policy,
        id: Option<&str>,
        new_ids: NewIds,
    ) -> Result<Placed, TurnError> {
        let (placement, turn) = self.place_raw(id, new_ids)?;
        let stamp = self
            .policy
            .get_or_insert_with(|| PolicyStamp::of(policy))
            .clone();
        let stored = match placement {
            Placement::Current | Placement::Earlier => turn.and_then(|n| self.turn(n)),
            Placement::Forgotten | Placement::Unknown => None,
        };
        let latched = match stored {
            Some(t) => in_policy(policy, &stamp, &t.latched)?,
            None => in_policy(policy, &stamp, &Latched::Flag(true))?,
        };
        if let Some(stamp) = self.policy.as_mut() {
            stamp.absorb(policy);
        }
        let unplaced = match placement {
            Placement::Unknown => id.map(TurnKey::of),
            _ => None,
        };
        Ok(Placed {
            placement,
            turn,
            latched,
            unplaced,
        })
    }

    /// Where a call under `id` goes, and the turn its latches are recorded into. A call the
    /// session cannot place records into the current turn: it may belong to it.
    fn place_raw(
        &mut self,
        id: Option<&str>,
        new_ids: NewIds,
    ) -> Result<(Placement, Option<u64>), TurnError> {
        let current = self.turns;
        let Some(id) = id else {
            return Ok((Placement::Current, Some(current)));
        };
        let key = TurnKey::of(id);
        if let Some(n) = self.find(key) {
            let placement = if n == current {
                Placement::Current
            } else {
                Placement::Earlier
            };
            return Ok((placement, Some(n)));
        }
        if self.forgotten.contains(&key) {
            return Ok((Placement::Forgotten, None));
        }
        if self.awaiting_id && !self.recovered {
            self.add_id(key)?;
            self.awaiting_id = false;
            return Ok((Placement::Current, Some(current)));
        }
        match new_ids {
            NewIds::StartTurn if !self.recovered => {
                self.push_turn(Some(key))?;
                self.awaiting_id = false;
                Ok((Placement::Current, Some(self.turns)))
            }
            _ => Ok((Placement::Unknown, Some(current))),
        }
    }

    /// Records the latches a judgement of a call of `tool` reported (`state`) into the turn
    /// it placed the call in. Latches are only ever added. A call judged with every latch
    /// set because its turn was unknown records only the latches `tool` itself sets: the
    /// carried-in "every latch" was a guess, not something the turn did.
    pub fn latch(&mut self, policy: &Policy, placed: &Placed, tool: &str, state: &LatchState) {
        let own;
        let state = match placed.placement {
            Placement::Current | Placement::Earlier => state,
            Placement::Forgotten | Placement::Unknown => {
                own = Latched::ByName(
                    policy
                        .latches_set_by(tool)
                        .map(|n| (n.into(), true))
                        .collect(),
                );
                &own
            }
        };
        if !state.any() {
            return;
        }
        if let Some(k) = placed.unplaced {
            self.remember_forgotten([k]);
        }
        let Some(n) = placed.turn else { return };
        if let Some(t) = self.recent.iter_mut().find(|t| t.number == n) {
            t.latched = t.latched.or(state);
        }
    }

    /// Remembers that `tool` ran, and whether it succeeded; `id` is the turn id its event
    /// carried. A call of a turn the session cannot place is kept undated.
    pub fn record_call(&mut self, tool: &str, ok: bool, id: Option<&str>) {
        let turn = match id {
            None => Some(self.turns),
            Some(id) => self.find(TurnKey::of(id)),
        }
        .filter(|n| *n > 0);
        self.called.push(Called {
            tool: tool.to_string(),
            ok,
            turn,
        });
        if self.called.len() > MAX_CALLED {
            let excess = self.called.len() - MAX_CALLED;
            self.called.drain(..excess);
        }
    }

    /// An allowed call (`call_id` of `tool` with `args`) placed by `placed` whose output
    /// `policy` indexes as untrusted: until its output is recorded
    /// ([`SessionTurns::record_output`] with the same call id and tool), the turn's outputs
    /// are incomplete. The same call judged again while awaited is awaited once. Does nothing
    /// for a call of another than the current turn (that turn is never given outputs).
    pub fn expect_output(
        &mut self,
        policy: &Policy,
        placed: &Placed,
        call_id: &str,
        tool: &str,
        args: &serde_json::Value,
    ) {
        if placed.turn == Some(self.turns) && policy.indexes_as_untrusted(tool) {
            self.outputs
                .expect(crate::outputs::AwaitedCall::new(call_id, tool, args));
        }
    }

    /// Records the output of call `call_id` of `tool`, which ran in the turn of event id
    /// `id` (`None`: the current one). An output of an earlier turn is not kept: that turn
    /// is never given outputs.
    pub fn record_output(
        &mut self,
        policy: &Policy,
        call_id: &str,
        tool: &str,
        output: serde_json::Value,
        id: Option<&str>,
    ) {
        let turn = match id {
            None => Some(self.turns),
            Some(id) => self.find(TurnKey::of(id)),
        };
        if turn == Some(self.turns) && self.outputs.turn() == self.turns {
            self.outputs
                .record(call_id, tool, output, policy.indexes_as_untrusted(tool));
        }
    }

    /// Keeps the user's message of the current turn, for `facts.prompt` (memory only, like
    /// the outputs).
    pub fn set_prompt(&mut self, prompt: &str) {
        self.set_prompt_of(prompt, None);
    }

    /// Keeps `prompt` as the message of the turn of event id `id` (`None`: the current
    /// turn), for `facts.prompt`, only if that turn is the current one; true when kept. The
    /// message of an earlier turn, or of an id the session cannot place, is refused: kept,
    /// it would vouch for the current turn's values through `from prompt`. Never starts a
    /// turn, and never names one (an unseen id stays unseen).
    pub fn set_prompt_of(&mut self, prompt: &str, id: Option<&str>) -> bool {
        let turn = match id {
            None => Some(self.turns),
            Some(id) => self.find(TurnKey::of(id)),
        };
        if turn != Some(self.turns) || self.outputs.turn() != self.turns {
            return false;
        }
        self.outputs.set_prompt(prompt.to_string());
        true
    }

    /// The `facts.prompt` to judge a call placed by `placed` with: the current turn's
    /// message, when known.
    pub fn prompt_fact(&self, placed: &Placed) -> Option<String> {
        let current = placed.placement == Placement::Current
            && placed.turn == Some(self.turns)
            && self.outputs.turn() == self.turns;
        current
            .then(|| self.outputs.prompt().map(str::to_string))
            .flatten()
    }

    /// The `facts.outputs` to judge a call placed by `placed` with: the current turn's
    /// outputs when they are complete; `None` (a check that reads them denies) for a call of
    /// another turn, unreadable state, or outputs not all recorded.
    pub fn outputs_fact(&self, placed: &Placed) -> Option<serde_json::Value> {
        let current = placed.placement == Placement::Current
            && placed.turn == Some(self.turns)
            && self.outputs.turn() == self.turns
            && !self.recovered;
        if current {
            self.outputs.fact()
        } else {
            None
        }
    }

    /// The earlier calls as a request's `called` fact, each dated in turns before the
    /// current one.
    pub fn called_facts(&self) -> Vec<CalledTool> {
        self.called
            .iter()
            .map(|c| CalledTool {
                tool: c.tool.clone(),
                ok: c.ok,
                turns_ago: c.turn.map(|t| self.turns.saturating_sub(t)),
            })
            .collect()
    }

    /// The fingerprints of every latched turn: those already forgotten, and the ids of the
    /// kept ones that hold a latch (what a session that ends leaves behind).
    pub fn fingerprints(&self) -> Vec<TurnKey> {
        let mut keys = self.forgotten.clone();
        for t in &self.recent {
            if t.latched.any() {
                keys.extend(t.ids.iter().copied());
            }
        }
        keys
    }

    /// Marks every id in `keys` as a forgotten latched turn (state carried over from an
    /// ended session). Past [`MAX_FORGOTTEN`] the oldest fingerprint goes: the bound is the
    /// horizon of what a session remembers.
    pub fn remember_forgotten(&mut self, keys: impl IntoIterator<Item = TurnKey>) {
        for k in keys {
            if !self.forgotten.contains(&k) {
                if self.forgotten.len() >= MAX_FORGOTTEN {
                    self.forgotten.remove(0);
                }
                self.forgotten.push(k);
            }
        }
    }

    /// Sets every latch of the current turn (a session that inherits an expired latched
    /// session of the same client, or whose lock was poisoned).
    pub fn latch_current(&mut self) {
        if let Some(t) = self.recent.back_mut() {
            t.latched = Latched::Flag(true);
        }
    }

    /// Checks what a state read back from storage must hold; `false` marks it unreadable.
    pub fn is_consistent(&self) -> bool {
        let numbered = self
            .recent
            .iter()
            .zip(self.recent.iter().skip(1))
            .all(|(a, b)| a.number < b.number);
        !self.recent.is_empty()
            && self.recent.len() <= KEPT_TURNS
            && numbered
            && self.recent.back().is_some_and(|t| t.number == self.turns)
            && self.recent.iter().all(|t| t.ids.len() <= MAX_TURN_IDS)
            && self.forgotten.len() <= MAX_FORGOTTEN
            && self.called.len() <= MAX_CALLED
            // A call dated after the last turn, or in turn 0, is never written by
            // `record_call`: the state is corrupt, not a recent call.
            && self
                .called
                .iter()
                .all(|c| c.turn.is_none_or(|t| t > 0 && t <= self.turns))
    }

    fn find(&self, key: TurnKey) -> Option<u64> {
        self.recent
            .iter()
            .find(|t| t.ids.contains(&key))
            .map(|t| t.number)
    }

    fn turn(&self, number: u64) -> Option<&Turn> {
        self.recent.iter().find(|t| t.number == number)
    }

    fn add_id(&mut self, key: TurnKey) -> Result<(), TurnError> {
        let Some(t) = self.recent.back_mut() else {
            return Err(TurnError::TooManyIds);
        };
        if t.ids.len() >= MAX_TURN_IDS {
            return Err(TurnError::TooManyIds);
        }
        t.ids.push(key);
        Ok(())
    }

    fn push_turn(&mut self, key: Option<TurnKey>) -> Result<(), TurnError> {
        if self.recent.len() >= KEPT_TURNS {
            let out_latched = self.recent.front().is_some_and(|t| t.latched.any());
            let out_ids = self.recent.front().map_or(0, |t| t.ids.len());
            if out_latched {
                if self.forgotten.len() + out_ids > MAX_FORGOTTEN {
                    return Err(TurnError::TooManyTurns);
                }
                if let Some(out) = self.recent.pop_front() {
                    self.forgotten.extend(out.ids);
                }
            } else {
                self.recent.pop_front();
            }
        }
        self.turns = self.turns.saturating_add(1);
        self.outputs = crate::outputs::TurnOutputs::starting(self.turns);
        self.recent.push_back(Turn {
            number: self.turns,
            ids: key.into_iter().collect(),
            latched: Latched::Flag(false),
        });
        Ok(())
    }
}

/// `stored` in `policy`'s names. A set latch the policy does not declare, or a latch the
/// turn's earlier policies declared and this one does not while the turn is latched, is a
/// changed policy: the call cannot be judged.
fn in_policy(policy: &Policy, stamp: &PolicyStamp, stored: &Latched) -> Result<Latched, TurnError> {
    let changed = |latch: &str| TurnError::PolicyChanged {
        latch: latch.to_string(),
        module: policy.module().to_string(),
        revision: policy.revision().to_string(),
    };
    let declared = |name: &str| policy.latches().any(|l| l == name);
    if stored.any() {
        if let Some(gone) = stamp.latches.iter().find(|n| !declared(n)) {
            return Err(changed(gone));
        }
    }
    match stored {
        Latched::Flag(false) => Ok(Latched::Flag(false)),
        Latched::Flag(true) => Ok(Latched::Flag(true)),
        Latched::ByName(m) => {
            if let Some((gone, _)) = m.iter().find(|(n, set)| **set && !declared(n)) {
                return Err(changed(gone));
            }
            Ok(Latched::ByName(
                m.iter()
                    .filter(|(_, set)| **set)
                    .map(|(n, s)| (n.clone(), *s))
                    .collect(),
            ))
        }
    }
}

#[cfg(test)]
mod tests;
