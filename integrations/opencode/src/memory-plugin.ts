/**
 * opencode plugin for the memory server: no runtime dependencies, only the REST hook endpoints.
 *
 * - `chat.message`: a user message starting with "remember" is stored as a memory
 *   (`POST /api/v1/memories/`), and recall for the message starts at once;
 * - `experimental.chat.messages.transform`: the recalled block goes at the tail of the context
 *   (appended to the newest user message), then the injection is reported (`hooks/report/`).
 *   A block stays where it was put, unchanged, on every later call, so the provider's prompt
 *   cache stays valid; a new block is added only when the recalled set (memory and revision
 *   ids) differs from the last injected one. At the next user message, the answer that followed
 *   the injection is handed to `hooks/used/`, which marks the injected memories it used;
 * - `experimental.session.compacting`: the last requests and answers, which the compaction is
 *   about to summarise away, are stored (`hooks/ingest/`);
 * - `tool.execute.after`: the output of a tool on the allow-list is stored (`hooks/ingest/`).
 *
 * It fails open: whatever goes wrong, each hook returns within MEMORY_TIMEOUT seconds and leaves
 * the conversation as it was, with at most one line in opencode's log.
 *
 * Settings (the environment wins over the plugin's options): MEMORY_URL / url, MEMORY_API_KEY /
 * apiKey, MEMORY_NAMESPACE / namespace, MEMORY_BUDGET / budget, MEMORY_TIMEOUT / timeout,
 * MEMORY_TOOLS / tools. See README.md.
 *
 * This module exports the plugin function alone: opencode calls every export of a plugin module.
 */

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Hooks, Plugin, PluginInput, PluginOptions } from "@opencode-ai/plugin";

// opencode's message part, as its hooks hand it over.
type Part = Parameters<NonNullable<Hooks["chat.message"]>>[1]["parts"][number];

const HARNESS = "opencode";
const DEFAULT_URL = "http://127.0.0.1:8000";
const DEFAULT_TIMEOUT = 2;
const TIMEOUT_MAX = 30;
// The server's bounds: queries up to 2000 characters, titles up to 300, session ids up to 200.
const QUERY_MAX = 2000;
const TITLE_MAX = 120;
const SESSION_MAX = 200;
// What a capture keeps, as the Claude Code hook does.
const TURNS_KEPT = 6;
const REQUEST_MAX = 600;
const ANSWER_MAX = 1200;
const CAPTURE_MAX = 8000;
// hooks/used/ reads at most this much of an answer; its end carries the conclusion.
const USED_ANSWER_MAX = 50000;
// Per-session memory of the plugin, bounded so that a long-running opencode does not grow.
const SESSIONS_KEPT = 100;
const MESSAGES_KEPT = 200;
const REMEMBER = /^\s*remember\b[\s:,.-]*(?:that\s+)?/i;
// Text wrapped around turns that is not the conversation itself (and our own block).
const WRAPPED = /<(memory-context|system-reminder)>[\s\S]*?<\/\1>/gi;

type Message = { info: { id: string; sessionID: string; role: string }; parts: Part[] };
type Hit = { memory_id: number; revision_id: number };
type Recalled = { query: string; block: string; hits: Hit[] };
type Settings = {
  url: string | undefined;
  key: string;
  namespace: string | undefined;
  budget: number | undefined;
  timeout: number;
  tools: Set<string>;
};

class Failed extends Error {}

