// toolgate for the official MCP TypeScript SDK (`@modelcontextprotocol/sdk`): a client whose
// `callTool` is judged first.
//
// `guardClient(client, turn)` returns an object that forwards everything to `client` except
// `callTool`, which asks the policy before the request leaves. A denied call never reaches
// the server: the caller gets the MCP tool-execution error result,
// `{ content: [{ type: "text", text: REASON }], isError: true }`, which the spec says clients
// should show the model so it can correct itself, with the decision in
// `structuredContent.toolgate`. An allowed call goes to the server; its outcome is recorded
// in the turn (`isError` counts as a failure).
//
// `callTool` sees one call at a time: a latch set by a call judged earlier in the turn blocks
// the writes after it. To judge a model's whole batch together (a latch set by any call
// blocks every write in it, whatever the order), use `callTools([params, ...])`: it judges
// the batch first, then sends the allowed calls one after another, in order.
//
// No import of the SDK: `client` is any object with the SDK Client's `callTool`.
'use strict';

let nextId = 0;

function refusal(decision) {
  return {
    content: [{ type: 'text', text: decision.reason || `tool call ${decision.tool} refused by policy` }],
    structuredContent: { toolgate: decision },
    isError: true,
  };
}

// A call (or batch) the policy cannot judge, such as one whose arguments are not an object,
// is refused with the reason instead of throwing: the model reads why, as for a denial.
function judged(turn, calls) {
  try {
    return turn.decide(calls);
  } catch (e) {
    return calls.map((call) => ({
      id: call.id,
      tool: call.tool,
      allow: false,
      reason: `toolgate could not judge this call: ${e.message}`,
    }));
  }
}

function toCall(params) {
  return { id: `mcp-${++nextId}`, tool: params.name, args: params.arguments ?? {} };
}

function guardClient(client, turn) {
  async function send(params, decision, rest) {
    if (!decision.allow) return refusal(decision);
    let ok = false;
    try {
      const result = await client.callTool(params, ...rest);
      ok = !result.isError;
      return result;
    } finally {
      turn.record(params.name, ok);
    }
  }
  const guard = {
    /** The SDK's `callTool(params, resultSchema?, options?)`, judged first. */
    async callTool(params, ...rest) {
      return send(params, judged(turn, [toCall(params)])[0], rest);
    },
    /** Judges `batch` together, then sends the allowed calls in order; results in order. */
    async callTools(batch, ...rest) {
      const decisions = judged(turn, batch.map(toCall));
      const results = [];
      for (let i = 0; i < batch.length; i++) results.push(await send(batch[i], decisions[i], rest));
      return results;
    },
  };
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === 'callTool' || prop === 'callTools') return guard[prop];
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

module.exports = { guardClient };
