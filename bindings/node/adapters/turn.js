// One user turn of a session, for executors and framework adapters that see tool calls one
// at a time or one batch at a time.
//
// A policy's latches are write-once-true for a user turn, and `called_before` (and
// `called_within`, by age) reads the calls that succeeded earlier. The engine keeps no
// state; the turn state lives in Rust: a `TurnState` is one session of the turn model every
// toolgate surface shares (`toolgate-turns`: the coding-agent hooks, `/v1/hooks`, the MCP
// proxy, the Python package), and a `Turn` is one turn of it, known by its id. This file
// keeps no turn state of its own: every latch, every recorded call and every kept verdict is
// the session's.
//
// - `new Turn(policy, facts)` is a turn of a session of its own: a new user message starts
//   with no latch set. `new Turn(policy, facts, { state, id })` is turn `id` of `state`:
//   making it signals the id, which starts a turn for an id the session never saw and
//   changes nothing for a known one, so a late or repeated new-turn event never resets the
//   current turn. `turn.next(facts)` is the session's next user turn.
// - A batch (`decide`) is placed into its turn, judged with the executor's facts plus the
//   turn's latches and the session's recorded calls, and its latches recorded, in one call
//   into the addon. A turn's latches only ever grow; `latched` cannot be assigned.
// - `record` dates a call by its own turn, so a late post-event of an earlier turn is that
//   turn's call: a turn old (or more) in the current one.
// - A model message judged whole (`decide(calls, { batch })`) keeps its verdicts, and
//   `batchDecision` answers a call from them only if it is that very call (same message,
//   call id, tool, arguments, turn and policy revision), only once, and only while no latch
//   of the session changed since.
// - A Turn keeps a person's approvals (`approve(digest)`): an ask's digest, stamped with a
//   monotonic clock (`performance.now()`, or `options.clock` in tests). Every judgement
//   carries the live ones in `facts.approvals`; one older than the policy's window
//   (`policy.approvalWindowMs`) is dropped first, and one a decision allowed a call with is
//   removed (single use; `spend: false` judges without using one, for a pre-scan that runs
//   nothing). They belong to this Turn object: a new turn, or a Turn made again for the
//   same id, starts with none, so the call asks again (fails closed). The digest names this
//   turn (the request carries the turn's id), so it allows nothing in another turn.
'use strict';

const { randomUUID } = require('node:crypto');
const { performance } = require('node:perf_hooks');
const { checkPolicy, TurnState, TurnError } = require('../core.js');

/** A turn id no framework sends: for a turn the executor starts without one. */
function newId() {
  return `toolgate-turn:${randomUUID()}`;
}

/** An approval digest as the engine writes it in an ask. */
const DIGEST = /^ap1:[0-9a-f]{64}$/;

function checkDigest(digest) {
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    throw new TypeError(`an approval is an ask's digest (ap1: and 64 hex digits); found ${typeof digest === 'string' ? JSON.stringify(digest) : typeof digest}`);
  }
  return digest;
}

/** The default clock: monotonic milliseconds (never moved by a change of the wall clock). */
const monotonic = () => performance.now();

/** `entry` `by` turns older; an undated entry stays undated (its age is unknown). */
function older(entry, by) {
  return Number.isInteger(entry.turns_ago) ? { ...entry, turns_ago: entry.turns_ago + by } : { ...entry };
}

class Turn {
  #policy;
  #state;
  #id;
  #facts;
  #carried;
  /** The kept approvals: digest -> the clock's time when the person gave it. */
  #approvals = new Map();
  #clock;

