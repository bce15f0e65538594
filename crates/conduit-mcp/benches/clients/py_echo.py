"""1,000 sequential `echo` calls through the official Python SDK client, for comparison
in `make bench`. Usage: python py_echo.py SERVER_SCRIPT CALLS"""
import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(server_script: str, calls: int) -> None:
    params = StdioServerParameters(command="node", args=[server_script, "stdio"])
    started = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            connected = time.perf_counter()
            for i in range(calls):
                await session.call_tool("echo", {"message": f"m{i}"})
            done = time.perf_counter()
    print(json.dumps({"connect_ms": (connected - started) * 1000, "calls_ms": (done - connected) * 1000}))


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