/** The plugin: reads its settings once, then answers opencode's hooks. */
export const MemoryPlugin: Plugin = async (input: PluginInput, options?: PluginOptions): Promise<Hooks> => {
  const log = logger(input);
  const settings = readSettings(process.env, options ?? {}, log);
  if (settings === undefined) return {};
  const memory = new Memory(settings, log);
  const sessions = new Map<string, Session>();
  const session = (id: string): Session => {
    let found = sessions.get(id);
    if (found === undefined) {
      found = new Session();
      sessions.set(id, found);
      if (sessions.size > SESSIONS_KEPT) sessions.delete(sessions.keys().next().value as string);
    }
    return found;
  };

  return {
    "chat.message": async (_input, output) => {
      const text = plainText(output.parts);
      const sessionID = output.message.sessionID;
      const remembered = REMEMBER.exec(text);
      if (remembered && text.slice(remembered[0].length).trim()) {
        await memory.failOpen("remember", (deadline) =>
          memory.post("/api/v1/memories/", {
            content: text.slice(remembered[0].length).trim(), tags: [HARNESS],
            source: `opencode session ${sessionID}`.slice(0, 500), ...memory.where(),
          }, deadline));
      }
      // Recall starts now, beside opencode's own work; the context hook picks the answer up.
      session(sessionID).recall(output.message.id, text, memory, sessionID);
    },

    "experimental.chat.messages.transform": async (_input, output) => {
      const messages = output.messages as Message[];
      const last = [...messages].reverse().find((message) => message.info.role === "user");
      if (last === undefined) return;
      const state = session(last.info.sessionID);
      await state.decide(last, messages, memory);
      for (const message of messages) state.place(message);
    },

    "experimental.session.compacting": async (hook) => {
      await memory.failOpen("compacting", async (deadline) => {
        const found = await within(deadline, input.client.session.messages({ path: { id: hook.sessionID } }));
        if (!Array.isArray(found.data)) throw new Failed("opencode did not list the session's messages");
        const turns = readTurns(found.data as Message[]);
        if (turns.length === 0) return;
        const [title, content] = capture(hook.sessionID, turns);
        await memory.post("/api/v1/hooks/ingest/", {
          content, title, tags: [HARNESS], harness: HARNESS, hook: "session.compacting",
          session: hook.sessionID.slice(0, SESSION_MAX), ...memory.where(),
        }, deadline);
      });
    },

    "tool.execute.after": async (tool, output) => {
      if (!settings.tools.has(tool.tool) || typeof output.output !== "string" || !output.output.trim()) return;
      await memory.failOpen("tool capture", (deadline) =>
        memory.post("/api/v1/hooks/ingest/", {
          content: cut(`opencode tool ${tool.tool}: ${output.title || ""}\n${output.output}`, CAPTURE_MAX, false),
          title: cut(`opencode ${tool.tool}: ${output.title || tool.callID}`, TITLE_MAX),
          tags: [HARNESS, `tool:${tool.tool}`.replace(/[^\w.:/+-]/g, "-").slice(0, 64)],
          harness: HARNESS, hook: "tool.execute.after", session: tool.sessionID.slice(0, SESSION_MAX),
          ...memory.where(),
        }, deadline));
    },
  };
};

/** What the plugin knows about one opencode session. */
class Session {
  // Blocks by the user message they were appended to; each goes back there on every call.
  private blocks = new Map<string, string>();
  private recalls = new Map<string, Promise<Recalled | undefined>>();
  private decided = new Set<string>();
  private lastSet: string | undefined;
  private lastMessage: string | undefined;
  // The last reported injection, until the answer that followed it is handed over.
  private pending: { injection: number; message: string } | undefined;

  /** Start recall for a user message (once per message); the answer waits for `decide`. */
  recall(messageID: string, text: string, memory: Memory, sessionID: string): Promise<Recalled | undefined> {
    let found = this.recalls.get(messageID);
    if (found === undefined) {
      found = recallFor(text, memory, sessionID);
      remember(this.recalls, messageID, found);
    }
    return found;
  }

  /** For a new user message: hand over the answer to the last injection, and inject a block for this one. */
  async decide(last: Message, messages: Message[], memory: Memory): Promise<void> {
    if (this.decided.has(last.info.id)) return;
    remember(this.decided, last.info.id);
    await Promise.all([this.handOver(messages, memory), this.inject(last, messages, memory)]);
  }

  /** Send the assistant's text that followed the last injected message to `hooks/used/`, once. */
  async handOver(messages: Message[], memory: Memory): Promise<void> {
    const pending = this.pending;
    this.pending = undefined; // the next injection sets its own, even while this one is being sent
    if (pending === undefined) return;
    const at = messages.findIndex((message) => message.info.id === pending.message);
    if (at < 0) return; // compacted away
    const said: string[] = [];
    for (const message of messages.slice(at + 1)) {
      if (message.info.role === "user") break;
      if (message.info.role === "assistant") said.push(plainText(message.parts));
    }
    const answer = said.filter(Boolean).join("\n");
    if (!answer) return;
    await memory.failOpen("used", (deadline) =>
      memory.post("/api/v1/hooks/used/", {
        injection: pending.injection, answer: answer.slice(-USED_ANSWER_MAX),
      }, deadline));
  }

