"""A tiny stdio MCP server for the verdict tests: tool `lookup` answers over a successful
transport (isError false) with the text its `reply` argument asks for, e.g. an error
envelope `{"error": "..."}` or `error: ...`. Standard library only; newline-delimited
JSON-RPC 2.0 as the MCP stdio transport specifies."""

import json
import sys

TOOL = {"name": "lookup", "description": "Look a thing up.",
        "inputSchema": {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}}


def answer(req_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req_id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, req_id = msg.get("method"), msg.get("id")
    if req_id is None:
        continue  # a notification
    if method == "initialize":
        answer(req_id, {"protocolVersion": msg["params"].get("protocolVersion", "2024-11-05"),
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "errsrv", "version": "1"}})
    elif method == "tools/list":
        answer(req_id, {"tools": [TOOL]})
    elif method == "tools/call":
        reply = msg["params"].get("arguments", {}).get("reply", "")
        answer(req_id, {"content": [{"type": "text", "text": reply}], "isError": False})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req_id,
                                     "error": {"code": -32601, "message": f"no method {method}"}}) + "\n")
        sys.stdout.flush()
