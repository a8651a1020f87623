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
// An ask (a call the policy lets run only once a person approves it) goes to the approver
// given as `guardClient(client, turn, { approver })`. It is modelled on MCP elicitation, the
// protocol's way to put a question to the user: the approver is handed an `ElicitRequest`
// (`elicitation/create`, form mode, one required boolean `approve`) and answers an
// `ElicitResult`; only `{ action: "accept", content: { approve: true } }` is a yes. So the
// form UI a client already has for servers' elicitations can answer it. It is not sent over
// MCP: elicitation is a request from a server to its client, and the guard is the client
// side, with no server to ask; nor can the guard call the handler a client registered for
// `elicitation/create` (the SDK offers no public way to), so the app passes it as the
// approver. Its second argument is toolgate's context (`tool`, `arguments`, `decision`), not
// the SDK's request-handler extra.
//
// A yes records the approval in the turn (timed when the answer comes) and judges the call
// again: exactly that call, while the approval is live, is allowed, uses the approval up and
// is sent. A no, any other answer, or an approver that throws is a refusal the caller gets
// as the tool error result. Without an approver an ask is a denial carrying the ask's reason
// (fails closed), with its `approval` digest in `structuredContent.toolgate` for an executor
// that asks a person its own way and calls `turn.approve(digest)` before the model retries.
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

/** The question an ask puts to the approver: an MCP `ElicitRequest` in form mode. */
function elicitation(params, decision) {
  let args;
  try {
    args = JSON.stringify(params.arguments ?? {});
  } catch {
    args = '(arguments that are not JSON)';
  }
  const by = decision.rule ? ` \`${decision.rule}\` asks for a person's approval.` : '';
  return {
    method: 'elicitation/create',
    params: {
      mode: 'form',
      message: `Allow the tool call \`${params.name}\` with arguments ${args}?${by}`,
      requestedSchema: {
        type: 'object',
        properties: {
          approve: {
            type: 'boolean',
            title: 'Approve this call',
            description: 'Lets exactly this call run once; the same call again asks again.',
            default: false,
          },
        },
        required: ['approve'],
      },
    },
  };
}

/** Whether an approver's answer is a yes: an accepted elicitation with `approve: true`. */
function accepted(answer) {
  return answer !== null && typeof answer === 'object' && answer.action === 'accept' &&
    answer.content !== null && typeof answer.content === 'object' && answer.content.approve === true;
}

function declined(decision, why) {
  return {
    ...decision,
    reason: `The user declined this call of \`${decision.tool}\`${why ? ` (${why})` : ''}; it has NOT run. ` +
      'Do not call it again with these arguments unless the user asks for it.',
  };
}

/**
 * @param client the SDK's Client (or anything with its `callTool`)
 * @param turn the Turn the calls are judged by
 * @param options `approver(request, context)`: asked about each ask (see the file's notes).
 */
function guardClient(client, turn, options = {}) {
  const { approver } = options || {};
  if (approver !== undefined && approver !== null && typeof approver !== 'function') {
    throw new TypeError('guardClient: approver is a function answering an ElicitResult');
  }
  /** The decision an ask comes to once the approver answered; any other decision as it is. */
  async function settle(params, decision) {
    if (decision.kind !== 'ask' || typeof decision.approval !== 'string' || !approver) return decision;
    let answer;
    try {
      answer = await approver(elicitation(params, decision), { tool: params.name, arguments: params.arguments ?? {}, decision: { ...decision } });
    } catch (e) {
      return declined(decision, `the approval failed: ${e && e.message ? e.message : String(e)}`);
    }
    if (!accepted(answer)) return declined(decision, answer && typeof answer.action === 'string' ? answer.action : undefined);
    turn.approve(decision.approval);
    const again = judged(turn, [toCall(params)])[0];
    // An approval the new judgement did not use (the policy changed meanwhile) is withdrawn.
    if (!(again.allow && again.approval === decision.approval)) turn.reject(decision.approval);
    return again;
  }
  async function send(params, decision, rest) {
    decision = await settle(params, decision);
    if (!decision.allow) return refusal(decision);
    let ok = false;
    let output;
    try {
      const result = await client.callTool(params, ...rest);
      ok = !result.isError;
      output = result;
      return result;
    } finally {
      try {
        // The result as the client received it is the call's output for the turn's later
        // provenance checks, as the MCP proxy records it.
        turn.record(params.name, ok, output === undefined ? {} : { callId: decision.id, output });
      } catch {
        // The call is recorded; an output that is not JSON data is not, so a check that
        // reads the turn's outputs denies.
      }
    }
  }
  const guard = {
    /** The SDK's `callTool(params, resultSchema?, options?)`, judged first. */
    async callTool(params, ...rest) {
      return send(params, judged(turn, [toCall(params)])[0], rest);
    },
    /**
     * Judges `batch` together, then, in order, asks the approver about each ask and sends the
     * allowed calls; results in order.
     */
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
