// @cairn/client: the TypeScript client of Cairn's conversation runtime (seed 001): the
// operations, event streams, channel-event input builders, the chat reducer and the
// support-reference helpers. No runtime dependencies: the platform's `fetch`, and its
// `EventSource` where there is one (else streams are read over `fetch`).

export { createServiceClient } from "./client.js";
export type {
  EventSourceConstructor,
  EventSourceFactory,
  EventSourceFactoryOptions,
  EventSourceLike,
  ServiceClient,
  ServiceClientOptions,
  ServiceEventSourceOptions,
  ServiceOperation,
  ServiceRequestContext,
  ServiceRequestOptions,
  ServiceRequestOptionsResolver,
  StreamEventsHandlers,
  StreamEventsOptions,
} from "./client.js";
export { ServiceApiError, isErrorBody } from "./errors.js";
export { fetchEventSource } from "./stream.js";
export { readServerSentEvents } from "./sse.js";
export type { ServerSentEvent } from "./sse.js";
export type { ServiceErrorBody } from "./errors.js";
export * from "./builders.js";
export { initialChatState, reduceChatRuntimeEvent } from "./chat.js";
export type {
  ChatActivity,
  ChatActivityLabelInput,
  ChatActivityLabelKind,
  ChatActivityStatus,
  ChatEventReducerState,
  ChatMessage,
  ChatMessageStatus,
  PromptState,
  PromptStatus,
  ReduceChatRuntimeEventOptions,
} from "./chat.js";
export { collectSupportSourceLinks, formatSupportReferences } from "./support.js";
export { VOICE_PROTOCOL } from "./types.js";
export type * from "./types.js";
