// 1,000 sequential `echo` calls through the official TypeScript SDK client, for
// comparison in `make bench`. Usage: node ts_echo.mjs SDK_DIR SERVER_SCRIPT CALLS
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, serverScript, callsText] = process.argv.slice(2);
const calls = Number(callsText ?? 1000);
const load = (p) => import(pathToFileURL(path.join(sdkDir, p)).href);
const { Client } = await load("dist/esm/client/index.js");
const { StdioClientTransport } = await load("dist/esm/client/stdio.js");

const client = new Client({ name: "bench-ts", version: "1.0.0" });
const started = performance.now();
await client.connect(new StdioClientTransport({ command: "node", args: [serverScript, "stdio"] }));
const connected = performance.now();
for (let i = 0; i < calls; i++) {
  await client.callTool({ name: "echo", arguments: { message: `m${i}` } });
}
const done = performance.now();
console.log(JSON.stringify({ connect_ms: connected - started, calls_ms: done - connected }));
await client.close();
