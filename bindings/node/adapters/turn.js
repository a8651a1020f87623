// The state of one user turn, for executors and framework adapters that see tool calls
// one at a time or one batch at a time.
//
// A policy's latches are write-once-true for a user turn, and `called_before` (and
// `called_within`, by age) reads the calls that succeeded earlier. The engine keeps no
// state: the executor carries it from batch to batch. A Turn does that carrying: create one per user message (a new message
// resets every latch), judge every batch or call of that turn through it, and record each
// dispatched call's outcome.
'use strict';

/** Copies `facts` without `latched` and `called`, which the Turn owns. */
function baseFacts(facts) {
  const { latched: _l, called: _c, ...rest } = facts || {};
  return rest;
}

class Turn {
  /**
   * @param policy a compiled Policy
   * @param facts the turn's facts (stage, messages, fields, custom facts); `called` may hold
   *   earlier turns' calls, which stay in front of this turn's.
   */
  constructor(policy, facts = {}) {
    this.policy = policy;
    this.facts = baseFacts(facts);
    this.latched = false;
    this.called = Array.isArray(facts && facts.called) ? [...facts.called] : [];
    // The first `carried` entries came with the facts; the rest are recorded this turn.
    this.carried = this.called.length;
    // Decisions already made for call ids (by a batch judgment), consulted per call.
    this.decisions = new Map();
  }

  /**
   * The facts a request of this turn carries now. Calls recorded this turn are dated this
   * turn (`turns_ago: 0`) here only: `this.called` keeps them undated, so a list copied into
   * a later turn can never make an old call look recent (`called_within` denies on an
   * undated call). Carry history forward with `history()`.
   */
  currentFacts() {
    const called = this.called.map((e, i) => (i >= this.carried ? { ...e, turns_ago: 0 } : e));
    return { ...this.facts, latched: this.latched, called };
  }

  /**
   * `facts.called` for the next user turn: every entry one turn older (this turn's calls get
   * `turns_ago: 1`; an undated entry passed in stays undated, its age unknown).
   */
  history() {
    return this.called.map((e, i) => {
      if (i >= this.carried) return { ...e, turns_ago: 1 };
      return Number.isInteger(e.turns_ago) ? { ...e, turns_ago: e.turns_ago + 1 } : { ...e };
    });
  }

  /**
   * Judges `calls` ([{id, tool, args}]) together, so a latch set by any of them blocks the
   * writes of all of them whatever their order. Carries the latch state forward and
   * remembers each decision by call id. Returns the decisions in call order.
   */
  decide(calls) {
    const response = this.policy.decide({ facts: this.currentFacts(), calls });
    this.latched = response.latched;
    for (const d of response.decisions) {
      const earlier = this.decisions.get(d.id);
      // Two judgments of one call id: the stricter one stands.
      if (!earlier || earlier.allow) this.decisions.set(d.id, d);
    }
    return response.decisions;
  }

  /** Judges one call now, with the state this turn has so far. */
  decideOne(call) {
    return this.decide([call])[0];
  }

  /**
   * Records that a dispatched call finished this turn: `ok` false when the tool failed. The
   * turn's requests date it this turn, so `called_within` rules can see it.
   */
  record(tool, ok) {
    this.called.push({ tool, ok: Boolean(ok) });
  }
}

module.exports = { Turn };
