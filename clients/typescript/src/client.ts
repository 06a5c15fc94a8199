// `createServiceClient`: the seed's 27 operations over the runtime's HTTP routes
// (docs/runtime.md), with `fetch` and `EventSource` from the platform.

import * as builders from "./builders.js";
import { errorMessage, ServiceApiError } from "./errors.js";
import { readServerSentEvents } from "./sse.js";
import { openEventStream } from "./stream.js";
import type {
  ChannelEventInput,
  ChannelHandoffEventInput,
  ChannelHandoffReviewEventInput,
  ChannelOutputResolutionEventInput,
  CloseConversationInput,
  CompactConversationInput,
  CompactConversationResult,
  ConversationResult,
  CreateRuntimeConversationInput,
  EmitCustomEventInput,
  EmitGeneratedPreambleInput,
  EmitGeneratedPreambleResult,
  EmitIntermediateMessageInput,
  EmitJourneyEventInput,
  EmitJourneyEventResult,
  EventResult,
  EventsResult,
  HandleChannelEventResult,
  LifecycleResult,
  ListConversationsOptions,
  ListConversationsResult,
  ListEventsOptions,
  ListEventsResult,
  MessageChannelEventInput,
  OutboundContactChannelEventInput,
  ProviderObjectChannelEventInput,
  ReplayConversationOptions,
  ReplayResult,
  RequestHandoffInput,
  ResolveChannelOutputInput,
  ResolveChannelOutputResult,
  ResumeConversationInput,
  RuntimeEvent,
  ScheduledChannelEventInput,
  SendMessageOptions,
  SendMessageResult,
  SnapshotResult,
  StartVoiceConversationInput,
  StartVoiceSegmentInput,
  SubmitWidgetInput,
  VoiceStartResult,
  VoiceTurnChannelEventInput,
} from "./types.js";

/** The operation names of request contexts (seed 001). */
export type ServiceOperation =
  | "createConversation"
  | "listConversations"
  | "handleChannelEvent"
  | "receiveMessage"
  | "recordProviderUpdate"
  | "finalizeVoiceTurn"
  | "requestOutboundContact"
  | "submitScheduledEvent"
  | "resolveChannelOutput"
  | "recordChannelOutputResolution"
  | "requestChannelHandoff"
  | "requestChannelHandoffReview"
  | "startVoiceConversation"
  | "startVoiceSegment"
  | "sendMessage"
  | "listEvents"
  | "submitWidget"
  | "emitCustomEvent"
  | "emitJourneyEvent"
  | "emitIntermediateMessage"
  | "emitGeneratedPreamble"
  | "compactConversation"
  | "closeConversation"
  | "requestHandoff"
  | "resumeConversation"
  | "getSnapshot"
  | "replayConversation";

/** What a `requestOptions` resolver receives. */
export interface ServiceRequestContext {
  operation: ServiceOperation;
  method: "GET" | "POST";
  /** The full URL, query included. */
  url: string;
  conversationId?: string;
}

/** Fetch options without `body` and `method`. */
export type ServiceRequestOptions = Omit<RequestInit, "body" | "method">;

export type ServiceRequestOptionsResolver = (
  context: ServiceRequestContext,
) => ServiceRequestOptions | undefined | void | Promise<ServiceRequestOptions | undefined | void>;

/** The part of a browser `EventSource` the client uses. */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((this: any, event: any) => unknown) | null;
  onmessage: ((this: any, event: MessageEvent) => unknown) | null;
  onerror: ((this: any, event: any) => unknown) | null;
  close(): void;
}

/** Event-source init fields (`withCredentials`) plus `headers` for factories that send them. */
export interface ServiceEventSourceOptions {
  withCredentials?: boolean;
  headers?: HeadersInit;
  [field: string]: unknown;
}

/** What `createEventSource` receives: the init fields, `headers` as a plain record. */
export interface EventSourceFactoryOptions {
  withCredentials: boolean;
  headers: Record<string, string>;
  [field: string]: unknown;
}

export type EventSourceConstructor = new (url: string, init?: { withCredentials?: boolean }) => EventSourceLike;
export type EventSourceFactory = (url: string, options: EventSourceFactoryOptions) => EventSourceLike;

