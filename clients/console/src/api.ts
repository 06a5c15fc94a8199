// The console's calls to the daemon's memory API (same origin). Under the production profile
// the operator's API key, kept in sessionStorage only, goes with every request as X-API-Key;
// a 401 forgets it and asks again.

import { readServerSentEvents } from "@cairn/client";

export type Scope = "repo" | "user" | "global" | "task";
export type Status = "active" | "stale" | "review";

export interface Memory {
  id: string;
  content: string;
  scope: Scope;
  status: Status;
  repo: string | null;
  tags: string[];
  source: string | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
  lastRecalledAt?: string | null;
  recallCount?: number;
  archivedAt?: string | null;
}

export interface MemoryList {
  memories: Memory[];
  total: number;
  limit: number;
  offset: number;
}

export interface ConflictSide {
  label: string;
  memoryIds: string[];
}

export interface Conflict {
  id: string;
  subject: string;
  repo: string | null;
  sides: ConflictSide[];
  memoryIds: string[];
  memories: Memory[];
  reason: string;
  status: "open" | "resolved";
  detectedAt: string;
  resolution: unknown;
  resolvedAt: string | null;
}

export interface AuditEntry {
  id: string;
  at: string;
  actor: string;
  action: string;
  memoryId: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
}

export interface SyncReport {
  startedAt: string;
  finishedAt: string;
  status: "ok" | "error";
  imported: number;
  updated: number;
  unchanged: number;
  archived: number;
  skipped: number;
  error?: string | null;
}

export interface Connector {
  id: string;
  kind: "folder" | "git";
  name: string;
  path: string;
  scope: Scope;
  repo: string | null;
  maxCommits: number;
  createdAt: string;
  lastSync?: SyncReport | null;
}

export interface ConnectorHealth {
  id: string;
  status: "never_synced" | "syncing" | "ok" | "error";
  lastSyncAt?: string | null;
  lastSync?: SyncReport | null;
  progress?: { done: number; total: number } | null;
  memories: number;
}

export interface DreamReport {
  dryRun: boolean;
  startedAt: string;
  finishedAt: string;
  examined: number;
  merged: { keptId: string; mergedIds: string[] }[];
  staled: string[];
  conflicts: Conflict[];
}

export interface GuardFinding {
  code: string;
  message: string;
  memoryId?: string | null;
  outcomeId?: string | null;
}

export interface GuardResult {
  allowed: boolean;
  warnings: GuardFinding[];
  blockers: GuardFinding[];
}

export interface Health {
  status: string;
  memoryCount: number;
  uptime: number;
  version: string;
  retrieval: string;
  embeddingsPending: number;
}

export interface Conversation {
  id: string;
  agentId: string;
  channel?: unknown;
  context: unknown;
  lifecycle: string;
  createdAt: string;
  updatedAt: string;
}

export interface RuntimeEvent {
  id: string;
  conversationId: string;
  offset: number;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

export interface ReplayMessage {
  id: string;
  role: string;
  text: string;
  offset: number;
  aborted: boolean;
  intermediate: boolean;
  reason?: string | null;
}

export interface ReplayResult {
  conversation: Conversation;
  events: RuntimeEvent[];
  messages: ReplayMessage[];
  openPrompts: { promptId: string; widgetKind: string; input: unknown; offset: number }[];
  snapshot: Record<string, unknown>;
  nextAfterOffset?: number | null;
}

/** A failed call: the daemon's error envelope, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

const KEY_ITEM = "cairn.apiKey";

/** The API key of this browser tab's session, if the operator signed in. */
export function apiKey(): string | null {
  try {
    return sessionStorage.getItem(KEY_ITEM);
  } catch {
    return null;
  }
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
  for (const listener of listeners) listener();
}

const listeners = new Set<() => void>();

/** Called when the key is set or forgotten (a sign-in, a sign-out, a 401). */
export function onAuthChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The headers every call carries: the key when there is one. */
export function authHeaders(): Record<string, string> {
  const key = apiKey();
  return key ? { "X-API-Key": key } : {};
}

type Query = Record<string, string | number | boolean | null | undefined>;

export function withQuery(path: string, query?: Query): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** Calls the daemon and returns the parsed JSON body; throws `ApiError` on failure. */
export async function call<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response: Response;
  try {
    response = await fetch(withQuery(path, query), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
    });
  } catch (error) {
    throw new ApiError(`cannot reach the daemon (${(error as Error).message})`, 0, "NETWORK");
  }
  return parse<T>(response);
}

export async function parse<T>(response: Response): Promise<T> {
  const text = await response.text();
  let json: unknown = undefined;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const envelope = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (response.status === 401 && apiKey() !== null) setApiKey(null);
    throw new ApiError(
      envelope?.message ?? `the daemon answered ${response.status}`,
      response.status,
      envelope?.code ?? "HTTP_" + response.status,
    );
  }
  return json as T;
}

/**
 * Reads a conversation's Server-Sent Events with `fetch`, so the API key goes in a header
 * (an `EventSource` cannot send one) and never in a URL. Reconnects after the last offset it
 * delivered, so no event is shown twice or lost. Returns a function that stops it.
 */
export function streamConversation(
  conversationId: string,
  afterOffset: number | undefined,
  onEvent: (event: RuntimeEvent) => void,
  onState: (state: "open" | "reconnecting" | "closed", error?: string) => void,
): () => void {
  const controller = new AbortController();
  let last = afterOffset;
  const path = `/api/runtime/conversations/${encodeURIComponent(conversationId)}/events/stream`;
  const run = async () => {
    while (!controller.signal.aborted) {
      try {
        const response = await fetch(withQuery(path, { afterOffset: last }), {
          headers: { Accept: "text/event-stream", ...authHeaders() },
          signal: controller.signal,
          credentials: "omit",
        });
        if (!response.ok || !response.body) {
          await parse(response);
          throw new ApiError(`the stream answered ${response.status}`, response.status, "STREAM");
        }
        onState("open");
        for await (const message of readServerSentEvents(response.body)) {
          const event = JSON.parse(message.data) as RuntimeEvent;
          if (last !== undefined && event.offset <= last) continue;
          last = event.offset;
          onEvent(event);
        }
      } catch (error) {
        if (controller.signal.aborted) break;
        if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429) {
          onState("closed", error.message);
          return;
        }
        onState("reconnecting", (error as Error).message);
      }
      if (!controller.signal.aborted) {
        onState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
    onState("closed");
  };
  void run();
  return () => controller.abort();
}

export function formatTime(value: string | null | undefined): string {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toLocaleString();
}
