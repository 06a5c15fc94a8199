// The wire records of Cairn's conversation runtime, as the daemon sends them
// (crates/types/src/runtime in the Rust workspace), and the inputs and results of the
// client's operations (seed 001, "Client operations").

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: unknown };

/** Where a conversation is in its life: `active` → `handoff` → `active`; any → `closed`. */
export type ConversationLifecycle = "active" | "handoff" | "closed" | (string & {});

/** The channel a conversation happens on (`web`, `voice`, `sms`, …). */
export interface ConversationChannel {
  type: string;
  provider?: string;
  /** The channel's own id for the thread (a phone number, a thread id, …). */
  id?: string;
  metadata?: JsonObject;
}

/** A channel as callers may give it: its type alone (`"web"`) or the whole record. */
export type ConversationChannelInput = string | ConversationChannel;

/** A conversation record, as every operation returns it. */
export interface Conversation {
  id: string;
  agentId: string;
  channel?: ConversationChannel;
  /** Whatever the creator attached (`null` when nothing). */
  context: unknown;
  lifecycle: ConversationLifecycle;
  createdAt: string;
  updatedAt: string;
}

/** The event types the default runtime writes (docs/runtime-events.md); others may appear. */
export type RuntimeEventType =
  | "conversation.created"
  | "conversation.handoff"
  | "conversation.resumed"
  | "conversation.closed"
  | "conversation.compacted"
  | "message"
  | "message.truncated"
  | "activity"
  | "journey.started"
  | "journey.state_entered"
  | "journey.transition"
  | "journey.completed"
  | "journey.event"
  | "prompt.opened"
  | "prompt.submitted"
  | "tool.called"
  | "custom"
  | "channel.handoff_review"
  | "channel.provider_update"
  | "channel.outbound_contact"
  | "channel.scheduled"
  | "channel.output_resolved"
  | "voice.segment.started"
  | "voice.segment.ended";

/** One entry of a conversation's ordered log. Offsets start at 0 and have no gaps. */
export interface RuntimeEvent<Data = JsonObject> {
  id: string;
  conversationId: string;
  offset: number;
  type: RuntimeEventType | (string & {});
  createdAt: string;
  data: Data;
}

/** The journey state of a conversation. */
export interface RuntimeSnapshot {
  conversationId: string;
  lifecycle: ConversationLifecycle;
  activeJourneyId?: string;
  activeStateIds: string[];
  compactionSummary?: unknown;
  definitionHash?: string;
  journeyContext?: unknown;
  updatedAt: string;
}

/**
 * A part of a message. Cairn's runtime sends none today (a message is its `text`); the
 * type is kept open so a runtime of your own may attach segments to `message` events
 * (`data.segments`), which the chat reducer carries over to `ChatMessage.segments`.
 */
