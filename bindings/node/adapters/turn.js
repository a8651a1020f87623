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
'use strict';

const { randomUUID } = require('node:crypto');
const { checkPolicy, TurnState, TurnError } = require('../core.js');

/** A turn id no framework sends: for a turn the executor starts without one. */
function newId() {
  return `toolgate-turn:${randomUUID()}`;
}

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

  /**
   * @param policy a compiled Policy
   * @param facts the turn's facts (stage, messages, fields, custom facts, and the `latched`
   *   state a previous batch answered, which every judgement ORs in); `called` may hold
   *   earlier turns' calls, which stay in front of the session's own.
   * @param options `state`: the session (a `TurnState`; default: a session of its own);
   *   `id`: the turn's id in it (the framework's turn id; default: a new one).
   */
  constructor(policy, facts = {}, options = {}) {
    this.#policy = checkPolicy(policy);
    const { state, id } = options || {};
    if (state !== undefined && state !== null && !(state instanceof TurnState)) {
      throw new TypeError('a Turn\'s state is a toolgate TurnState');
    }
    const { called, ...rest } = facts || {};
    // Calls passed in are known history; none passed in is known too: nothing was called.
    this.#carried = Array.isArray(called) ? called.map((e) => ({ ...e })) : [];
    this.#facts = rest;
    this.#state = state ?? new TurnState();
    this.#id = id === undefined || id === null ? newId() : String(id);
    try {
      this.#state.signal(this.#policy, this.#id);
    } catch (e) {
      // The session cannot start another turn: every call of this one is judged (and
      // refused) with that reason, since its id stays unknown.
      if (!(e instanceof TurnError)) throw e;
    }
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
    return { ...facts, latched: this.latched, called: [...this.#carried.map((e) => ({ ...e })), ...this.#state.called] };
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
   * while they stand is not judged twice. Throws RequestError for calls that cannot be
   * judged, TurnError for a turn that cannot be.
   */
  decide(calls, options = {}) {
    return this.#judge(calls, options && options.batch).decisions;
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
   * for `called_before` and `called_within` rules; dated by this turn, however late.
   */
  record(tool, ok) {
    this.#state.recordCall(tool, Boolean(ok), this.#id);
  }

  #judge(calls, batch) {
    const request = { facts: { ...this.#facts, called: this.#carried }, calls };
    return this.#state.judge(this.#policy, request, this.#id, batch);
  }
}

module.exports = { Turn };
