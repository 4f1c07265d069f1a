// The plugin as opencode runs it: its hooks called with opencode's inputs and outputs, against a live memory
// server that this file starts (manage.py serve with MEMORY_PORT=0) on a fresh database.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, afterEach, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { MemoryPlugin } from "../dist/memory-plugin.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "..", "..", "..", "..");
const PYTHON = process.env.MEMORY_TEST_PYTHON || join(ROOT, ".venv", "bin", "python");
const SAVED_ENV = { ...process.env };

// A hook that never returns fails its test instead of hanging the run.
const LIMIT = { timeout: 60_000 };
let dataDir, serverEnv, server, base, key;

function manage(...args) {
  const done = spawnSync(PYTHON, ["manage.py", ...args], { cwd: ROOT, env: serverEnv, encoding: "utf-8", timeout: 120_000 });
  assert.equal(done.status, 0, `manage.py ${args.join(" ")}: ${done.stderr}`);
  return done.stdout;
}

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "memory-opencode-"));
  serverEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("MEMORY_")));
  Object.assign(serverEnv, {
    MEMORY_DATA_DIR: dataDir, MEMORY_DB_PATH: join(dataDir, "memory.db"), MEMORY_EMBEDDER: "hash",
    MEMORY_PORT: "0", PYTHONUNBUFFERED: "1",
  });
  manage("migrate", "--noinput", "-v", "0");
  key = manage("create_api_key", "--name", "opencode-test", "--scopes", "read,write").trim();
  server = spawn(PYTHON, ["manage.py", "serve"], { cwd: ROOT, env: serverEnv, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  server.stderr.on("data", (chunk) => { log += chunk; });
  base = await new Promise((resolveUrl, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no MEMORY_SERVER_LISTENING within 90 s:\n${seen}\n${log}`)), 90_000);
    server.stdout.on("data", (chunk) => {
      seen += chunk;
      const line = seen.split("\n").find((text) => text.startsWith("MEMORY_SERVER_LISTENING "));
      if (line) {
        clearTimeout(timer);
        resolveUrl(JSON.parse(line.slice("MEMORY_SERVER_LISTENING ".length)).url);
      }
    });
    server.on("exit", (code) => reject(new Error(`the server exited (${code}):\n${seen}\n${log}`)));
  });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((done) => server.on("exit", done));
    server.kill("SIGTERM");
    await exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
});

afterEach(() => {
  for (const name of Object.keys(process.env)) if (!(name in SAVED_ENV)) delete process.env[name];
  Object.assign(process.env, SAVED_ENV);
});

/** Set the plugin's environment: no MEMORY_* but these. */
function environment(vars) {
  for (const name of Object.keys(process.env)) if (name.startsWith("MEMORY_")) delete process.env[name];
  Object.assign(process.env, vars);
}

async function api(method, path, body) {
  const response = await fetch(`${base}/api/v1/${path}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
  });
  const answer = await response.json();
  assert.ok(response.ok, JSON.stringify(answer));
  return answer;
}

const stored = async (namespace) => (await api("GET", `memories/?namespace=${namespace}&limit=200`)).items;

/** The injection reports stored for a session: [{hook, characters, memories: "id:revision,..."}]. */
function reports(session) {
  const code = `import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select i.id, i.harness, i.hook, i.characters, i.query from telemetry_injection i where i.session = ? order by i.id", (sys.argv[2],)).fetchall()
print(json.dumps([{"harness": h, "hook": k, "characters": c, "query": q, "memories": ",".join(f"{m}:{r}" for m, r in db.execute("select memory_id, revision_id from telemetry_injectedmemory where injection_id = ? order by memory_id", (i,)))} for i, h, k, c, q in rows]))`;
  const done = spawnSync(PYTHON, ["-c", code, join(dataDir, "memory.db"), session], { encoding: "utf-8" });
  assert.equal(done.status, 0, done.stderr);
  return JSON.parse(done.stdout);
}

/** What opencode hands the plugin: its SDK client (the messages of a session, a log) and the project. */
function opencode(conversations = {}) {
  const logged = [];
  const client = {
    app: { log: async ({ body }) => { logged.push(body.message); return { data: true }; } },
    session: { messages: async ({ path }) => ({ data: conversations[path.id] ?? [] }) },
  };
  return { input: { client, project: {}, directory: ROOT, worktree: ROOT, serverUrl: new URL("http://localhost:4096") }, logged };
}

let counter = 0;
function message(sessionID, role, text, extra = []) {
  const id = `msg_${String(++counter).padStart(6, "0")}`;
  return {
    info: { id, sessionID, role, time: { created: Date.now() } },
    parts: [{ id: `prt_${id}`, sessionID, messageID: id, type: "text", text }, ...extra],
  };
}

/** opencode's order for a new user message: chat.message, then the context transform before each model call. */
async function send(hooks, conversation, sessionID, text) {
  const user = message(sessionID, "user", text);
  await hooks["chat.message"]({ sessionID }, { message: user.info, parts: user.parts });
  conversation.push(user);
  return transform(hooks, conversation);
}

/** One model call: a copy of the conversation, transformed as opencode does (the changes are not stored). */
async function transform(hooks, conversation) {
  const messages = structuredClone(conversation);
  await hooks["experimental.chat.messages.transform"]({}, { messages });
  return messages;
}

const blockOf = (msg) => msg.parts.filter((part) => part.synthetic && part.text.includes("<memory-context>"));

async function seed(namespace, content, extra = {}) {
  return api("POST", "memories/", { content, namespace, ...extra });
}

test("the recalled block goes at the tail of the context, stays in place, and the injection is reported", LIMIT, async () => {
  const deploy = await seed("tail", "Deploys go out on Fridays after the release review.", { key: "deploy-days" });
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "tail" });
  const hooks = await MemoryPlugin(opencode().input);
  const conversation = [message("s-tail", "user", "Hello there"), message("s-tail", "assistant", "Hi, how can I help?")];

  const first = await send(hooks, conversation, "s-tail", "When do deploys go out?");
  const newest = first.at(-1);
  const block = newest.parts.at(-1);
  assert.equal(block.synthetic, true);
  assert.match(block.text, /^<memory-context>[\s\S]*Fridays[\s\S]*<\/memory-context>$/);
  assert.equal(blockOf(newest).length, 1);
  assert.deepEqual(first.slice(0, -1), conversation.slice(0, -1), "older messages are left as they were");
  assert.equal(newest.parts[0].text, "When do deploys go out?");

  // A tool loop: more model calls for the same request; the block stays on the same message, byte for byte.
  conversation.push(message("s-tail", "assistant", "Checking the calendar."));
  const second = await transform(hooks, conversation);
  assert.deepEqual(second.slice(0, first.length), first);
  assert.equal(second.at(-1).parts.length, 1);

  const sent = reports("s-tail");
  assert.equal(sent.length, 1, "one report per injection");
  assert.equal(sent[0].harness, "opencode");
  assert.equal(sent[0].hook, "chat.messages.transform");
  assert.equal(sent[0].characters, block.text.length);
  assert.equal(sent[0].query, "When do deploys go out?");
  assert.equal(sent[0].memories, `${deploy.id}:${deploy.revision_id}`);
});

