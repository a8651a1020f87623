// A real MCP client (the official TypeScript SDK, `@modelcontextprotocol/sdk`, pinned in
// package-lock.json beside this file) driven by cli/tests/mcp_typescript.rs.
//
// Usage: node client.mjs SCRIPT.json. The script is the one tests/mcp/client.py reads:
// {"command": [...], "env": {...}, "steps": [...]} starts `command` (toolgate mcp ... --
// python3 server.py) over the SDK's StdioClientTransport; {"url": ...} instead connects to a
// running `toolgate mcp --listen` over its StreamableHTTPClientTransport. The SDK's `Client`
// connects as an application using it does by default (it negotiates the newest protocol it
// knows), runs each step and prints one JSON line per step:
//
//   {"op": "list"}                                 -> {"tools": [{name, description, annotations, outputSchema}]}
//   {"op": "notifications"}                        -> {"notifications": [methods seen since the last]}
//   {"op": "call", "tool": T, "args": {...}, "meta": {...}?}
//       -> {"isError", "texts", "structured", "meta", "keys", "seconds"}   a tool result
//       -> {"error": {"code", "message", "data"}, "seconds"}               a JSON-RPC error
//       -> {"exception": "...", "seconds"}                                 anything else
//
// `keys` are the result's own keys as the SDK returned it (after its schema check). The
// first line is {"initialized": {"server", "protocolVersion", "instructions"}}, the version
// being the one in the server's `initialize` result as it came over the wire.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

// A call gets this long before the client gives up on it (toolgate's own deadline is shorter).
const CLIENT_TIMEOUT_MS = 30_000;

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// Methods of the notifications the server sent, for the "notifications" step.
let notifications = [];
// The id of the `initialize` request and the protocol version its result named.
let negotiated = null;

// Wraps a transport so that every message the SDK receives is seen first: the SDK keeps the
// negotiated version to itself over stdio.
function watched(transport) {
  return new Proxy(transport, {
    set(target, prop, value) {
      if (prop === "onmessage" && typeof value === "function") {
        target.onmessage = (message, extra) => {
          const version = message?.result?.protocolVersion;
          if (negotiated === null && typeof version === "string") {
            negotiated = version;
          }
          return value(message, extra);
        };
      } else {
        target[prop] = value;
      }
      return true;
    },
    get(target, prop) {
      const value = target[prop];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

async function answerStep(client, step) {
  switch (step.op) {
    case "list": {
      const result = await client.listTools();
      return {
        tools: result.tools.map((t) => ({
          name: t.name,
          description: t.description ?? null,
          annotations: t.annotations ?? null,
          outputSchema: t.outputSchema ?? null,
        })),
      };
    }
    case "notifications": {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const seen = notifications;
      notifications = [];
      return { notifications: seen };
    }
    case "call": {
      const params = { name: step.tool, arguments: step.args ?? {} };
      if (step.meta) params._meta = step.meta;
      const result = await client.callTool(params, undefined, { timeout: CLIENT_TIMEOUT_MS });
      return {
        isError: Boolean(result.isError),
        texts: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
        structured: result.structuredContent ?? null,
        meta: result._meta ?? null,
        keys: Object.keys(result).sort(),
      };
    }
    default:
      throw new Error(`unknown step ${JSON.stringify(step)}`);
  }
}

async function runStep(client, step) {
  const started = performance.now();
  let answer;
  try {
    answer = await answerStep(client, step);
  } catch (e) {
    if (e instanceof McpError) {
      const message = e.message.replace(/^MCP error -?\d+: /, "");
      answer = { error: { code: e.code, message, data: e.data ?? null } };
    } else {
      answer = { exception: `${e?.name ?? "Error"}: ${e?.message ?? e}` };
    }
  }
  answer.seconds = (performance.now() - started) / 1000;
  return answer;
}

async function main() {
  const script = JSON.parse(readFileSync(process.argv[2], "utf8"));
  let transport;
  if (script.url) {
    transport = new StreamableHTTPClientTransport(new URL(script.url));
  } else {
    const [command, ...args] = script.command;
    // The SDK passes a minimal environment (HOME, PATH, ...) plus `env`, as client.py's does.
    transport = new StdioClientTransport({ command, args, env: script.env ?? {}, stderr: "inherit" });
  }
  const client = new Client({ name: "toolgate-test-ts", version: "1.0.0" });
  client.fallbackNotificationHandler = async (n) => {
    notifications.push(n.method);
  };
  await client.connect(watched(transport));
  emit({
    initialized: {
      server: client.getServerVersion()?.name ?? null,
      protocolVersion: negotiated,
      instructions: client.getInstructions() ?? null,
    },
  });
  for (const step of script.steps) {
    emit(await runStep(client, step));
  }
  if (script.url && transport.sessionId) {
    await transport.terminateSession().catch(() => {});
  }
  await client.close();
}

main().catch((e) => {
  process.stderr.write(`client.mjs: ${e?.stack ?? e}\n`);
  process.exit(1);
});
