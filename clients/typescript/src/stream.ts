// The event stream behind `streamEvents`: an `EventSource` on the conversation's SSE route,
// reopened after the last offset delivered whenever the connection drops, so every event is
// delivered once and in order.

import { ServiceApiError } from "./errors.js";
import type {
  EventSourceConstructor,
  EventSourceFactory,
  EventSourceFactoryOptions,
  EventSourceLike,
  StreamEventsHandlers,
} from "./client.js";
import { readServerSentEvents } from "./sse.js";
import type { RuntimeEvent } from "./types.js";

export interface EventStreamSpec {
  /** The stream route, without a query. */
  url: string;
  afterOffset: number | undefined;
  headers: Headers;
  withCredentials: boolean;
  init: Record<string, unknown>;
  factory: EventSourceFactory | undefined;
  constructor: EventSourceConstructor | undefined;
  /** Reads the stream when neither a factory nor an `EventSource` is at hand (Node without a polyfill). */
  fetch: typeof fetch;
  handlers: StreamEventsHandlers;
  /** Asks the runtime, over fetch, why a connection failed: rejects with a `ServiceApiError`. */
  diagnose: (lastOffset: number | undefined) => Promise<void>;
}

/** The first wait before reopening a dropped stream, doubled on every failure up to the most. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5000;

/** A conversation token (`cvt_…`) in `Authorization: Bearer`, which the daemon also takes as `?token=`. */
const CONVERSATION_TOKEN = /^Bearer\s+(cvt_\S+)$/i;

export function openEventStream(spec: EventStreamSpec): () => void {
  const { handlers } = spec;
  // No `EventSource` here (Node 20, a worker): the stream is read over `fetch`, which sends
  // the headers as a factory's source would.
  const factory = spec.factory ?? (spec.constructor ? undefined : fetchEventSource(spec.fetch));
  let lastOffset = spec.afterOffset;
  let source: EventSourceLike | undefined;
  let stopped = false;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let retryDelay = RETRY_FIRST_MS;
  // Connections are numbered so a late callback of a closed one is ignored.
  let generation = 0;

  const report = (error: unknown) => {
    try {
      handlers.onError?.(error);
    } catch {
      // An error handler that throws has nowhere further to report to.
    }
  };

  const open = () => {
    if (stopped) return;
    const current = ++generation;
    let opened = false;
    const url = streamUrl(spec, lastOffset);
    const headers: Record<string, string> = {};
    spec.headers.forEach((value, name) => (headers[name] = value));
    try {
      source = factory
        ? factory(url, { ...spec.init, withCredentials: spec.withCredentials, headers })
        : new spec.constructor!(url, { ...spec.init, withCredentials: spec.withCredentials });
    } catch (error) {
      stopped = true;
      report(error);
      return;
    }
    source.onopen = () => {
      if (current !== generation) return;
      opened = true;
      retryDelay = RETRY_FIRST_MS;
    };
    source.onmessage = (message: MessageEvent) => {
      if (current !== generation || stopped) return;
      let event: RuntimeEvent;
      try {
        event = JSON.parse(String(message.data)) as RuntimeEvent;
      } catch (error) {
        report(new Error(`the event stream sent something that is not JSON: ${String(error)}`));
        return;
      }
      if (typeof event?.offset !== "number") return;
      // Never an offset twice, never one older than what was delivered.
      if (lastOffset !== undefined && event.offset <= lastOffset) return;
      lastOffset = event.offset;
      try {
        handlers.onEvent(event);
      } catch (error) {
        report(error);
      }
    };
    source.onerror = (event: unknown) => {
      if (current !== generation || stopped) return;
      // Reconnect ourselves, after the last offset delivered: an `EventSource` reconnecting
      // on its own would repeat the first URL's `afterOffset`.
      generation++;
      source?.close();
      source = undefined;
      void recover(opened, event);
    };
  };

  const recover = async (wasOpen: boolean, event: unknown) => {
    try {
      await spec.diagnose(lastOffset);
    } catch (error) {
      if (stopped) return;
      if (error instanceof ServiceApiError && isFinal(error.status)) {
        stopped = true;
        report(error);
        return;
      }
    }
    if (stopped) return;
    if (!wasOpen) {
      const status = (event as { code?: unknown } | undefined)?.code;
      report(new Error(`the event stream could not connect${typeof status === "number" ? ` (status ${status})` : ""}; retrying`));
    }
    retryTimer = setTimeout(open, retryDelay);
    retryDelay = Math.min(retryDelay * 2, RETRY_MAX_MS);
  };

  open();
  return () => {
    stopped = true;
    generation++;
    if (retryTimer !== undefined) clearTimeout(retryTimer);
    source?.close();
    source = undefined;
  };
}

/** 4xx answers that another try would get again: everything but time-outs and rate limits. */
function isFinal(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

function streamUrl(spec: EventStreamSpec, afterOffset: number | undefined): string {
  const params = new URLSearchParams();
  if (afterOffset !== undefined) params.set("afterOffset", String(afterOffset));
  // A plain `EventSource` cannot send headers: a conversation token goes in the query, which
  // the daemon moves back into `Authorization`. Factories get the headers instead.
  if (!spec.factory && spec.constructor) {
    const token = CONVERSATION_TOKEN.exec(spec.headers.get("authorization") ?? "")?.[1];
    if (token) params.set("token", token);
  }
  const query = params.toString();
  return query ? `${spec.url}?${query}` : spec.url;
}

/**
 * An `EventSource` made of `fetch` and the package's SSE reader: one connection, no retries of
 * its own (the stream above reconnects after the last offset), `onerror` when it fails or ends.
 */
export function fetchEventSource(fetchImpl: typeof fetch): EventSourceFactory {
  return (url: string, options: EventSourceFactoryOptions): EventSourceLike => {
    const abort = new AbortController();
    const source: EventSourceLike & { readyState: number } = {
      readyState: 0,
      onopen: null,
      onmessage: null,
      onerror: null,
      close() {
        source.readyState = 2;
        abort.abort();
      },
    };
    const fail = (event: unknown) => {
      if (source.readyState === 2) return;
      source.readyState = 2;
      abort.abort();
      source.onerror?.(event);
    };
    const headers = { ...options.headers, accept: "text/event-stream" };
    const init: RequestInit = { headers, signal: abort.signal, cache: "no-store" };
    if (options.withCredentials) init.credentials = "include";
    void (async () => {
      try {
        const response = await fetchImpl(url, init);
        const type = response.headers.get("content-type") ?? "";
        if (!response.ok || !response.body || !type.includes("text/event-stream")) {
          await response.body?.cancel().catch(() => {});
          fail({ type: "error", code: response.status });
          return;
        }
        source.readyState = 1;
        source.onopen?.({ type: "open" });
        for await (const frame of readServerSentEvents(response.body)) {
          if (source.readyState === 2) return;
          if (frame.event !== "message") continue;
          const message = { type: "message", data: frame.data, lastEventId: frame.id ?? "" };
          source.onmessage?.(message as MessageEvent);
        }
        fail({ type: "error" });
      } catch (error) {
        fail({ type: "error", error });
      }
    })();
    return source;
  };
}
