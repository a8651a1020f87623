"""A real MCP client (the official Python SDK) driven by cli/tests/mcp.rs.

Usage: client.py SCRIPT.json. The script is {"command": [...], "env": {...}, "steps": [...]}
(the SDK starts the command with a minimal environment, plus `env`); the client
starts `command` (toolgate mcp ... -- python3 server.py) over the SDK's stdio transport,
initializes, runs each step and prints one JSON line per step. With {"url": ...} instead
of "command" it connects to a running toolgate over Streamable HTTP.

  {"op": "list"}                                  -> {"tools": [{name, description, annotations}]}
  {"op": "notifications"}                         -> {"notifications": [methods seen since the last]}
  {"op": "call", "tool": T, "args": {...}, "meta": {...}?}
      -> {"isError", "texts", "structured", "meta", "seconds"}   a tool result
      -> {"error": {"code", "message", "data"}, "seconds"}        a JSON-RPC error
      -> {"exception": "...", "seconds"}                          anything else

  {"op": "elicited"}                              -> {"elicited": [{"message", "schema"}]} the
                                                     elicitation requests answered since the last

With {"elicit": ["approve" | "reject" | "decline" | "cancel", ...]} the client declares form
elicitation and answers each request with the next scripted answer, in order ("approve":
accept with {"approve": true}; "reject": accept with {"approve": false}); past the list it
declines. The high-level client answers the same way the elicitation inside an
InputRequiredResult (2026-07-28), which its driver then retries with.

The first line is {"initialized": {"server": name, "protocolVersion": v, "instructions": ...}}.

With {"client": "high-level"} the script uses the SDK's default high-level `mcp.Client`
instead, which negotiates the newest protocol it knows (through `server/discover`), as an
application using the SDK does by default.
"""

import asyncio
import json
import sys
import time

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# A call gets this long before the client gives up on it (toolgate's own deadline is shorter).
CLIENT_TIMEOUT = 30.0


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# Methods of the notifications the server sent, for the "notifications" step.
NOTIFICATIONS = []

# The elicitation requests answered, for the "elicited" step, and the answers still to give.
ELICITED = []
ANSWERS = []


async def on_elicit(context, params):
    from mcp import types

    ELICITED.append({"message": params.message, "schema": params.requested_schema})
    answer = ANSWERS.pop(0) if ANSWERS else "decline"
    if answer == "approve":
        return types.ElicitResult(action="accept", content={"approve": True})
    if answer == "reject":
        return types.ElicitResult(action="accept", content={"approve": False})
    return types.ElicitResult(action=answer)


async def on_message(message):
    if not isinstance(message, Exception):
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        NOTIFICATIONS.append(method)


async def run_step(session, step):
    started = time.monotonic()
    try:
        answer = await answer_step(session, step)
    except MCPError as e:
        answer = {"error": {"code": e.code, "message": e.message, "data": e.data}}
    except Exception as e:  # noqa: BLE001 - the test wants to see any failure
        answer = {"exception": f"{type(e).__name__}: {e}"}
    answer["seconds"] = time.monotonic() - started
    return answer


async def answer_step(session, step):
    if step["op"] == "list":
        result = await session.list_tools()
        return {
            "tools": [
                {
                    "name": t.name,
                    "description": t.description,
                    "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                    "inputSchema": t.input_schema,
                }
                for t in result.tools
            ]
        }
    if step["op"] == "elicited":
        seen = list(ELICITED)
        ELICITED.clear()
        return {"elicited": seen}
    if step["op"] == "notifications":
        await asyncio.sleep(0.3)
        seen = list(NOTIFICATIONS)
        NOTIFICATIONS.clear()
        return {"notifications": seen}
    if step["op"] == "call":
        result = await session.call_tool(
            step["tool"],
            step.get("args", {}),
            read_timeout_seconds=CLIENT_TIMEOUT,
            meta=step.get("meta"),
        )
        return {
            "isError": bool(result.is_error),
            "texts": [c.text for c in result.content if getattr(c, "type", None) == "text"],
            "structured": result.structured_content,
            "meta": result.meta,
        }
    raise ValueError(f"unknown step {step!r}")


async def high_level(script):
    from mcp import Client

    command = script["command"]
    server = StdioServerParameters(command=command[0], args=command[1:], env=script.get("env"))
    elicit = None
    if "elicit" in script:
        ANSWERS.extend(script["elicit"])
        elicit = on_elicit
    async with Client(server, message_handler=on_message, elicitation_callback=elicit) as client:
        info = client.server_info
        emit(
            {
                "initialized": {
                    "server": info.name if info else None,
                    "protocolVersion": client.protocol_version,
                    "instructions": client.instructions,
                }
            }
        )
        for step in script["steps"]:
            emit(await run_step(client, step))


async def main():
    with open(sys.argv[1]) as f:
        script = json.load(f)
    if script.get("client") == "high-level":
        await high_level(script)
        return
    if "url" in script:
        transport = streamable_http_client(script["url"])
    else:
        command = script["command"]
        transport = stdio_client(
            StdioServerParameters(command=command[0], args=command[1:], env=script.get("env"))
        )
    async with transport as (read, write):
        elicit = None
        if "elicit" in script:
            ANSWERS.extend(script["elicit"])
            elicit = on_elicit
        async with ClientSession(
            read, write, message_handler=on_message, elicitation_callback=elicit
        ) as session:
            init = await session.initialize()
            emit(
                {
                    "initialized": {
                        "server": init.server_info.name,
                        "protocolVersion": init.protocol_version,
                        "instructions": init.instructions,
                    }
                }
            )
            for step in script["steps"]:
                emit(await run_step(session, step))


asyncio.run(main())