  /** Inject a block for the newest user message unless it recalls the set last injected; report it. */
  async inject(last: Message, messages: Message[], memory: Memory): Promise<void> {
    const started = memory.deadline();
    const recalled = await this.recall(last.info.id, plainText(last.parts), memory, last.info.sessionID);
    if (!recalled || !recalled.block) return;
    // A compaction removed the message that carried the last block: the model no longer sees it.
    if (!messages.some((message) => message.info.id === this.lastMessage)) this.lastSet = undefined;
    const set = recalled.hits.map((hit) => `${hit.memory_id}:${hit.revision_id}`).sort().join(",");
    if (set === this.lastSet) return;
    this.lastSet = set;
    this.lastMessage = last.info.id;
    remember(this.blocks, last.info.id, recalled.block);
    this.place(last);
    const report = await memory.failOpen("report", (deadline) =>
      memory.post("/api/v1/hooks/report/", {
        harness: HARNESS, hook: "chat.messages.transform", query: recalled.query,
        session: last.info.sessionID.slice(0, SESSION_MAX), characters: recalled.block.length,
        memories: recalled.hits.map((hit) => ({ memory_id: hit.memory_id, revision_id: hit.revision_id })),
      }, deadline), started);
    if (typeof report?.id === "number") this.pending = { injection: report.id, message: last.info.id };
  }

  /** Append this message's block as its last part, unless it is there already. */
  place(message: Message): void {
    const block = this.blocks.get(message.info.id);
    const id = `prt_memory_${message.info.id}`;
    if (block === undefined || message.parts.some((part) => part.id === id)) return;
    message.parts.push({
      id, sessionID: message.info.sessionID, messageID: message.info.id, type: "text", text: block, synthetic: true,
    });
  }
}

function recallFor(text: string, memory: Memory, sessionID: string): Promise<Recalled | undefined> {
  const query = text.trim().slice(0, QUERY_MAX);
  if (!query) return Promise.resolve(undefined);
  return memory.failOpen("recall", async (deadline) => {
    const answer = await memory.post("/api/v1/hooks/recall/", {
      query, harness: HARNESS, hook: "chat.messages.transform", session: sessionID.slice(0, SESSION_MAX),
      ...memory.where(), ...(memory.settings.budget === undefined ? {} : { budget: memory.settings.budget }),
    }, deadline);
    const block = typeof answer.block === "string" ? answer.block : "";
    const hits = Array.isArray(answer.hits) ? (answer.hits as Hit[]) : [];
    return { query, block, hits };
  });
}

/** The HTTP side: JSON POSTs to the server, each hook call within one deadline, failures logged and dropped. */
class Memory {
  constructor(readonly settings: Settings, private log: (message: string) => void) {}

  deadline(): number {
    return Date.now() + this.settings.timeout * 1000;
  }

  where(): { namespace?: string } {
    return this.settings.namespace === undefined ? {} : { namespace: this.settings.namespace };
  }