export interface ServiceClientOptions {
  /** The handler's base, e.g. `http://127.0.0.1:8787/api/runtime`. */
  baseUrl: string;
  /** Replaces the platform's `fetch`. */
  fetch?: typeof fetch;
  /** Sent with every request, and given to event-source factories that can send headers. */
  headers?: HeadersInit;
  /** `include` also turns on `withCredentials` for event streams unless `streamEvents` says otherwise. */
  credentials?: RequestCredentials;
  /** Fetch options for every request, or a resolver called per request. */
  requestOptions?: ServiceRequestOptions | ServiceRequestOptionsResolver;
  /** The `EventSource` constructor (default: the platform's). */
  EventSource?: EventSourceConstructor;
  /** Makes event sources, for implementations that take options such as headers. */
  createEventSource?: EventSourceFactory;
  /** Init fields for every event source, plus `headers`. */
  eventSourceOptions?: ServiceEventSourceOptions;
  /**
   * How many times a request is sent again after a network error or a 502, 503 or 504
   * (default 3), with growing pauses from 200 ms (the service's `Retry-After` when it gives
   * one). Every POST carries an `Idempotency-Key` (unless `headers` give one), the same for
   * its retries, so a retried write runs once.
   */
  retries?: number;
}

export interface StreamEventsHandlers {
  /** Each event, once, in offset order. */
  onEvent: (event: RuntimeEvent) => void;
  /**
   * A `ServiceApiError` when the stream stopped for good (the conversation is unknown, the
   * credentials are refused: 4xx); an `Error` when a connection could not be opened and the
   * stream is trying again; and whatever `onEvent` threw.
   */
  onError?: (error: unknown) => void;
}

export interface StreamEventsOptions {
  /** Start after this offset (default: from the first event). */
  afterOffset?: number;
  createEventSource?: EventSourceFactory;
  EventSource?: EventSourceConstructor;
  headers?: HeadersInit;
  withCredentials?: boolean;
  /** Further browser event-source init fields. */
  [field: string]: unknown;
}

/** The client: one method per operation of the seed. */
export interface ServiceClient {
  createConversation(input?: CreateRuntimeConversationInput): Promise<ConversationResult>;
  listConversations(options?: ListConversationsOptions): Promise<ListConversationsResult>;
  handleChannelEvent(input: ChannelEventInput): Promise<HandleChannelEventResult>;
  receiveMessage(input: MessageChannelEventInput): Promise<HandleChannelEventResult>;
  recordProviderUpdate(input: ProviderObjectChannelEventInput): Promise<HandleChannelEventResult>;
  finalizeVoiceTurn(input: VoiceTurnChannelEventInput): Promise<HandleChannelEventResult>;
  requestOutboundContact(input: OutboundContactChannelEventInput): Promise<HandleChannelEventResult>;
  submitScheduledEvent(input: ScheduledChannelEventInput): Promise<HandleChannelEventResult>;
  recordChannelOutputResolution(input: ChannelOutputResolutionEventInput): Promise<HandleChannelEventResult>;
  requestChannelHandoff(input: ChannelHandoffEventInput): Promise<HandleChannelEventResult>;
  requestChannelHandoffReview(input: ChannelHandoffReviewEventInput): Promise<HandleChannelEventResult>;
  resolveChannelOutput(input: ResolveChannelOutputInput): Promise<ResolveChannelOutputResult>;
  startVoiceConversation(input?: StartVoiceConversationInput): Promise<VoiceStartResult>;
  startVoiceSegment(conversationId: string, input?: StartVoiceSegmentInput): Promise<VoiceStartResult>;
  sendMessage(conversationId: string, message: string, options?: SendMessageOptions): Promise<SendMessageResult>;
  listEvents(conversationId: string, options?: ListEventsOptions): Promise<ListEventsResult>;
  submitWidget(conversationId: string, input: SubmitWidgetInput): Promise<EventResult>;
  emitCustomEvent(conversationId: string, eventName: string, input?: EmitCustomEventInput): Promise<EventResult>;
  emitJourneyEvent(conversationId: string, eventName: string, input?: EmitJourneyEventInput): Promise<EmitJourneyEventResult>;
  emitIntermediateMessage(conversationId: string, input: EmitIntermediateMessageInput): Promise<EventsResult>;
  emitGeneratedPreamble(conversationId: string, input?: EmitGeneratedPreambleInput): Promise<EmitGeneratedPreambleResult>;
  compactConversation(conversationId: string, input?: CompactConversationInput): Promise<CompactConversationResult>;
  closeConversation(conversationId: string, input?: CloseConversationInput): Promise<ConversationResult>;
  requestHandoff(conversationId: string, input: RequestHandoffInput): Promise<LifecycleResult>;
  resumeConversation(conversationId: string, input?: ResumeConversationInput): Promise<LifecycleResult>;
  getSnapshot(conversationId: string): Promise<SnapshotResult>;
  replayConversation(conversationId: string, options?: ReplayConversationOptions): Promise<ReplayResult>;
  /** Streams the conversation's events (SSE); returns a function that stops the stream. */
  streamEvents(conversationId: string, handlers: StreamEventsHandlers, options?: StreamEventsOptions): () => void;
}

