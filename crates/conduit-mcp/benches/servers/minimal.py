"""A minimal MCP server on the standard library alone (one `ping` tool), so that starting
ten of them measures the client's parallel start rather than the CPU cost of a runtime."""
import json
import sys

TOOLS = [{"name": "ping", "description": "Answers pong", "inputSchema": {"type": "object"}}]

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "minimal", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}]}
    else:
        # What a 2025 server answers to anything else (a 2026 client's `server/discover`
        # among them): method not found, so the client falls back to `initialize`.
        error = {"code": -32601, "message": f"method not found: {method}"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
