// Browser authentication against a production-profile daemon: the server side holds API
// keys and mints a conversation token; the browser's client uses only that token, for the
// operations (`Authorization: Bearer cvt_…`) and the event stream (`?token=` for a plain
// EventSource, headers through a factory), and is refused everything else.

import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createServiceClient, ServiceApiError, type RuntimeEvent, type ServiceClient } from "../src/index.js";
import { createKey, startDaemon, type Daemon } from "./support/daemon.js";
import { failure } from "./support/failure.js";

let daemon: Daemon;
let runtimeKey: string;
let tokenKey: string;
/** The server side of the chat widget. */
let server: ServiceClient;

beforeAll(async () => {
  daemon = await startDaemon({ profile: "production" });
  runtimeKey = createKey(daemon.dataDir, "runtime");
  tokenKey = createKey(daemon.dataDir, "write");
  server = createServiceClient({ baseUrl: daemon.runtimeUrl, headers: { "x-api-key": runtimeKey } });
});

afterAll(async () => {
  await daemon?.dispose();
});

/** What the widget's server does for a visitor (docs/clients.md): a conversation and its token. */
async function startChat(): Promise<{ conversationId: string; token: string }> {
  const { conversation } = await server.createConversation({ channel: "web" });
  const response = await fetch(`${daemon.url}/api/conversation-tokens`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": tokenKey },
    body: JSON.stringify({ conversationId: conversation.id, ttlSeconds: 600 }),
  });
  expect(response.status).toBe(201);
  const { token } = (await response.json()) as { token: string };
  return { conversationId: conversation.id, token };
}

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

/** Follows the conversation's event stream while `hello` is sent, until the reply is on it: the events and the errors the stream reported. */
async function streamReply(browser: ServiceClient, conversationId: string) {
  const events: RuntimeEvent[] = [];
  const errors: unknown[] = [];
  const stop = browser.streamEvents(conversationId, { onEvent: (event) => events.push(event), onError: (error) => errors.push(error) });
  try {
    await browser.sendMessage(conversationId, "hello");
    await waitFor(() => events.some((event) => event.data.role === "assistant"), "the reply on the stream");
  } finally {
    stop();
  }
  return { events, errors };
}

describe("a browser with a conversation token", () => {
  test("talks in its conversation and is refused another (403) and everything else", async () => {
    const mine = await startChat();
    const theirs = await startChat();
    const browser = createServiceClient({
      baseUrl: daemon.runtimeUrl,
      headers: { authorization: `Bearer ${mine.token}` },
    });

    const reply = await browser.sendMessage(mine.conversationId, "I'd like to book a demo");
    expect(reply.text).toBe("Happy to set that up. Where can we reach you?");
    const prompt = reply.events.find((event) => event.type === "prompt.opened")!;
    const submitted = await browser.submitWidget(mine.conversationId, {
      promptId: prompt.data.promptId as string,
      widgetKind: "form",
      output: { name: "Ada", email: "ada@example.com" },
    });
    expect(submitted.event.type).toBe("prompt.submitted");
    expect((await browser.replayConversation(mine.conversationId)).messages.at(-1)!.text).toContain("Thanks Ada");

    const other = await failure(browser.sendMessage(theirs.conversationId, "hello"));
    expect(other.status).toBe(403);
    expect(other.code).toBe("FORBIDDEN");
    expect(other.message).toContain(mine.conversationId);
    expect((await failure(browser.getSnapshot(theirs.conversationId))).status).toBe(403);
    expect((await failure(browser.listConversations())).status).toBe(403);
    expect((await failure(browser.createConversation())).status).toBe(403);
    expect((await failure(browser.receiveMessage({ channel: "web", text: "hi", conversationId: mine.conversationId }))).status).toBe(403);

    const anonymous = createServiceClient({ baseUrl: daemon.runtimeUrl });
    const refused = await failure(anonymous.getSnapshot(mine.conversationId));
    expect(refused.status).toBe(401);
    expect(refused.code).toBe("UNAUTHORIZED");
  });

  test("the requestOptions resolver can pick the token by conversation", async () => {
    const first = await startChat();
    const second = await startChat();
    const tokens = new Map([
      [first.conversationId, first.token],
      [second.conversationId, second.token],
    ]);
    const browser = createServiceClient({
      baseUrl: daemon.runtimeUrl,
      requestOptions: ({ conversationId }) =>
        conversationId && tokens.has(conversationId) ? { headers: { authorization: `Bearer ${tokens.get(conversationId)}` } } : undefined,
    });
    expect((await browser.sendMessage(first.conversationId, "hello")).text).toContain("Hi!");
    expect((await browser.sendMessage(second.conversationId, "hello")).text).toContain("Hi!");
    expect((await failure(browser.listConversations())).status).toBe(401);
  });

  test("a plain EventSource carries the token as ?token=, and another conversation's stream ends with 403", async () => {
    const mine = await startChat();
    const theirs = await startChat();
    const urls: string[] = [];
    class RecordingEventSource extends EventSource {
      constructor(url: string | URL, init?: EventSourceInit) {
        urls.push(String(url));
        super(url, init);
      }
    }
    const browser = createServiceClient({
      baseUrl: daemon.runtimeUrl,
      headers: { authorization: `Bearer ${mine.token}` },
      EventSource: RecordingEventSource,
    });
    const { events, errors } = await streamReply(browser, mine.conversationId);
    expect(events.map((event) => event.offset)).toEqual(events.map((_, index) => index));
    expect(urls[0]).toBe(`${daemon.runtimeUrl}/conversations/${mine.conversationId}/events/stream?token=${mine.token}`);
    expect(errors).toEqual([]);

    const refused: unknown[] = [];
    const stopOther = browser.streamEvents(theirs.conversationId, { onEvent: () => {}, onError: (error) => refused.push(error) });
    await waitFor(() => refused.some((error) => error instanceof ServiceApiError), "the refusal");
    stopOther();
    const error = refused.find((candidate) => candidate instanceof ServiceApiError) as ServiceApiError;
    expect(error.status).toBe(403);
    expect(error.code).toBe("FORBIDDEN");
  });

  /** A browser client holding `token` whose stream connections' URLs go into `urls`. */
  type Browser = (token: string, urls: string[]) => ServiceClient;
  const overFetch: Browser = (token, urls) =>
    createServiceClient({
      baseUrl: daemon.runtimeUrl,
      headers: { authorization: `Bearer ${token}` },
      fetch: (input, init) => {
        if (String(input).includes("/events/stream")) urls.push(String(input));
        return fetch(input, init);
      },
    });
  const byFactory: Browser = (token, urls) =>
    createServiceClient({
      baseUrl: daemon.runtimeUrl,
      headers: { authorization: `Bearer ${token}` },
      createEventSource: (url, { headers }) => {
        urls.push(url);
        return new EventSource(url, { fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, ...headers } }) });
      },
    });

  test.each([
    ["fetch, without an EventSource", overFetch],
    ["a factory", byFactory],
  ])("the stream read with %s sends the token as a header and keeps it out of the URL", async (_, browserOf) => {
    const mine = await startChat();
    const urls: string[] = [];
    const browser = browserOf(mine.token, urls);
    const { events, errors } = await streamReply(browser, mine.conversationId);
    expect(events[0]!.type).toBe("conversation.created");
    expect(urls[0]).toBe(`${daemon.runtimeUrl}/conversations/${mine.conversationId}/events/stream`);
    expect(errors).toEqual([]);
  });
});
