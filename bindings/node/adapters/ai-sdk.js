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
// if both allow it.
//
// No import of `ai`: the caller passes its tools and wraps its model; this file only reads
// the documented shapes.
'use strict';

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
    // Unparsable input: judge it as non-object arguments; the SDK itself refuses it too.
    return text;
  }
}

/** Judges one step's client-executed tool calls (provider-executed ones are not ours to stop). */
function judgeParts(turn, parts) {
  const calls = parts
    .filter((p) => p.type === 'tool-call' && !p.providerExecuted)
    .map((p) => ({ id: p.toolCallId, tool: p.toolName, args: parseInput(p.input) }));
  if (calls.length === 0) return;
  try {
    turn.decide(calls);
  } catch (e) {
    // A batch that cannot be judged (a call whose input is not a JSON object, say) is refused
    // whole: the latch pre-scan could not run, so no call of it is known to be safe. The
    // model reads why and the turn goes on; throwing here would end the generation.
    for (const call of calls) {
      turn.decisions.set(call.id, {
        id: call.id,
        tool: call.tool,
        allow: false,
        reason: `toolgate could not judge this step's tool calls: ${e.message}`,
      });
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
        const batch = turn.decisions.get(id);
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
