// toolgate for the Vercel AI SDK (`ai`, v6): judge every tool call before its `execute` runs.
//
// Two pieces, used together:
//
// - `guardTools(turn, tools)` wraps each tool's `execute`. A denied call never runs: the
//   wrapper throws a `ToolDenied` whose message is the refusal, which the SDK turns into the
//   `tool-error` result the model reads on its next step. An allowed call runs, and its
//   outcome is recorded in the turn (for `called_before`).
// - `toolgateMiddleware(turn)`, for `wrapLanguageModel`, sees each model step's whole batch
//   of tool calls before the SDK executes any of them, and judges the batch together: a
//   latch set by one call blocks the writes of all of them, whatever their order. For a
//   stream it holds the step's tool-call parts until the step finishes.
//
// Without the middleware, each call is judged alone when the SDK executes it, with the
// turn's state so far: a latch set by a call judged earlier in the turn blocks it, but a
// sibling of the same step judged later does not (the SDK runs a step's calls in parallel,
// in no order the policy can rely on). With the middleware, every call is judged twice, in
// its batch and again with the arguments the SDK actually hands to `execute`, and runs only
// if both allow it. The batch's verdict is the one the turn's session kept for that step
// (`turn.batchDecision`): it answers only the very call it was judged as (same call id, tool
// and arguments), once, and never after a latch changed; so a later step that reuses a call
// id (`call_0` in every message) is never answered by an earlier step's verdict.
//
// A call whose input is not a JSON object is judged in its step with no arguments, so it
// still counts in the step's latch pre-scan (a latch is set by a tool, whatever its
// arguments); the SDK refuses its input before `execute`, and if it did not, `execute`
// would judge the input it was handed, which the policy refuses.
//
// An ask (a call the policy lets run only once a person approves it) is the SDK's own tool
// approval flow (AI SDK 6): each guarded tool gets a `needsApproval` that judges the call and
// answers true for an ask, so the SDK stops with a `tool-approval-request` part instead of
// running it. The person's answer goes back as a `tool-approval-response` in the next call's
// messages (`answerApprovals` builds it with an approver callback, or the app's own UI does).
// - Yes: the SDK re-checks `needsApproval` (still true: the approval is not used yet) and
//   calls `execute`, which records the approval in the Turn (`turn.approve`; the helper
//   already did, timed when the person answered) and judges the call again: that very call,
//   while the approval is live, is allowed and uses it up. A later identical call asks again.
// - No: the SDK does not run the tool; the model reads `execution-denied` with the refusal.
// The ask each call got is kept per Turn (by tool call id), so the continuation must be
// judged by the same Turn object; another one knows of no ask and the call is refused with
// the ask's reason (fails closed). A live approval the Turn already holds lets its call run
// without asking. A step's pre-scan and `needsApproval` judge without using an approval;
// only the judgement in `execute`, right before the tool runs, uses one.
//
// No import of `ai`: the caller passes its tools and wraps its model; this file only reads
// the documented shapes.
'use strict';

const { randomUUID } = require('node:crypto');

/** Thrown from a wrapped `execute` for a denied call; the SDK reports it to the model. */
class ToolDenied extends Error {
  constructor(decision) {
    super(decision.reason || `tool call ${decision.tool} refused by policy`);
    this.name = 'ToolDenied';
    this.decision = decision;
  }
}