  /** Run `work` with a deadline; on any failure log one line and answer undefined. */
  async failOpen<T>(what: string, work: (deadline: number) => Promise<T>, deadline = this.deadline()): Promise<T | undefined> {
    try {
      return await work(deadline);
    } catch (error) {
      this.log(`${what}: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    }
  }

  async post(path: string, payload: object, deadline: number): Promise<Record<string, unknown>> {
    const left = deadline - Date.now();
    if (left <= 50) throw new Failed(`no time left for ${path}`);
    const url = (this.settings.url ?? discoveredUrl(process.env) ?? DEFAULT_URL).replace(/\/+$/, "");
    let response: Response;
    try {
      response = await fetch(url + path, {
        method: "POST", body: JSON.stringify(payload), signal: AbortSignal.timeout(left),
        headers: {
          Authorization: `Bearer ${this.settings.key}`, "Content-Type": "application/json",
          Accept: "application/json", "User-Agent": "memory-opencode-plugin/1",
        },
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      throw new Failed(`${path}: ${cause ?? (error instanceof Error ? error.message : String(error))}`);
    }
    const text = await within(deadline, response.text());
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      throw new Failed(`${path}: HTTP ${response.status}, not JSON`);
    }
    if (!response.ok) {
      const message = (answer as { error?: { message?: string } })?.error?.message ?? "";
      throw new Failed(`${path}: HTTP ${response.status} ${message}`.trim());
    }
    return answer as Record<string, unknown>;
  }
}

/** Settings from the environment, else the plugin's options; undefined (the plugin does nothing) without a key. */
function readSettings(env: NodeJS.ProcessEnv, options: PluginOptions, log: (message: string) => void): Settings | undefined {
  const pick = (name: string, option: string): string | undefined => {
    const fromEnv = (env[name] ?? "").trim();
    if (fromEnv) return fromEnv;
    const value = options[option];
    if (Array.isArray(value)) return value.join(",");
    return typeof value === "string" || typeof value === "number" ? String(value).trim() || undefined : undefined;
  };
  const number = (name: string, option: string): number | undefined => {
    const value = pick(name, option);
    if (value === undefined) return undefined;
    const parsed = Number(value);
    if (Number.isFinite(parsed)) return parsed;
    log(`${name}=${JSON.stringify(value)} is not a number; left at its default`);
    return undefined;
  };
  const key = pick("MEMORY_API_KEY", "apiKey");
  if (!key) {
    log("MEMORY_API_KEY is not set (nor the apiKey option): the memory plugin does nothing");
    return undefined;
  }
  const url = pick("MEMORY_URL", "url");
  if (url !== undefined && !/^https?:\/\/[^/]+/i.test(url)) {
    log(`MEMORY_URL=${JSON.stringify(url)} is not an http(s) URL: the memory plugin does nothing`);
    return undefined;
  }
  const budget = number("MEMORY_BUDGET", "budget");
  const timeout = number("MEMORY_TIMEOUT", "timeout") ?? DEFAULT_TIMEOUT;
  return {
    url, key, namespace: pick("MEMORY_NAMESPACE", "namespace"),
    budget: budget === undefined ? undefined : Math.round(budget),
    timeout: Math.min(Math.max(timeout, 0.1), TIMEOUT_MAX),
    tools: new Set((pick("MEMORY_TOOLS", "tools") ?? "").split(",").map((name) => name.trim()).filter(Boolean)),
  };
}

/** The URL a running server wrote to its discovery file, or undefined when there is none or its server is gone. */
function discoveredUrl(env: NodeJS.ProcessEnv): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url));
  const path = env.MEMORY_DISCOVERY_FILE
    || (env.MEMORY_DB_PATH ? env.MEMORY_DB_PATH + ".server.json" : join(here, "..", "..", "..", "data", "memory.db.server.json"));
  let found: { pid?: unknown; url?: unknown };
  try {
    found = JSON.parse(readFileSync(path, "utf-8"));
  } catch {
    return undefined;
  }
  if (typeof found.url !== "string" || typeof found.pid !== "number") return undefined;
  try {
    process.kill(found.pid, 0); // signal 0 only asks whether the process exists
  } catch (error) {
    if ((error as { code?: string }).code !== "EPERM") return undefined; // a killed server's stale file
  }
  return found.url;
}

/** The text of a message: its text parts that opencode or a plugin did not add, less wrapped blocks. */
function plainText(parts: Part[]): string {
  return parts
    .filter((part) => part.type === "text" && !part.synthetic && !part.ignored)
    .map((part) => (part.type === "text" ? part.text : ""))
    .join("\n")
    .replace(WRAPPED, " ")
    .trim();
}

/** The (request, answer) pairs of a conversation, oldest first: each user message and the last text answering it. */
function readTurns(messages: Message[]): Array<[string, string]> {
  const turns: Array<[string, string]> = [];
  for (const message of messages) {
    const text = plainText(message.parts);
    if (!text) continue;
    if (message.info.role === "user") turns.push([text, ""]);
    else if (message.info.role === "assistant" && turns.length > 0) turns[turns.length - 1][1] = text;
  }
  return turns;
}

/** The (title, text) to store for these turns: the last few, each bounded, within CAPTURE_MAX. */
function capture(sessionID: string, turns: Array<[string, string]>): [string, string] {
  const kept = turns.slice(-TURNS_KEPT);
  const parts = [`opencode session ${sessionID}, before compaction: the last requests and answers.`];
  for (const [request, answer] of kept) {
    parts.push("Request: " + cut(request, REQUEST_MAX));
    if (answer) parts.push("Answer: " + cut(answer, ANSWER_MAX));
  }
  while (parts.join("\n").length > CAPTURE_MAX && parts.length > 2) parts.splice(1, 1); // the oldest first
  return [cut(`opencode: ${kept[kept.length - 1][0]}`, TITLE_MAX), parts.join("\n").slice(0, CAPTURE_MAX)];
}

function cut(text: string, size: number, squeeze = true): string {
  const plain = squeeze ? text.split(/\s+/).join(" ").trim() : text.trim();
  return plain.length <= size ? plain : plain.slice(0, size - 1).trimEnd() + "…";
}

/** Keep `key` (with `value` for a map) in a collection bounded to MESSAGES_KEPT, dropping the oldest. */
function remember<V>(kept: Map<string, V> | Set<string>, key: string, value?: V): void {
  if (kept instanceof Map) kept.set(key, value as V);
  else kept.add(key);
  if (kept.size > MESSAGES_KEPT) kept.delete(kept.keys().next().value as string);
}

/** Wait for `work`, but not past the deadline. */
async function within<T>(deadline: number, work: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Failed("timed out")), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** One line in opencode's log (`opencode --print-logs`), never an error of its own. */
function logger(input: PluginInput): (message: string) => void {
  return (message) => {
    try {
      void input.client.app.log({ body: { service: "memory", level: "warn", message: `memory plugin: ${message}` } })
        .catch(() => undefined);
    } catch {
      // no log then
    }
  };
}