  /**
   * @param policy a compiled Policy
   * @param facts the turn's facts (stage, messages, fields, custom facts, and the `latched`
   *   state a previous batch answered, which every judgement ORs in); `called` may hold
   *   earlier turns' calls, which stay in front of the session's own.
   *   `approvals` are taken as approvals a person gave now (kept, timed, used once).
   * @param options `state`: the session (a `TurnState`; default: a session of its own);
   *   `id`: the turn's id in it (the framework's turn id; default: a new one); `clock`: the
   *   monotonic clock approvals are timed by, a function answering milliseconds (default
   *   `performance.now`; tests inject their own); `prompt`: the user's message that started
   *   the turn, sent as `facts.prompt` (`from prompt`), kept only when `id` starts a new
   *   turn.
   */
  constructor(policy, facts = {}, options = {}) {
    this.#policy = checkPolicy(policy);
    const { state, id, clock, prompt } = options || {};
    if (prompt !== undefined && prompt !== null && typeof prompt !== 'string') {
      throw new TypeError('a Turn\'s prompt is the user\'s message, a string');
    }
    if (state !== undefined && state !== null && !(state instanceof TurnState)) {
      throw new TypeError('a Turn\'s state is a toolgate TurnState');
    }
    if (clock !== undefined && clock !== null && typeof clock !== 'function') {
      throw new TypeError('a Turn\'s clock is a function answering milliseconds');
    }
    this.#clock = clock ?? monotonic;
    const { called, approvals, ...rest } = facts || {};
    if (approvals !== undefined) {
      if (!Array.isArray(approvals)) throw new TypeError('facts.approvals is a list of approval digests');
      approvals.forEach(checkDigest);
      for (const digest of approvals) this.approve(digest);
    }
    // Calls passed in are known history; none passed in is known too: nothing was called.
    this.#carried = Array.isArray(called) ? called.map((e) => ({ ...e })) : [];
    this.#facts = rest;
    this.#state = state ?? new TurnState();
    this.#id = id === undefined || id === null ? newId() : String(id);
    const before = this.#state.turns;
    try {
      this.#state.signal(this.#policy, this.#id);
    } catch (e) {
      // The session cannot start another turn: every call of this one is judged (and
      // refused) with that reason, since its id stays unknown.
      if (!(e instanceof TurnError)) throw e;
    }
    // The prompt is the message of the turn this signal started. A known id (a late or
    // repeated signal of an earlier turn) starts none, and its message must not become the
    // current turn's, where it would vouch for values through `from prompt`.
    if (typeof prompt === 'string' && this.#state.turns !== before) this.#state.setPrompt(prompt, this.#id);
    if (rest.latched !== undefined && rest.latched !== false) {
      // Record the executor's latches now, so `latched` shows them before any call. A state
      // the policy refuses (an undeclared latch name) throws at every judgement instead.
      try {
        this.#judge([], undefined);
      } catch {
        // each later judgement fails the same way, and its call is refused
      }
    }
  }

  /** The policy this turn is judged by. */
  get policy() {
    return this.#policy;
  }

  /** The session this turn belongs to. */
  get state() {
    return this.#state;
  }

  /** The turn's id in its session (the framework's turn id, or one made up). */
  get id() {
    return this.#id;
  }

  /**
   * The turn's latch state after the calls judged so far (a boolean, or an object by latch
   * name): what the next call of this turn is judged with. Read-only: only a new turn
   * starts clear.
   */
  get latched() {
    return this.#state.latches(this.#policy, this.#id);
  }

  /**
   * The calls passed in and recorded in this turn so far, as `facts.called` entries; those
   * recorded this turn are undated here, so a list copied into a later turn can never make
   * an old call look recent (`called_within` denies on an undated call). See `history()`.
   */
  get called() {
    return [...this.#carried.map((e) => ({ ...e })), ...this.#state.recorded(this.#policy, this.#id)];
  }

  /**
   * The facts a request of this turn carries now: the executor's facts, the turn's latches
   * and the calls passed in followed by the session's, each dated against the session's
   * current turn (this turn's `turns_ago: 0`).
   */
  currentFacts() {
    const { latched: _executor, ...facts } = this.#facts;
    const current = { ...facts, latched: this.latched, called: [...this.#carried.map((e) => ({ ...e })), ...this.#state.called] };
    const approvals = this.approvals;
    if (approvals.length > 0) current.approvals = approvals;
    return current;
  }

  /**
   * Records that a person approved the call whose ask carried `digest` (a decision's
   * `approval`), timed now by the Turn's clock. The next judgement of exactly that call
   * (same tool, arguments, rule, turn and policy revision) allows it, once, while the
   * approval is younger than the policy's window; approving again restarts its time.
   * Throws TypeError for anything but a digest.
   */
  approve(digest) {
    checkDigest(digest);
    const now = this.#clock();
    if (!Number.isFinite(now)) throw new TypeError('the Turn\'s clock gave no finite time');
    this.#approvals.set(digest, now);
  }

  /**
   * Withdraws the approval of `digest` (the person changed their mind) before it is used.
   * True when there was one to withdraw.
   */
  reject(digest) {
    return this.#approvals.delete(digest);
  }

  /** The approvals a judgement now carries: given, not used, younger than the window. */
  get approvals() {
    return this.#live();
  }

  /** Drops the approvals older than the policy's window; the live digests, oldest first. */
  #live() {
    const now = this.#clock();
    const window = this.#policy.approvalWindowMs;
    for (const [digest, at] of this.#approvals) {
      // A clock that gives no finite time, or that went back, cannot tell an age: dropped.
      const age = now - at;
      if (!Number.isFinite(age) || age < 0 || age >= window) this.#approvals.delete(digest);
    }
    return [...this.#approvals.keys()];
  }

  /**
   * `facts.called` for an executor that carries history into its next user turn itself: every
   * entry one turn older (this turn's calls get `turns_ago: 1`; an undated entry passed in
   * stays undated). A turn made with `next()` needs none of it: the session dates its calls.
   */
  history() {
    const recorded = this.#state.recorded(this.#policy, this.#id);
    return [...this.#carried.map((e) => older(e, 1)), ...recorded.map((e) => ({ ...e, turns_ago: 1 }))];
  }

  /**
   * The session's next user turn (the user's next message): a new turn of the same state,
   * with `facts` (default: this turn's facts without `latched`; earlier calls come from the
   * session, dated).
   */
  next(facts, id) {
    const { latched: _latched, ...own } = this.#facts;
    return new Turn(this.#policy, facts ?? own, { state: this.#state, id });
  }

  /**
   * Judges `calls` ([{id, tool, args}]) together, so a latch set by any of them blocks the
   * writes of all of them whatever their order, and records the latches into the turn.
   * Returns the decisions in call order. With `options.batch` (the framework's id of the
   * model message) the verdicts are kept for `batchDecision`; the same message judged again
   * while they stand is not judged twice. The live approvals go in `facts.approvals`; each
   * one a decision allowed a call with is used up, and what the allowed calls consume is
   * added to the budget counts, unless `options.spend` is false (a judgement no call is run
   * on, such as a pre-scan: the call that runs is judged again, and counted then).
   * Throws RequestError for calls that cannot be judged, TurnError for a turn that cannot be.
   */
  decide(calls, options = {}) {
    const { batch, spend = true } = options || {};
    const { decisions } = this.#judge(calls, batch, spend !== false);
    if (spend !== false) {
      for (const d of decisions) if (d.allow && typeof d.approval === 'string') this.#approvals.delete(d.approval);
    }
    return decisions;
  }

  /** Judges one call now, with the state this turn has so far. */
  decideOne(call) {
    return this.decide([call])[0];
  }

  /**
   * The decision the model message `batch` (default: the one the session judged last) holds
   * for this call, if it was judged in this turn with this call id, tool and arguments (an
   * object, or the model's JSON text, read strictly), was not given already, and no latch
   * changed since; else null: judge the call alone.
   */
  batchDecision(callId, tool, args, batch) {
    try {
      return this.#state.decision(this.#policy, callId, tool, args, this.#id, batch);
    } catch {
      return null; // no kept verdict: the call is judged alone
    }
  }

  /**
   * Records that a dispatched call of this turn finished (`ok` false when the tool failed),
   * for `called_before` and `called_within` rules; dated by this turn, however late. With
   * `callId` and `output` (what the tool answered, any JSON value), the output is kept for the
   * turn's later provenance checks (`from ingest`, a latch's `blocks tainted`): until every
   * allowed call whose output the policy reads as untrusted has it recorded, those checks deny.
   */
  record(tool, ok, { callId, output } = {}) {
    this.#state.recordCall(tool, Boolean(ok), this.#id);
    if (output !== undefined) {
      this.#state.recordOutput(this.#policy, callId, tool, output, this.#id);
    }
  }

  #judge(calls, batch, spend = true) {
    const facts = { ...this.#facts, called: this.#carried };
    const approvals = this.#live();
    if (approvals.length > 0) facts.approvals = approvals;
    // The turn's id in the request binds every ask's digest to this turn.
    const request = { facts, calls, turn: this.#id };
    return this.#state.judge(this.#policy, request, this.#id, batch, { spend });
  }
}

module.exports = { Turn };