test("no re-injection while the recalled set is unchanged; a new revision injects again", LIMIT, async () => {
  const memory = await seed("same", "The billing service is written in Go and deployed on Fridays.", { key: "billing" });
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "same" });
  const hooks = await MemoryPlugin(opencode().input);
  const conversation = [];

  const first = await send(hooks, conversation, "s-same", "Tell me about the billing service");
  assert.equal(blockOf(first.at(-1)).length, 1);
  conversation.push(message("s-same", "assistant", "It is a Go service."));

  const second = await send(hooks, conversation, "s-same", "What language is the billing service in?");
  assert.equal(blockOf(second.at(-1)).length, 0, "the same set is not injected again");
  assert.deepEqual(second.slice(0, first.length), first, "the earlier block is still where it was");
  assert.equal(reports("s-same").length, 1);

  const revised = await api("PATCH", `memories/${memory.id}/`, { content: "The billing service is written in Rust now." });
  conversation.push(message("s-same", "assistant", "Go."));
  const third = await send(hooks, conversation, "s-same", "Is the billing service still in Go?");
  assert.match(blockOf(third.at(-1))[0].text, /Rust/);
  assert.deepEqual(third.slice(0, first.length), first);
  const sent = reports("s-same");
  assert.equal(sent.length, 2);
  assert.equal(sent[1].memories, `${memory.id}:${revised.revision_id}`);
});

/** {memory id: whether the answer after the injection used it} for the injections of a session. */
function used(session) {
  const code = `import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select m.memory_id, m.used_at is not null from telemetry_injectedmemory m join telemetry_injection i on i.id = m.injection_id where i.session = ?", (sys.argv[2],))
print(json.dumps({str(m): bool(u) for m, u in rows}))`;
  const done = spawnSync(PYTHON, ["-c", code, join(dataDir, "memory.db"), session], { encoding: "utf-8" });
  assert.equal(done.status, 0, done.stderr);
  return JSON.parse(done.stdout);
}