export interface MessageSegment {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/** A message as replay shows it, rebuilt from the `message` events. */
export interface ReplayMessage {
  id: string;
  role: "user" | "assistant";
  text: string;
  offset: number;
  aborted: boolean;
  intermediate: boolean;
  reason?: string;
  segments?: MessageSegment[];
}

/** A widget prompt the runtime opened and nobody has answered yet. */
export interface OpenPrompt {
  promptId: string;
  widgetKind: string;
  input: unknown;
  /** The offset of the `prompt.opened` event. */
  offset: number;
}

/** What a memory answer used: one memory (`supportReferences` on assistant messages). */
export interface SupportReference {
  id: string;
  label: string;
  url?: string;
  excerpt?: string;
  score?: number;
}

/** A source to show under an answer: one per URL, or per memory without one. */
export interface SupportSourceLink {
  id: string;
  label: string;
  url?: string;
}

// ---------------------------------------------------------------------------------------
// Operation inputs and results.

export interface CreateRuntimeConversationInput {
  /** The conversation's id; one is made (`conv_…`) when absent. */
  id?: string;
  agentId?: string;
  channel?: ConversationChannelInput;
  context?: unknown;
}

export interface ConversationResult {
  conversation: Conversation;
}

/** A cursor of conversation listing: a page's `nextCursor` (→ `after`) or `prevCursor` (→ `before`). */
export type ConversationListCursor = string;

export interface ListConversationsOptions {
  /** A page's `nextCursor`: conversations older than it. */
  after?: ConversationListCursor;
  /** A page's `prevCursor`: conversations newer than it. */
  before?: ConversationListCursor;
  /** Only conversations updated strictly after this ISO 8601 time. */
  afterUpdatedAt?: string;
  /** Only conversations updated strictly before this ISO 8601 time. */
  beforeUpdatedAt?: string;
  agentId?: string;
  /** Page size: 1–200, default 50. */
  limit?: number;
}

export interface ListConversationsResult {
  conversations: Conversation[];
  nextCursor?: ConversationListCursor;
  prevCursor?: ConversationListCursor;
  /** The newest message of each listed conversation that has one, by conversation id. */
  lastMessages?: Record<string, LastMessage>;
}

/** A conversation's newest message, as a list shows it. */
export interface LastMessage {
  role: "user" | "assistant" | string;
  text: string;
  offset: number;
  createdAt: string;
}

export interface SendMessageOptions {
  /** What the client app knows of the moment (page, locale, …). */
  app?: unknown;
  channel?: ConversationChannelInput;
  turn?: unknown;
  /**
   * Called with each piece of the assistant's reply as it is written (the request asks for
   * `text/event-stream`). Not sent. Without a language model the reply is one piece.
   */
  onAssistantTextDelta?: (delta: string) => void;
  /** Aborts the request. Not sent. */
  signal?: AbortSignal;
}

export interface SendMessageResult {
  text: string;
  /** The turn's events, the user's message first. */
  events: RuntimeEvent[];
  activeJourneyId?: string;
}

export interface ListEventsOptions {
  /** Only events with a higher offset (from the first event when absent). */
  afterOffset?: number;
  /** At most this many events (1–1000, default 1000). */
  limit?: number;
}

export interface ListEventsResult {
  events: RuntimeEvent[];
  /** Present when the log held more events than the page: the next `afterOffset`. */
  nextAfterOffset?: number;
}

export interface SubmitWidgetInput {
  promptId: string;
  widgetKind: string;
  output: unknown;
}

export interface EventResult {
  event: RuntimeEvent;
}

export interface EventsResult {
  events: RuntimeEvent[];
}

export interface EmitCustomEventInput {
  payload?: unknown;
}

export type JourneyEventRouting = "none" | "activeJourneyOnly" | "full" | "targeted";

export interface EmitJourneyEventInput {
  app?: unknown;
  payload?: unknown;
  /** Default `full`. */
  routing?: JourneyEventRouting;
  target?: { journeyId?: string; stateId?: string };
}

export interface EmitJourneyEventResult {
  event: RuntimeEvent;
  events: RuntimeEvent[];
  snapshot: RuntimeSnapshot;
}

export interface EmitIntermediateMessageInput {
  text: string;
  /** Whether a language model sees it in later turns (default true). */
  visibleToModel?: boolean;
}

export interface EmitGeneratedPreambleInput {
  maxWords?: number;
  purpose?: string;
}

export interface EmitGeneratedPreambleResult {
  events: RuntimeEvent[];
  text: string;
}

export interface CompactConversationInput {
  fromOffset?: number;
  toOffset?: number;
  schemaVersion?: string;
}

/** The summary compaction keeps in the snapshot's `compactionSummary`. */
export interface CompactionSummary {
  schemaVersion: string;
  fromOffset: number;
  toOffset: number;
  messageCount: number;
  text: string;
}

export interface CompactConversationResult {
  events: RuntimeEvent[];
  snapshot: RuntimeSnapshot;
  summary: CompactionSummary;
}

export interface CloseConversationInput {
  reason?: string;
}

export interface RequestHandoffInput {
  reason: string;
  summary?: string;
  payload?: unknown;
}

export interface ResumeConversationInput {
  reason?: string;
  payload?: unknown;
}

export interface LifecycleResult {
  conversation: Conversation;
  event: RuntimeEvent;
}

export interface SnapshotResult {
  snapshot: RuntimeSnapshot;
}

export interface ReplayConversationOptions {
  afterOffset?: number;
  limit?: number;
}

export interface ReplayResult {
  conversation: Conversation;
  events: RuntimeEvent[];
  messages: ReplayMessage[];
  openPrompts: OpenPrompt[];
  snapshot: RuntimeSnapshot;
  nextAfterOffset?: number;
}

// Voice.

export interface StartVoiceConversationInput {
  agentId?: string;
  app?: unknown;
  /** Hints about the voice client (its name, platform, audio devices, …). */
  client?: unknown;
  context?: unknown;
  id?: string;
}

export interface StartVoiceSegmentInput {
  app?: unknown;
  client?: unknown;
}

export interface ChannelSegment {
  id: string;
  conversationId: string;
  channel: "voice";
  startedAt: string;
  endedAt?: string;
}

export interface VoiceConnection {
  id: string;
  channelSegmentId: string;
  /** `websocket` for the `service.voice.v1` socket. */
  adapter: string;
  /** `pending`, `connected` or `ended`. */
  status: string;
  provider?: string;
  providerSessionId?: string;
  expiresAt?: string;
}

export interface VoiceSocket {
  /** The socket's full `ws://`/`wss://` URL, its token included. */
  url: string;
  /** The single-use socket credential (also in `url`). */
  token: string;
  protocol: "service.voice.v1";
  expiresAt: string;
}

export interface VoiceStartResult {
  conversation: Conversation;
  channelSegment: ChannelSegment;
  connection: VoiceConnection;
  socket: VoiceSocket;
  events: RuntimeEvent[];
  /** The conversation's event stream (SSE). */
  eventsUrl?: string;
}

/** The voice socket protocol's identifier. */
export const VOICE_PROTOCOL = "service.voice.v1" as const;

// Channel events.

/** The kinds of channel event (`kind` or `nature`). */
export type ChannelEventNature =
  | "message"
  | "provider-object"
  | "voice-turn"
  | "outbound-contact"
  | "scheduled"
  | "output-resolution"
  | "handoff"
  | "handoff-review";

export type ChannelEventDirection = "outbound" | "inbound" | "internal";

export type ChannelEventSourceType =
  | "application"
  | "provider-adapter"
  | "schedule-adapter"
  | "operator-surface";

/** Who acted: an actor object, or its type alone (`"user"`, `"operator"`, …). */
export type ChannelEventActor = string | JsonObject;
/** Who the event is about (kept as sent). */
export type ChannelEventIdentity = JsonObject;
/** What the channel says the event means (kept as sent). */
export type ChannelEventIntent = string | JsonObject;
/** How the event binds to a conversation (kept as sent). */
export type ChannelEventBindingInput = JsonObject;
/** How the runtime should handle the event (kept as sent). */
export type ChannelEventHandlingInput<Turn = unknown> = JsonObject & { turn?: Turn };
/** Evidence of where the event came from (kept as sent). */
export type ChannelEventSourceEvidence = JsonObject;
/** A channel payload (kept as sent). */
export type NormalizedChannelPayloadInput = JsonObject;

/** The fields the `event` shortcut envelope may carry; they are applied over the top level. */
export interface ChannelEventEnvelope {
  actor?: ChannelEventActor;
  agentId?: string;
  attachments?: unknown[];
  body?: string;
  channel?: ConversationChannelInput;
  conversationId?: string;
  dedupeKey?: string;
  direction?: ChannelEventDirection;
  id?: string;
  idempotencyKey?: string;
  identity?: ChannelEventIdentity;
  identityKey?: string;
  identityMetadata?: Record<string, unknown>;
  identityStreamId?: string;
  intent?: ChannelEventIntent;
  kind?: ChannelEventNature;
  message?: string;
  metadata?: Record<string, unknown>;
  nature?: ChannelEventNature;
  occurredAt?: string;
  payload?: NormalizedChannelPayloadInput;
  providerObject?: unknown;
  raw?: unknown;
  sequence?: string | number;
  source?: ChannelEventSourceEvidence;
  status?: string;
  subject?: string;
  summary?: string;
  text?: string;
  turn?: unknown;
}

/** The request body of `POST /channel-events`: the submit input without the client-only fields. */
export interface ChannelEventRequestBody<Payload = NormalizedChannelPayloadInput, Turn = unknown> {
  actor?: ChannelEventActor;
  agentId?: string;
  app?: unknown;
  attachments?: unknown[];
  binding?: ChannelEventBindingInput;
  body?: string;
  channel?: ConversationChannelInput;
  conversationContext?: unknown;
  conversationId?: string;
  createConversation?: CreateRuntimeConversationInput;
  dedupeKey?: string;
  deliveryId?: string;
  direction?: ChannelEventDirection;
  event?: ChannelEventEnvelope;
  eventId?: string;
  externalObjectIds?: Record<string, string>;
  handling?: ChannelEventHandlingInput<Turn>;
  id?: string;
  idempotencyKey?: string;
  identity?: ChannelEventIdentity;
  identityKey?: string;
  identityMetadata?: Record<string, unknown>;
  identityStreamId?: string;
  intent?: ChannelEventIntent;
  kind?: ChannelEventNature;
  message?: string;
  metadata?: Record<string, unknown>;
  nature?: ChannelEventNature;
  occurredAt?: string;
  payload?: Payload;
  provider?: string;
  providerObject?: unknown;
  providerPackageId?: string;
  raw?: unknown;
  receivedAt?: string;
  sequence?: string | number;
  source?: ChannelEventSourceEvidence;
  sourceId?: string;
  sourceType?: ChannelEventSourceType;
  status?: string;
  streamId?: string;
  subject?: string;
  summary?: string;
  text?: string;
  turn?: Turn;
  verified?: boolean;
  // Variant fields.
  /** Voice turns: what the caller said. */
  transcript?: string;
  /** Handoffs: the channel the conversation leaves. */
  fromChannel?: ConversationChannelInput;
  /** Handoffs. */
  reason?: string;
  reasonCode?: string;
  reasonLabel?: string;
}

/** The submit input of a channel event: the request body plus client-only fields. */
export interface ChannelEventInput<Payload = NormalizedChannelPayloadInput, Turn = unknown>
  extends ChannelEventRequestBody<Payload, Turn> {
  /** Aborts the request. Not sent. */
  signal?: AbortSignal;
  /**
   * Called with each piece of the assistant's reply as it is written, for inbound
   * messages and voice turns (the request asks for `text/event-stream`). Not sent.
   */
  onAssistantTextDelta?: (delta: string) => void;
}

type WithChannel<T> = Omit<T, "channel"> & { channel: ConversationChannelInput };

/** A message someone sent or the agent said on a channel. */
export type MessageChannelEventInput = Omit<WithChannel<ChannelEventInput>, "text" | "direction"> & {
  text: string;
  direction?: "outbound" | "inbound";
};
/** An object a provider reported (a delivery receipt, a call status, …). */
export type ProviderObjectChannelEventInput = WithChannel<ChannelEventInput>;
/** A finished turn of a voice call. */
export type VoiceTurnChannelEventInput = ChannelEventInput & { transcript?: string };
/** A request to contact someone on a channel. */
export type OutboundContactChannelEventInput = WithChannel<ChannelEventInput>;
/** An event a scheduler fires. */
export type ScheduledChannelEventInput = WithChannel<ChannelEventInput>;
/** What became of an output sent on a channel. */
export type ChannelOutputResolutionEventInput = WithChannel<ChannelEventInput>;
/** A conversation handed to another channel. */
export type ChannelHandoffEventInput = WithChannel<ChannelEventInput> & {
  fromChannel?: ConversationChannelInput;
  reason?: string;
  reasonCode?: string;
  reasonLabel?: string;
};
/** An operator's review of a handoff. */
export type ChannelHandoffReviewEventInput = WithChannel<ChannelEventInput>;

/** The result of a channel event submission. */
export interface HandleChannelEventResult {
  conversation: Conversation;
  /** The events this submission appended (for a repeat: those of the first delivery). */
  events: RuntimeEvent[];
  /** The assistant's reply, when the event was a message that got one. */
  text?: string;
  activeJourneyId?: string;
  /** True when this was a redelivery of an event applied before. */
  duplicate: boolean;
  /** True when the conversation was created by this event. */
  created: boolean;
}

/** The body of resolveChannelOutput: what became of an output (an assistant message's event). */
export interface ResolveChannelOutputInput {
  conversationId: string;
  /** The id of the event whose output is resolved. */
  eventId: string;
  /** `delivered`, `read`, `failed`, … as the channel reports it. */
  status: string;
  channel?: ConversationChannelInput;
  deliveryId?: string;
  provider?: string;
  error?: string;
  metadata?: Record<string, unknown>;
  /** Aborts the request. Not sent. */
  signal?: AbortSignal;
}

export interface ResolveChannelOutputResult {
  /** The `channel.output_resolved` event. */
  event: RuntimeEvent;
}