interface RequestSpec {
  operation: ServiceOperation;
  method: "GET" | "POST";
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  conversationId?: string | undefined;
  signal?: AbortSignal | undefined;
  onDelta?: ((delta: string) => void) | undefined;
  /** Extra headers, over the client's and the resolver's. */
  headers?: HeadersInit | undefined;
}

/** Creates the client of the runtime handler at `options.baseUrl`. */
export function createServiceClient(options: ServiceClientOptions): ServiceClient {
  if (!options || typeof options.baseUrl !== "string" || !options.baseUrl) {
    throw new TypeError("createServiceClient: `baseUrl` is required (e.g. http://127.0.0.1:8787/api/runtime)");
  }
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const fetchImpl: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));

  async function request<T>(spec: RequestSpec): Promise<T> {
    const url = baseUrl + spec.path + queryString(spec.query);
    const context: ServiceRequestContext = { operation: spec.operation, method: spec.method, url };
    if (spec.conversationId !== undefined) context.conversationId = spec.conversationId;
    const resolved =
      typeof options.requestOptions === "function"
        ? ((await options.requestOptions(context)) ?? {})
        : (options.requestOptions ?? {});
    const headers = new Headers(options.headers);
    new Headers(resolved.headers).forEach((value, name) => headers.set(name, value));
    new Headers(spec.headers).forEach((value, name) => headers.set(name, value));
    if (spec.body !== undefined) headers.set("content-type", "application/json");
    headers.set("accept", spec.onDelta ? "text/event-stream" : "application/json");
    const init: RequestInit = { ...resolved, method: spec.method, headers };
    const credentials = resolved.credentials ?? options.credentials;
    if (credentials !== undefined) init.credentials = credentials;
    const signal = spec.signal ?? resolved.signal;
    if (signal) init.signal = signal;
    if (spec.body !== undefined) init.body = JSON.stringify(spec.body);
    if (spec.method !== "GET" && !headers.has("idempotency-key")) headers.set("idempotency-key", newIdempotencyKey());
    const response = await fetchWithRetries(url, init, options.retries ?? 3);
    if (!response.ok) throw await ServiceApiError.fromResponse(response);
    const type = response.headers.get("content-type") ?? "";
    if (spec.onDelta && type.includes("text/event-stream") && response.body) {
      return readStreamedResult<T>(response, spec.onDelta);
    }
    return (await response.json()) as T;
  }

  /** Sends `init` until it gets an answer worth giving, at most `retries` more times. */
  async function fetchWithRetries(url: string, init: RequestInit, retries: number): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await fetchImpl(url, init);
      } catch (error) {
        if (attempt >= retries || init.signal?.aborted) throw error;
        await pause(backoff(attempt, null));
        continue;
      }
      if (attempt >= retries || !(await worthRetrying(response))) return response;
      await pause(backoff(attempt, response.headers.get("retry-after")));
    }
  }

  function channelEvent(operation: ServiceOperation, input: ChannelEventInput): Promise<HandleChannelEventResult> {
    return request({
      operation,
      method: "POST",
      path: "/channel-events",
      body: builders.createChannelEventRequestBody(input),
      conversationId: input.event?.conversationId ?? input.conversationId ?? input.createConversation?.id,
      signal: input.signal,
      onDelta: input.onAssistantTextDelta,
    });
  }

  const onConversation = (conversationId: string, rest = "") =>
    `/conversations/${encodeURIComponent(requireId(conversationId))}${rest}`;

  const client: ServiceClient = {
    createConversation(input = {}) {
      return request({ operation: "createConversation", method: "POST", path: "/conversations", body: input, conversationId: input.id });
    },
    listConversations(listOptions = {}) {
      return request({ operation: "listConversations", method: "GET", path: "/conversations", query: { ...listOptions } });
    },
    handleChannelEvent(input) {
      return channelEvent("handleChannelEvent", input);
    },
    receiveMessage(input) {
      return channelEvent("receiveMessage", builders.createMessageChannelEventInput(input));
    },
    recordProviderUpdate(input) {
      return channelEvent("recordProviderUpdate", builders.createProviderObjectChannelEventInput(input));
    },
    finalizeVoiceTurn(input) {
      return channelEvent("finalizeVoiceTurn", builders.createVoiceTurnChannelEventInput(input));
    },
    requestOutboundContact(input) {
      return channelEvent("requestOutboundContact", builders.createOutboundContactChannelEventInput(input));
    },
    submitScheduledEvent(input) {
      return channelEvent("submitScheduledEvent", builders.createScheduledChannelEventInput(input));
    },
    recordChannelOutputResolution(input) {
      return channelEvent("recordChannelOutputResolution", builders.createChannelOutputResolutionEventInput(input));
    },
    requestChannelHandoff(input) {
      return channelEvent("requestChannelHandoff", builders.createChannelHandoffEventInput(input));
    },
    requestChannelHandoffReview(input) {
      return channelEvent("requestChannelHandoffReview", builders.createChannelHandoffReviewEventInput(input));
    },
    resolveChannelOutput(input) {
      const { signal, ...body } = input;
      return request({
        operation: "resolveChannelOutput",
        method: "POST",
        path: "/channel-outputs/resolve",
        body: withoutUndefined(body),
        conversationId: input.conversationId,
        signal,
      });
    },
    startVoiceConversation(input = {}) {
      return request({ operation: "startVoiceConversation", method: "POST", path: "/voice/conversations", body: input, conversationId: input.id });
    },
    startVoiceSegment(conversationId, input = {}) {
      return request({ operation: "startVoiceSegment", method: "POST", path: onConversation(conversationId, "/voice-segments"), body: input, conversationId });
    },
    sendMessage(conversationId, message, sendOptions = {}) {
      const { onAssistantTextDelta, signal, ...rest } = sendOptions;
      return request({
        operation: "sendMessage",
        method: "POST",
        path: onConversation(conversationId, "/messages"),
        body: withoutUndefined({ message, ...rest }),
        conversationId,
        signal,
        onDelta: onAssistantTextDelta,
      });
    },
    async listEvents(conversationId, listOptions = {}) {
      const page = (afterOffset: number | undefined) =>
        request<ListEventsResult>({
          operation: "listEvents",
          method: "GET",
          path: onConversation(conversationId, "/events"),
          query: { afterOffset, limit: listOptions.limit },
          conversationId,
        });
      const first = await page(listOptions.afterOffset);
      // With a `limit`, one page; without, every event after `afterOffset`, page by page.
      if (listOptions.limit !== undefined) return first;
      const events = [...first.events];
      let next = first.nextAfterOffset;
      while (next !== undefined) {
        const more = await page(next);
        events.push(...more.events);
        next = more.nextAfterOffset;
      }
      return { events };
    },
    submitWidget(conversationId, input) {
      return request({ operation: "submitWidget", method: "POST", path: onConversation(conversationId, "/widgets"), body: input, conversationId });
    },
    emitCustomEvent(conversationId, eventName, input = {}) {
      return request({
        operation: "emitCustomEvent",
        method: "POST",
        path: onConversation(conversationId, "/custom-events"),
        body: withoutUndefined({ eventName, payload: input.payload }),
        conversationId,
      });
    },
    emitJourneyEvent(conversationId, eventName, input = {}) {
      return request({
        operation: "emitJourneyEvent",
        method: "POST",
        path: onConversation(conversationId, "/journey-events"),
        body: withoutUndefined({ eventName, ...input }),
        conversationId,
      });
    },
    emitIntermediateMessage(conversationId, input) {
      return request({
        operation: "emitIntermediateMessage",
        method: "POST",
        path: onConversation(conversationId, "/intermediate-messages"),
        body: withoutUndefined({ ...input }),
        conversationId,
      });
    },
    emitGeneratedPreamble(conversationId, input = {}) {
      return request({ operation: "emitGeneratedPreamble", method: "POST", path: onConversation(conversationId, "/preambles"), body: withoutUndefined({ ...input }), conversationId });
    },
    compactConversation(conversationId, input = {}) {
      return request({ operation: "compactConversation", method: "POST", path: onConversation(conversationId, "/compact"), body: withoutUndefined({ ...input }), conversationId });
    },
    closeConversation(conversationId, input = {}) {
      return request({ operation: "closeConversation", method: "POST", path: onConversation(conversationId, "/close"), body: withoutUndefined({ ...input }), conversationId });
    },
    requestHandoff(conversationId, input) {
      return request({ operation: "requestHandoff", method: "POST", path: onConversation(conversationId, "/handoff"), body: withoutUndefined({ ...input }), conversationId });
    },
    resumeConversation(conversationId, input = {}) {
      return request({ operation: "resumeConversation", method: "POST", path: onConversation(conversationId, "/resume"), body: withoutUndefined({ ...input }), conversationId });
    },
    getSnapshot(conversationId) {
      return request({ operation: "getSnapshot", method: "GET", path: onConversation(conversationId, "/snapshot"), conversationId });
    },
    replayConversation(conversationId, replayOptions = {}) {
      return request({
        operation: "replayConversation",
        method: "GET",
        path: onConversation(conversationId, "/replay"),
        query: { afterOffset: replayOptions.afterOffset, limit: replayOptions.limit },
        conversationId,
      });
    },
    streamEvents(conversationId, handlers, streamOptions = {}) {
      if (!handlers || typeof handlers.onEvent !== "function") {
        throw new TypeError("streamEvents: `onEvent` is required");
      }
      const { afterOffset, createEventSource, EventSource, headers, withCredentials, ...init } = streamOptions;
      const { headers: sharedStreamHeaders, withCredentials: sharedWithCredentials, ...sharedInit } =
        options.eventSourceOptions ?? {};
      const streamHeaders = new Headers(options.headers);
      new Headers(sharedStreamHeaders).forEach((value, name) => streamHeaders.set(name, value));
      new Headers(headers).forEach((value, name) => streamHeaders.set(name, value));
      const factory: EventSourceFactory | undefined =
        createEventSource ??
        (EventSource ? undefined : options.createEventSource);
      const constructor = EventSource ?? options.EventSource ?? (globalThis as { EventSource?: EventSourceConstructor }).EventSource;
      return openEventStream({
        url: baseUrl + onConversation(conversationId, "/events/stream"),
        afterOffset,
        headers: streamHeaders,
        withCredentials: withCredentials ?? sharedWithCredentials ?? options.credentials === "include",
        init: { ...sharedInit, ...init },
        factory,
        constructor,
        fetch: fetchImpl,
        handlers,
        diagnose: (lastOffset) =>
          request({
            operation: "listEvents",
            method: "GET",
            path: onConversation(conversationId, "/events"),
            query: { afterOffset: lastOffset, limit: 1 },
            conversationId,
            headers: streamHeaders,
          }).then(() => undefined),
      });
    },
  };
  return client;
}