function parseInput(text) {
  if (typeof text !== 'string') return text ?? {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined; // not JSON: the SDK refuses it too
  }
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Judges one step's client-executed tool calls (provider-executed ones are not ours to stop)
 * as one model message, whose verdicts the turn's session keeps for `execute`.
 */
function judgeParts(turn, parts) {
  const calls = parts
    .filter((p) => p.type === 'tool-call' && !p.providerExecuted)
    .map((p) => {
      const args = parseInput(p.input);
      return { id: p.toolCallId, tool: p.toolName, args: isObject(args) ? args : {} };
    });
  if (calls.length === 0) return;
  try {
    // A pre-scan: nothing runs on it, so it uses no approval (`execute` judges again).
    turn.decide(calls, { batch: `ai-sdk-step:${randomUUID()}`, spend: false });
  } catch {
    // A step that cannot be judged (a call id given twice, a turn the policy can no longer
    // judge) keeps no verdict. Its latches are still recorded from its tools alone (a latch
    // is set by a tool, whatever its id and arguments), so no sibling judged later at
    // `execute` escapes them; each `execute` then judges its call alone.
    try {
      turn.decide(calls.map((c, i) => ({ id: `step-${i}`, tool: c.tool, args: {} })), { spend: false });
    } catch {
      // judged alone at `execute`, and refused there for the same reason
    }
  }
}

/** A `LanguageModelV3Middleware` that judges each step's tool calls as one batch. */
function toolgateMiddleware(turn) {
  return {
    specificationVersion: 'v3',
    async wrapGenerate({ doGenerate }) {
      const result = await doGenerate();
      judgeParts(turn, result.content || []);
      return result;
    },
    async wrapStream({ doStream }) {
      const { stream, ...rest } = await doStream();
      const held = [];
      const release = (controller) => {
        judgeParts(turn, held);
        for (const part of held.splice(0)) controller.enqueue(part);
      };
      const batched = stream.pipeThrough(
        new TransformStream({
          transform(part, controller) {
            if (part.type === 'tool-call') held.push(part);
            else if (part.type === 'finish') {
              release(controller);
              controller.enqueue(part);
            } else controller.enqueue(part);
          },
          flush(controller) {
            release(controller);
          },
        }),
      );
      return { stream: batched, ...rest };
    },
  };
}

/** Runs `run` and records in `turn` whether the tool succeeded and, when it did, its output
 * (the value, or a streaming tool's last yielded one) for the turn's provenance checks, for a
 * value, a promise or an async iterable alike (the SDK's streaming tools yield preliminary
 * results). */
function recorded(turn, name, run, callId) {
  const done = (ok, output) => {
    if (!ok || output === undefined) return turn.record(name, ok);
    try {
      turn.record(name, true, { callId, output });
    } catch {
      // The call is recorded; an output that is not JSON data is not, so the turn's outputs
      // stay incomplete and a check that reads them denies.
    }
  };
  let result;
  try {
    result = run();
  } catch (e) {
    done(false);
    throw e;
  }
  if (result != null && typeof result[Symbol.asyncIterator] === 'function') {
    return (async function* () {
      let ok = false;
      let last;
      try {
        for await (const value of result) {
          last = value;
          yield value;
        }
        ok = true;
      } finally {
        done(ok, last);
      }
    })();
  }
  return Promise.resolve(result).then(
    (output) => {
      done(true, output);
      return output;
    },
    (error) => {
      done(false);
      throw error;
    },
  );
}

/** The asks the SDK's approval requests stand for, per Turn: tool call id -> ask. */
const asked = new WeakMap();

function asksOf(turn) {
  let asks = asked.get(turn);
  if (!asks) asked.set(turn, (asks = new Map()));
  return asks;
}

/**
 * The ask decision (with its `reason`, `rule` and `approval` digest) the SDK's approval
 * request for tool call `toolCallId` stands for, while it waits for an answer; else null.
 */
function askOf(turn, toolCallId) {
  const ask = asked.get(turn)?.get(toolCallId);
  return ask ? { ...ask.decision } : null;
}

/**
 * Whether the last message (the SDK collects approvals from it alone) approves the SDK's
 * approval request for `toolCallId`.
 */
function approvedInMessages(messages, toolCallId) {
  const last = Array.isArray(messages) ? messages[messages.length - 1] : undefined;
  if (!last || last.role !== 'tool' || !Array.isArray(last.content)) return false;
  const yes = new Set(
    last.content.filter((p) => p.type === 'tool-approval-response' && p.approved === true).map((p) => p.approvalId),
  );
  if (yes.size === 0) return false;
  return messages.some((m) => m.role === 'assistant' && Array.isArray(m.content) &&
    m.content.some((p) => p.type === 'tool-approval-request' && p.toolCallId === toolCallId && yes.has(p.approvalId)));
}

/** The refusal the model reads when a person declines an ask. */
function declined(tool, why) {
  return `The user declined this call of \`${tool}\`${why ? ` (${why})` : ''}; it has NOT run. ` +
    'Do not call it again with these arguments unless the user asks for it.';
}

/**
 * Asks `approver` about each of the SDK's `tool-approval-request` parts in `content` (a
 * result's `content`, or a step's) and answers the tool message to append to the messages of
 * the next call: `{ role: 'tool', content: [tool-approval-response, ...] }`, or null when
 * there is no request. `approver({ approvalId, toolCall, decision })` (`decision`: the ask,
 * or null for a request toolgate did not make) answers `true`, or `{ approved: true }`, for
 * yes; anything else, or throwing, is a no, whose `reason` (or toolgate's refusal) is what
 * the model reads. A yes to a toolgate ask is recorded in the Turn at once, timed now.
 */
async function answerApprovals(turn, content, approver) {
  if (typeof approver !== 'function') throw new TypeError('answerApprovals: approver is a function');
  const parts = (Array.isArray(content) ? content : []).filter((p) => p && p.type === 'tool-approval-request');
  if (parts.length === 0) return null;
  const answers = [];
  for (const part of parts) {
    const toolCall = part.toolCall || {};
    const ask = asked.get(turn)?.get(toolCall.toolCallId);
    let answer;
    let why;
    try {
      answer = await approver({ approvalId: part.approvalId, toolCall, decision: ask ? { ...ask.decision } : null });
    } catch (e) {
      why = `the approval failed: ${e && e.message ? e.message : String(e)}`;
    }
    const approved = answer === true || (answer !== null && typeof answer === 'object' && answer.approved === true);
    if (approved) {
      if (ask) {
        turn.approve(ask.decision.approval);
        ask.answered = true;
      }
      answers.push({ type: 'tool-approval-response', approvalId: part.approvalId, approved: true });
    } else {
      if (ask) asked.get(turn).delete(toolCall.toolCallId); // no approval will come for it
      const given = answer !== null && typeof answer === 'object' && typeof answer.reason === 'string' ? answer.reason : undefined;
      answers.push({
        type: 'tool-approval-response', approvalId: part.approvalId, approved: false,
        reason: given ?? declined(toolCall.toolName, why),
      });
    }
  }
  return { role: 'tool', content: answers };
}

/** The tool's own `needsApproval` (a boolean or a function), asked as the SDK would. */
async function ownNeedsApproval(tool, input, options) {
  if (typeof tool.needsApproval === 'function') return Boolean(await tool.needsApproval(input, options));
  return tool.needsApproval === true;
}

/** Returns a copy of the tool set whose `execute` functions are judged first. */
function guardTools(turn, tools) {
  const asks = asksOf(turn);
  const guarded = {};
  for (const [name, tool] of Object.entries(tools)) {
    if (typeof tool.execute !== 'function') {
      guarded[name] = tool; // executed by the caller or the provider, not by the SDK
      continue;
    }
    const execute = tool.execute;
    guarded[name] = {
      ...tool,
      // True for a call the policy asks about (the SDK then asks a person), and for one
      // whose approval request the person approved (so the SDK runs it and `execute` judges
      // it with the approval). Judges without using an approval; a call it cannot judge is
      // left to `execute`, which refuses it with the reason.
      async needsApproval(input, options) {
        const id = options && options.toolCallId ? options.toolCallId : `${name}-call`;
        if (asks.has(id) && approvedInMessages(options && options.messages, id)) return true;
        let decision;
        try {
          decision = turn.decide([{ id, tool: name, args: input ?? {} }], { spend: false })[0];
        } catch {
          decision = null;
        }
        if (decision && decision.kind === 'ask' && typeof decision.approval === 'string') {
          asks.set(id, { decision, answered: false });
          return true;
        }
        asks.delete(id);
        return ownNeedsApproval(tool, input, options);
      },
      // Not an async function: an `execute` may return an async iterable (preliminary
      // results), which the SDK must receive as it is, not wrapped in a promise.
      execute(input, options) {
        const id = options && options.toolCallId ? options.toolCallId : `${name}-call`;
        // A call a person approved through the SDK's flow: its approval goes into the Turn
        // (unless `answerApprovals` put it there when the person answered).
        const ask = asks.get(id);
        let approved = null;
        if (ask && approvedInMessages(options && options.messages, id)) {
          asks.delete(id);
          if (!ask.answered) turn.approve(ask.decision.approval);
          approved = ask.decision.approval;
        }
        // The verdict of this very call in the step the middleware judged, if it has one.
        const batch = turn.batchDecision(id, name, input ?? {});
        let now;
        try {
          now = turn.decideOne({ id, tool: name, args: input ?? {} });
        } catch (e) {
          return Promise.reject(e); // cannot be judged: refused, and the model reads why
        }
        // The step's verdict stands, unless it is the very ask the person just approved.
        const stands = batch && !batch.allow && !(batch.kind === 'ask' && approved !== null && batch.approval === approved);
        const decision = stands ? batch : now;
        if (!decision.allow) return Promise.reject(new ToolDenied(decision));
        return recorded(turn, name, () => execute.call(tool, input, options), id);
      },
    };
  }
  return guarded;
}

module.exports = { guardTools, toolgateMiddleware, answerApprovals, askOf, ToolDenied };
