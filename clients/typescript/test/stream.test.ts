// streamEvents against the real daemon: every event once and in order, with the platform's
// EventSource, an injected constructor, a factory or (none of them) fetch; a stop function; resuming after the
// daemon drops the connection (a restart on the same port and data directory).

import { rmSync } from "node:fs";
import { EventSource } from "eventsource";
import { afterAll, describe, expect, inject, test } from "vitest";
import {
  createServiceClient,
  ServiceApiError,
  type EventSourceFactoryOptions,
  type RuntimeEvent,
  type ServiceClient,
} from "../src/index.js";
import { startDaemon, type Daemon } from "./support/daemon.js";

const daemonUrl = inject("daemonUrl");

/** Collects a stream's events and errors, and waits for conditions on them. */
function collector() {
  const events: RuntimeEvent[] = [];
  const errors: unknown[] = [];
  return {
    events,
    errors,
    handlers: { onEvent: (event: RuntimeEvent) => events.push(event), onError: (error: unknown) => errors.push(error) },
    async until(condition: () => boolean, what: string, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!condition()) {
        if (Date.now() > deadline) {
          throw new Error(`timed out waiting for ${what}; got offsets ${events.map((e) => e.offset).join(",")}, errors ${errors.map(String).join("; ")}`);
        }
        await new Promise((done) => setTimeout(done, 20));
      }
    },
  };
}

const offsets = (events: RuntimeEvent[]) => events.map((event) => event.offset);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, index) => from + index);

async function lastOffset(client: ServiceClient, conversationId: string): Promise<number> {
  const { events } = await client.listEvents(conversationId);
  return events.at(-1)!.offset;
}

describe("streamEvents", () => {
  test("delivers the log and then each new event, once and in order (injected EventSource)", async () => {
    const client = createServiceClient({ baseUrl: `${daemonUrl}/api/runtime`, EventSource });
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const seen = collector();
    const stop = client.streamEvents(conversation.id, seen.handlers);
    try {
      const before = await lastOffset(client, conversation.id);
      await seen.until(() => seen.events.length === before + 1, "the log so far");
      await client.sendMessage(conversation.id, "I'd like to book a demo");
      const after = await lastOffset(client, conversation.id);
      await seen.until(() => seen.events.at(-1)?.offset === after, "the new turn");
      expect(offsets(seen.events)).toEqual(range(0, after));
      const { events } = await client.listEvents(conversation.id);
      expect(seen.events).toEqual(events);
      expect(seen.errors).toEqual([]);
    } finally {
      stop();
    }
  });

  test("starts after afterOffset, and stops delivering once stopped", async () => {
    const client = createServiceClient({ baseUrl: `${daemonUrl}/api/runtime`, EventSource });
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const seen = collector();
    const stop = client.streamEvents(conversation.id, seen.handlers, { afterOffset: 3 });
    const end = await lastOffset(client, conversation.id);
    await seen.until(() => seen.events.at(-1)?.offset === end, "events after 3");
    expect(offsets(seen.events)).toEqual(range(4, end));
    stop();
    await client.sendMessage(conversation.id, "thanks");
    await new Promise((done) => setTimeout(done, 300));
    expect(seen.events.at(-1)!.offset).toBe(end);
  });

  test("uses the platform's EventSource when none is given", async () => {
    const platform = globalThis as { EventSource?: unknown };
    const previous = platform.EventSource;
    platform.EventSource = EventSource;
    try {
      const client = createServiceClient({ baseUrl: `${daemonUrl}/api/runtime` });
      const { conversation } = await client.createConversation();
      const seen = collector();
      const stop = client.streamEvents(conversation.id, seen.handlers);
      await seen.until(() => seen.events.length === 1, "conversation.created");
      stop();
      expect(seen.events[0]!.type).toBe("conversation.created");
    } finally {
      platform.EventSource = previous;
    }
  });

  test("without any EventSource (Node 20) it reads the stream over fetch", async () => {
    expect((globalThis as { EventSource?: unknown }).EventSource).toBeUndefined();
    const requests: { url: string; accept: string | null }[] = [];
    const client = createServiceClient({
      baseUrl: `${daemonUrl}/api/runtime`,
      fetch: (input, init) => {
        requests.push({ url: String(input), accept: new Headers(init?.headers).get("accept") });
        return fetch(input, init);
      },
    });
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const seen = collector();
    const stop = client.streamEvents(conversation.id, seen.handlers);
    try {
      const before = await lastOffset(client, conversation.id);
      await seen.until(() => seen.events.at(-1)?.offset === before, "the log so far");
      await client.sendMessage(conversation.id, "I'd like to book a demo");
      const after = await lastOffset(client, conversation.id);
      await seen.until(() => seen.events.at(-1)?.offset === after, "the new turn");
      expect(offsets(seen.events)).toEqual(range(0, after));
      expect(seen.events).toEqual((await client.listEvents(conversation.id)).events);
      expect(seen.errors).toEqual([]);
      const stream = requests.find((request) => request.url.includes("/events/stream"));
      expect(stream?.accept).toBe("text/event-stream");
    } finally {
      stop();
    }
    // Stopped means stopped: the connection is closed and nothing more arrives.
    const delivered = seen.events.length;
    await client.sendMessage(conversation.id, "thanks");
    await new Promise((done) => setTimeout(done, 300));
    expect(seen.events.length).toBe(delivered);
  });

  test("a factory gets the shared, event-source and per-stream headers and withCredentials", async () => {
    const calls: { url: string; options: EventSourceFactoryOptions }[] = [];
    const client = createServiceClient({
      baseUrl: `${daemonUrl}/api/runtime`,
      headers: { "x-shared": "1" },
      credentials: "include",
      eventSourceOptions: { headers: { "x-stream": "2" } },
      createEventSource: (url, options) => {
        calls.push({ url, options });
        return new EventSource(url, {
          withCredentials: options.withCredentials,
          fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, ...options.headers } }),
        });
      },
    });
    const { conversation } = await client.createConversation();
    const seen = collector();
    const stop = client.streamEvents(conversation.id, seen.handlers, { headers: { "x-call": "3" } });
    await seen.until(() => seen.events.length === 1, "conversation.created");
    stop();
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe(`${daemonUrl}/api/runtime/conversations/${conversation.id}/events/stream`);
    expect(calls[0]!.options.headers).toEqual({ "x-shared": "1", "x-stream": "2", "x-call": "3" });
    expect(calls[0]!.options.withCredentials).toBe(true);

    const overridden: boolean[] = [];
    const stopAgain = client.streamEvents(conversation.id, { onEvent: () => {} }, {
      withCredentials: false,
      createEventSource: (url, options) => {
        overridden.push(options.withCredentials);
        return new EventSource(url);
      },
    });
    stopAgain();
    expect(overridden).toEqual([false]);
  });

  test("an unknown conversation stops the stream with a ServiceApiError (404)", async () => {
    let opened = 0;
    const client = createServiceClient({
      baseUrl: `${daemonUrl}/api/runtime`,
      createEventSource: (url) => {
        opened++;
        return new EventSource(url);
      },
    });
    const seen = collector();
    const stop = client.streamEvents("conv_nobody", seen.handlers);
    await seen.until(() => seen.errors.some((error) => error instanceof ServiceApiError), "the 404");
    const error = seen.errors.find((candidate) => candidate instanceof ServiceApiError) as ServiceApiError;
    expect(error.status).toBe(404);
    expect(error.message).toBe("conversation `conv_nobody` was not found");
    await new Promise((done) => setTimeout(done, 700));
    expect(opened).toBe(1);
    stop();
  });

  test("an error thrown by onEvent goes to onError and the stream goes on", async () => {
    const client = createServiceClient({ baseUrl: `${daemonUrl}/api/runtime`, EventSource });
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const delivered: number[] = [];
    const errors: unknown[] = [];
    const stop = client.streamEvents(conversation.id, {
      onEvent: (event) => {
        delivered.push(event.offset);
        if (event.offset === 1) throw new Error("the UI failed on offset 1");
      },
      onError: (error) => errors.push(error),
    });
    const end = await lastOffset(client, conversation.id);
    const deadline = Date.now() + 10_000;
    while (delivered.at(-1) !== end && Date.now() < deadline) await new Promise((done) => setTimeout(done, 20));
    stop();
    expect(delivered).toEqual(range(0, end));
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toContain("offset 1");
  });
});