async function readStreamedResult<T>(response: Response, onDelta: (delta: string) => void): Promise<T> {
  for await (const frame of readServerSentEvents(response.body!)) {
    if (frame.event === "delta") {
      const delta = JSON.parse(frame.data) as { text?: unknown };
      if (typeof delta.text === "string") onDelta(delta.text);
    } else if (frame.event === "result") {
      return JSON.parse(frame.data) as T;
    } else if (frame.event === "error") {
      const body = parseJson(frame.data);
      const status = statusOf(body) ?? 500;
      throw new ServiceApiError(errorMessage(body, status, ""), status, body, response);
    }
  }
  throw new ServiceApiError("the reply stream ended without a result", response.status, undefined, response);
}

function statusOf(body: unknown): number | undefined {
  const status = (body as { error?: { status?: unknown } } | undefined)?.error?.status;
  return typeof status === "number" ? status : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function queryString(query: RequestSpec["query"]): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) params.set(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

function requireId(conversationId: string): string {
  if (typeof conversationId !== "string" || !conversationId) {
    throw new TypeError("a conversation id is required");
  }
  return conversationId;
}

/** A new idempotency key: a random UUID. */
function newIdempotencyKey(): string {
  const crypto = globalThis.crypto;
  if (crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  if (crypto && typeof crypto.getRandomValues === "function") crypto.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Whether an answer says to send the request again: a gateway's 502, 503 or 504, or a retry
 * that found its first attempt still running (`IDEMPOTENCY_KEY_IN_USE`). */
async function worthRetrying(response: Response): Promise<boolean> {
  if (response.status === 502 || response.status === 503 || response.status === 504) return true;
  if (response.status !== 409) return false;
  try {
    const body = (await response.clone().json()) as { error?: { code?: string } };
    return body?.error?.code === "IDEMPOTENCY_KEY_IN_USE";
  } catch {
    return false;
  }
}

/** The pause before retry `attempt + 1`: `Retry-After` (seconds) when given, else 200 ms
 * doubling to 2 s; never above 10 s. */
function backoff(attempt: number, retryAfter: string | null): number {
  const asked = retryAfter === null ? Number.NaN : Number(retryAfter) * 1000;
  const grown = Math.min(200 * 2 ** attempt, 2000);
  return Math.min(Number.isFinite(asked) && asked >= 0 ? asked : grown, 10_000);
}

function pause(millis: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, millis));
}