test("at the next user message, the answer to an injection is handed over and the memories it used are marked", LIMIT, async () => {
  const deploys = await seed("used", "The billing service deploys on Fridays from the kestrel cluster.");
  const owner = await seed("used", "The billing service owner is Priya Raman.");
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "used" });
  const hooks = await MemoryPlugin(opencode().input);
  const conversation = [];
  const first = await send(hooks, conversation, "s-used", "billing service");
  assert.equal(blockOf(first.at(-1)).length, 1);
  assert.deepEqual(used("s-used"), { [deploys.id]: false, [owner.id]: false });

  conversation.push(message("s-used", "assistant", "Checking."), message("s-used", "assistant", "It deploys on Fridays, from kestrel."));
  await transform(hooks, conversation); // another model call for the same request hands nothing over
  assert.deepEqual(used("s-used"), { [deploys.id]: false, [owner.id]: false });
  await send(hooks, conversation, "s-used", "Thanks");
  assert.deepEqual(used("s-used"), { [deploys.id]: true, [owner.id]: false });
});

test("a block removed by a compaction is injected again for the same set", LIMIT, async () => {
  await seed("compacted", "The staging cluster is called kestrel.");
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "compacted" });
  const hooks = await MemoryPlugin(opencode().input);
  const conversation = [];
  assert.equal(blockOf((await send(hooks, conversation, "s-cmp", "Which staging cluster?")).at(-1)).length, 1);
  conversation.splice(0, conversation.length, message("s-cmp", "assistant", "Summary of the conversation so far."));
  assert.equal(blockOf((await send(hooks, conversation, "s-cmp", "Which staging cluster again?")).at(-1)).length, 1);
});

test("a message starting with 'remember' is stored; other messages are not", LIMIT, async () => {
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "remember" });
  const hooks = await MemoryPlugin(opencode().input);
  const conversation = [];
  await send(hooks, conversation, "s-rem", "Remember: the staging database listens on port 5433");
  await send(hooks, conversation, "s-rem", "remember that Alice owns the billing service");
  await send(hooks, conversation, "s-rem", "Remembering names is hard, what is the staging port?");
  await send(hooks, conversation, "s-rem", "remember");
  const contents = (await stored("remember")).map((item) => item.content).sort();
  assert.deepEqual(contents, ["Alice owns the billing service", "the staging database listens on port 5433"]);
  assert.deepEqual((await stored("remember"))[0].tags, ["opencode"]);
});

test("before compaction, the last requests and answers are ingested", LIMIT, async () => {
  const session = "s-compact";
  const conversation = [
    message(session, "user", "Set up the deploy pipeline for payments."),
    message(session, "assistant", "Looking at the CI config.", [
      { id: "prt_tool", sessionID: session, messageID: "x", type: "tool", tool: "read", callID: "c1", state: { status: "completed", output: "SECRET_TOOL_OUTPUT" } }]),
    message(session, "assistant", "The pipeline now runs smoke tests, then a one-hour canary."),
    message(session, "user", "Which days can we deploy?", [
      { id: "prt_syn", sessionID: session, messageID: "y", type: "text", text: "SYNTHETIC_NOTE", synthetic: true }]),
    message(session, "assistant", "Deploys go out on Fridays after the release review."),
  ];
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "compact" });
  const hooks = await MemoryPlugin(opencode({ [session]: conversation }).input);
  const output = { context: [] };
  await hooks["experimental.session.compacting"]({ sessionID: session }, output);
  assert.deepEqual(output, { context: [] }, "the compaction prompt is left alone");
  const [kept] = await stored("compact");
  assert.equal(kept.kind, "artifact");
  assert.deepEqual(kept.tags, ["opencode"]);
  assert.equal(kept.title, "opencode: Which days can we deploy?");
  assert.match(kept.content, /Request: Set up the deploy pipeline for payments\.\nAnswer: The pipeline now runs smoke tests, then a one-hour canary\.\nRequest: Which days can we deploy\?\nAnswer: Deploys go out on Fridays/);
  assert.doesNotMatch(kept.content, /SECRET_TOOL_OUTPUT|SYNTHETIC_NOTE|Looking at the CI/);
});