describe("streamEvents across a daemon restart", () => {
  let daemon: Daemon | undefined;
  afterAll(async () => {
    await daemon?.stop();
    // The restarted daemon borrowed the first one's data directory.
    if (daemon) rmSync(daemon.dataDir, { recursive: true, force: true });
  });

  /** A client for `baseUrl` whose stream connections' URLs go into `urls`. */
  type Recording = (baseUrl: string, urls: string[]) => ServiceClient;
  const byFactory: Recording = (baseUrl, urls) =>
    createServiceClient({
      baseUrl,
      createEventSource: (url, options) => {
        urls.push(url);
        return new EventSource(url, { withCredentials: options.withCredentials });
      },
    });
  // No EventSource at all (Node 20): the stream is read over fetch.
  const byFetch: Recording = (baseUrl, urls) =>
    createServiceClient({
      baseUrl,
      fetch: (input, init) => {
        if (String(input).includes("/events/stream")) urls.push(String(input));
        return fetch(input, init);
      },
    });

  test.each([
    ["an EventSource factory", byFactory],
    ["fetch, without an EventSource", byFetch],
  ])("resumes after the last offset it delivered, without repeating or losing one (%s)", async (_, recording) => {
    daemon ??= await startDaemon();
    const { port, dataDir } = daemon;
    const urls: string[] = [];
    const client = recording(daemon.runtimeUrl, urls);
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const seen = collector();
    const stop = client.streamEvents(conversation.id, seen.handlers);
    try {
      const before = await lastOffset(client, conversation.id);
      await seen.until(() => seen.events.at(-1)?.offset === before, "the first turn");

      // The daemon goes away (its shutdown ends the stream) and comes back on the same address.
      await daemon.stop();
      daemon = await startDaemon({ port, dataDir });
      const restarted = createServiceClient({ baseUrl: daemon.runtimeUrl });
      await restarted.sendMessage(conversation.id, "I'd like to book a demo");
      const after = await lastOffset(restarted, conversation.id);
      await seen.until(() => seen.events.at(-1)?.offset === after, "the turn after the restart", 20_000);

      expect(offsets(seen.events)).toEqual(range(0, after));
      expect(urls.length).toBeGreaterThanOrEqual(2);
      expect(urls[0]).not.toContain("afterOffset");
      expect(urls.at(-1)).toBe(`${daemon.runtimeUrl}/conversations/${conversation.id}/events/stream?afterOffset=${before}`);
      const { events } = await restarted.listEvents(conversation.id);
      expect(seen.events).toEqual(events);
      // Failed attempts while the daemon was down are reported as retries, never as the end.
      expect(seen.errors.every((error) => !(error instanceof ServiceApiError))).toBe(true);
    } finally {
      stop();
    }
  });
});
