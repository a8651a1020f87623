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
    turn.decide(calls, { batch: `ai-sdk-step:${randomUUID()}` });
  } catch {
    // A step that cannot be judged (a call id given twice, a turn the policy can no longer
    // judge) keeps no verdict. Its latches are still recorded from its tools alone (a latch
    // is set by a tool, whatever its id and arguments), so no sibling judged later at
    // `execute` escapes them; each `execute` then judges its call alone.
    try {
      turn.decide(calls.map((c, i) => ({ id: `step-${i}`, tool: c.tool, args: {} })));
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

/** Runs `run` and records in `turn` whether the tool succeeded, for a value, a promise or an
 * async iterable alike (the SDK's streaming tools yield preliminary results). */
function recorded(turn, name, run) {
  let result;
  try {
    result = run();
  } catch (e) {
    turn.record(name, false);
    throw e;
  }
  if (result != null && typeof result[Symbol.asyncIterator] === 'function') {
    return (async function* () {
      let ok = false;
      try {
        yield* result;
        ok = true;
      } finally {
        turn.record(name, ok);
      }
    })();
  }
  return Promise.resolve(result).then(
    (output) => {
      turn.record(name, true);
      return output;
    },
    (error) => {
      turn.record(name, false);
      throw error;
    },
  );
}

/** Returns a copy of the tool set whose `execute` functions are judged first. */
function guardTools(turn, tools) {
  const guarded = {};
  for (const [name, tool] of Object.entries(tools)) {
    if (typeof tool.execute !== 'function') {
      guarded[name] = tool; // executed by the caller or the provider, not by the SDK
      continue;
    }
    const execute = tool.execute;
    guarded[name] = {
      ...tool,
      // Not an async function: an `execute` may return an async iterable (preliminary
      // results), which the SDK must receive as it is, not wrapped in a promise.
      execute(input, options) {
        const id = options && options.toolCallId ? options.toolCallId : `${name}-call`;
        // The verdict of this very call in the step the middleware judged, if it has one.
        const batch = turn.batchDecision(id, name, input ?? {});
        let now;
        try {
          now = turn.decideOne({ id, tool: name, args: input ?? {} });
        } catch (e) {
          return Promise.reject(e); // cannot be judged: refused, and the model reads why
        }
        const decision = batch && !batch.allow ? batch : now;
        if (!decision.allow) return Promise.reject(new ToolDenied(decision));
        return recorded(turn, name, () => execute.call(tool, input, options));
      },
    };
  }
  return guarded;
}

module.exports = { guardTools, toolgateMiddleware, ToolDenied };