test("tool outputs are captured for the tools on the allow-list only", LIMIT, async () => {
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "tools", MEMORY_TOOLS: "webfetch, grep" });
  const hooks = await MemoryPlugin(opencode().input);
  const call = (tool, output) => hooks["tool.execute.after"](
    { tool, sessionID: "s-tool", callID: `c-${tool}`, args: {} }, { title: `${tool} result`, output, metadata: {} });
  await call("webfetch", "The release calendar says: no deploys during the December freeze.");
  await call("bash", "total 0\nsecret.env");
  await call("grep", "   ");
  const items = await stored("tools");
  assert.equal(items.length, 1);
  assert.deepEqual(items[0].tags.sort(), ["opencode", "tool:webfetch"]);
  assert.match(items[0].content, /December freeze/);
});

test("against a dead port or a silent server, every hook returns in time and changes nothing", LIMIT, async () => {
  const probe = createServer();
  await new Promise((done) => probe.listen(0, "127.0.0.1", done));
  const dead = `http://127.0.0.1:${probe.address().port}`;
  await new Promise((done) => probe.close(done));
  const held = [];
  const silent = createServer((socket) => held.push(socket)); // accepts connections, never answers
  await new Promise((done) => silent.listen(0, "127.0.0.1", done));
  try {
    for (const [url, limit] of [[dead, 400], [`http://127.0.0.1:${silent.address().port}`, 1200]]) {
      environment({ MEMORY_URL: url, MEMORY_API_KEY: key, MEMORY_TIMEOUT: "0.5", MEMORY_TOOLS: "webfetch" });
      const { input, logged } = opencode({ "s-dead": [message("s-dead", "user", "remember the deploy days")] });
      const hooks = await MemoryPlugin(input);
      const timed = async (work) => {
        const started = Date.now();
        await work();
        const took = Date.now() - started;
        assert.ok(took < limit, `${url}: a hook took ${took} ms`);
      };
      const conversation = [message("s-dead", "user", "Hello")];
      const before = structuredClone(conversation);
      await timed(() => hooks["chat.message"]({ sessionID: "s-dead" }, { message: conversation[0].info, parts: conversation[0].parts }));
      const messages = structuredClone(conversation);
      await timed(() => hooks["experimental.chat.messages.transform"]({}, { messages }));
      assert.deepEqual(messages, before);
      await timed(() => hooks["experimental.session.compacting"]({ sessionID: "s-dead" }, { context: [] }));
      await timed(() => hooks["tool.execute.after"]({ tool: "webfetch", sessionID: "s-dead", callID: "c", args: {} },
        { title: "t", output: "some page", metadata: {} }));
      const remember = message("s-dead", "user", "remember that the server is down");
      await timed(() => hooks["chat.message"]({ sessionID: "s-dead" }, { message: remember.info, parts: remember.parts }));
      await timed(() => hooks["experimental.chat.messages.transform"]({}, { messages: [remember] }));
      assert.ok(logged.length >= 4, logged.join("\n"));
      assert.ok(logged.every((line) => line.startsWith("memory plugin: ")), logged.join("\n"));
    }
  } finally {
    for (const socket of held) socket.destroy();
    await new Promise((done) => silent.close(done));
  }
});

test("the environment wins over the plugin's options, and the options work alone", LIMIT, async () => {
  const options = { url: "http://127.0.0.1:9", apiKey: "mk_wrong", namespace: "from-options", timeout: 0.5 };
  environment({ MEMORY_URL: base, MEMORY_API_KEY: key, MEMORY_NAMESPACE: "from-env" });
  const fromEnv = await MemoryPlugin(opencode().input, options);
  await send(fromEnv, [], "s-env", "remember the env wins");
  assert.deepEqual((await stored("from-env")).map((item) => item.content), ["the env wins"]);

  environment({});
  const fromOptions = await MemoryPlugin(opencode().input, { ...options, url: base, apiKey: key });
  await send(fromOptions, [], "s-opt", "remember the options apply");
  assert.deepEqual((await stored("from-options")).map((item) => item.content), ["the options apply"]);
});

test("without a URL the plugin finds the server through its discovery file; without a key it does nothing", LIMIT, async () => {
  environment({ MEMORY_DB_PATH: join(dataDir, "memory.db"), MEMORY_API_KEY: key, MEMORY_NAMESPACE: "found" });
  const hooks = await MemoryPlugin(opencode().input);
  await send(hooks, [], "s-found", "remember the discovery file works");
  assert.deepEqual((await stored("found")).map((item) => item.content), ["the discovery file works"]);

  environment({ MEMORY_URL: base });
  const { input, logged } = opencode();
  assert.deepEqual(await MemoryPlugin(input), {});
  assert.match(logged[0], /MEMORY_API_KEY is not set/);
});
