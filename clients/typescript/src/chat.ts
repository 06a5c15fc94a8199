// Client-side chat state: a pure reducer from runtime events to what a chat UI shows
// (messages, activities, widget prompts), idempotent by offset so replays, duplicates and
// late re-deliveries change nothing.

import { collectSupportSourceLinks } from "./support.js";
import type { ConversationLifecycle, MessageSegment, RuntimeEvent, SupportReference, SupportSourceLink } from "./types.js";

export type ChatMessageStatus = "failed" | "aborted" | "sending" | "streaming" | "sent";

export interface ChatMessage {
  id: string;
  role: "user" | "assistant";
  text: string;
  status: ChatMessageStatus;
  /** The offset of the `message` event (absent on a message not yet in the log). */
  offset?: number;
  segments?: MessageSegment[];
  /** An answer from memory's sources (its `supportReferences`), one link per URL. */
  sources?: SupportSourceLink[];
}

export type ChatActivityStatus = "running" | "done";

export interface ChatActivity {
  id: string;
  label: string;
  status: ChatActivityStatus;
}

/** `closed`: the conversation closed while the prompt was open; it takes no output. */
export type PromptStatus = "open" | "submitted" | "closed";

export interface PromptState {
  promptId: string;
  /** The widget kind (`form`, `rating`, …). */
  kind: string;
  input: unknown;
  output?: unknown;
  /** The offset of the `prompt.opened` event. */
  offset: number;
  /**
   * Where to show the widget among the messages: the offset of the assistant message that
   * introduces it (the runtime appends a prompt just before the text that asks for it), when
   * one came before the user's next message. Absent: show it at `offset`.
   */
  displayOffset?: number;
  status: PromptStatus;
}

export interface ChatEventReducerState {
  messages: ChatMessage[];
  activities: ChatActivity[];
  prompts: PromptState[];
  /** The highest offset applied; `-1` before any event. */
  lastOffset: number;
  /**
   * Whose message the conversation waits for: `assistant` after a user message or a
   * submitted widget, until the assistant's reply (an intermediate message is not one);
   * never while the conversation is handed off to a person or closed.
   */
  pendingMessageRole?: "user" | "assistant";
  /**
   * The conversation's lifecycle as the events tell it (`active`, `handoff`, `closed`);
   * absent until an event says. Not in the seed's table: a chat needs it to know the agent
   * stays silent while a person has the conversation.
   */
  lifecycle?: ConversationLifecycle;
}

export type ChatActivityLabelKind = "response" | "widget" | "intent" | "extraction" | "action" | "tool" | "knowledge";

export interface ChatActivityLabelInput {
  event: RuntimeEvent;
  kind: ChatActivityLabelKind;
  /** The runtime's label (`Understood: book demo`), else a default for the kind. */
  defaultLabel: string;
  /** The intent, widget kind or tool. */
  name?: string;
}

export interface ReduceChatRuntimeEventOptions {
  /** Labels an activity; `undefined` keeps the default label. */
  formatActivityLabel?: (input: ChatActivityLabelInput) => string | undefined;
}

/** The state before any event. */
export const initialChatState: ChatEventReducerState = Object.freeze({
  messages: [],
  activities: [],
  prompts: [],
  lastOffset: -1,
}) as ChatEventReducerState;

/**
 * The state after `event`. An event at or below `state.lastOffset` has been applied (or
 * was overtaken) and returns `state` itself; so does an event a chat does not show, except
 * that `lastOffset` moves on.
 *
 * Messages the UI added before the log had them are replaced in place: the first user
 * message with status `sending` (or `failed`) and the same text by the user's `message`
 * event, and the first assistant message with status `streaming` by the assistant's.
 */
export function reduceChatRuntimeEvent(
  state: ChatEventReducerState,
  event: RuntimeEvent,
  options: ReduceChatRuntimeEventOptions = {},
): ChatEventReducerState {
  if (typeof event?.offset !== "number" || event.offset <= state.lastOffset) return state;
  const next: ChatEventReducerState = { ...state, lastOffset: event.offset };
  const data = (event.data ?? {}) as Record<string, unknown>;
  switch (event.type) {
    case "message":
      return applyMessage(next, event, data);
    case "message.truncated":
      return applyTruncation(next, data);
    case "activity":
      return applyActivity(next, event, data, options);
    case "prompt.opened":
      return applyPromptOpened(next, event, data);
    case "prompt.submitted":
      return applyPromptSubmitted(next, event, data);
    case "conversation.created":
    case "conversation.resumed":
      return { ...next, lifecycle: "active" };
    case "conversation.handoff":
      // Nobody answers in the agent's name until the conversation is resumed.
      return { ...withoutPending(next), lifecycle: "handoff" };
    case "conversation.closed": {
      // Prompts close with their conversation.
      const prompts = next.prompts.map((prompt) => (prompt.status === "open" ? { ...prompt, status: "closed" as const } : prompt));
      return { ...withoutPending(next), prompts, lifecycle: "closed" };
    }
    default:
      return next;
  }
}

function applyMessage(state: ChatEventReducerState, event: RuntimeEvent, data: Record<string, unknown>): ChatEventReducerState {
  const role = data.role;
  if (role !== "user" && role !== "assistant") return state;
  const message: ChatMessage = {
    id: typeof data.messageId === "string" ? data.messageId : event.id,
    role,
    text: typeof data.text === "string" ? data.text : "",
    status: data.aborted === true ? "aborted" : "sent",
    offset: event.offset,
  };
  if (Array.isArray(data.segments)) message.segments = data.segments as MessageSegment[];
  if (Array.isArray(data.supportReferences) && data.supportReferences.length > 0) {
    message.sources = collectSupportSourceLinks(data.supportReferences as SupportReference[]);
  }

  const messages = [...state.messages];
  let index = messages.findIndex((existing) => existing.id === message.id);
  if (index < 0) index = messages.findIndex((existing) => isStandIn(existing, message));
  if (index >= 0) messages[index] = message;
  else messages.push(message);

  let prompts = state.prompts;
  if (role === "assistant") {
    // The widget of a step shows after the text that asks for it: the first assistant
    // message after the prompt, with no user message in between.
    const answered = (prompt: PromptState) =>
      state.messages.some(
        (existing) => existing.role === "user" && existing.offset !== undefined && existing.offset > prompt.offset,
      );
    prompts = prompts.map((prompt) =>
      prompt.displayOffset === undefined && prompt.offset < event.offset && !answered(prompt)
        ? { ...prompt, displayOffset: event.offset }
        : prompt,
    );
  }
  const next: ChatEventReducerState = { ...state, messages, prompts };
  if (role === "user") return awaitingAssistant(next);
  // An intermediate message (a preamble, a progress note) comes before the reply.
  return data.intermediate === true ? next : withoutPending(next);
}

/** Whether `existing` is a message the UI showed before the log had `message`. */
function isStandIn(existing: ChatMessage, message: ChatMessage): boolean {
  if (existing.offset !== undefined || existing.role !== message.role) return false;
  if (message.role === "user") return (existing.status === "sending" || existing.status === "failed") && existing.text === message.text;
  return existing.status === "streaming";
}

function applyTruncation(state: ChatEventReducerState, data: Record<string, unknown>): ChatEventReducerState {
  const index = state.messages.findIndex((message) => message.id === data.messageId);
  if (index < 0) return state;
  const messages = [...state.messages];
  const truncated = messages[index]!;
  messages[index] = {
    ...truncated,
    text: typeof data.text === "string" ? data.text : truncated.text,
    status: "aborted",
  };
  return { ...state, messages };
}

const ACTIVITY_KINDS: readonly ChatActivityLabelKind[] = ["response", "widget", "intent", "extraction", "action", "tool", "knowledge"];

const DEFAULT_LABELS: Record<ChatActivityLabelKind, (name: string | undefined) => string> = {
  response: () => "Writing a reply",
  widget: () => "Getting a short form ready",
  intent: (name) => (name ? `Understood: ${name.replace(/_/g, " ")}` : "Understanding the request"),
  extraction: () => "Reading the details",
  action: () => "Working on it",
  tool: () => "Looking something up",
  knowledge: () => "Searching what we know",
};

function applyActivity(
  state: ChatEventReducerState,
  event: RuntimeEvent,
  data: Record<string, unknown>,
  options: ReduceChatRuntimeEventOptions,
): ChatEventReducerState {
  const id = typeof data.activityId === "string" ? data.activityId : event.id;
  const kind = (ACTIVITY_KINDS as readonly unknown[]).includes(data.kind) ? (data.kind as ChatActivityLabelKind) : "action";
  const name = typeof data.name === "string" ? data.name : undefined;
  const defaultLabel = typeof data.label === "string" && data.label ? data.label : DEFAULT_LABELS[kind](name);
  const input: ChatActivityLabelInput = { event, kind, defaultLabel };
  if (name !== undefined) input.name = name;
  const label = options.formatActivityLabel?.(input) ?? defaultLabel;
  const activity: ChatActivity = { id, label, status: data.status === "done" ? "done" : "running" };
  const activities = [...state.activities];
  const index = activities.findIndex((existing) => existing.id === id);
  if (index >= 0) activities[index] = activity;
  else activities.push(activity);
  return { ...state, activities };
}

function applyPromptOpened(state: ChatEventReducerState, event: RuntimeEvent, data: Record<string, unknown>): ChatEventReducerState {
  const promptId = typeof data.promptId === "string" ? data.promptId : event.id;
  if (state.prompts.some((prompt) => prompt.promptId === promptId)) return state;
  const prompt: PromptState = {
    promptId,
    kind: typeof data.widgetKind === "string" ? data.widgetKind : "",
    input: data.input,
    offset: event.offset,
    status: "open",
  };
  return { ...state, prompts: [...state.prompts, prompt] };
}

function applyPromptSubmitted(state: ChatEventReducerState, event: RuntimeEvent, data: Record<string, unknown>): ChatEventReducerState {
  const promptId = typeof data.promptId === "string" ? data.promptId : undefined;
  if (promptId === undefined) return state;
  const index = state.prompts.findIndex((prompt) => prompt.promptId === promptId);
  const prompts = [...state.prompts];
  if (index >= 0) {
    prompts[index] = { ...prompts[index]!, output: data.output, status: "submitted" };
  } else {
    // The prompt was opened before this state's first event.
    prompts.push({
      promptId,
      kind: typeof data.widgetKind === "string" ? data.widgetKind : "",
      input: undefined,
      output: data.output,
      offset: typeof data.promptOffset === "number" ? data.promptOffset : event.offset,
      status: "submitted",
    });
  }
  // The agent answers a submitted widget.
  return awaitingAssistant({ ...state, prompts });
}

function awaitingAssistant(state: ChatEventReducerState): ChatEventReducerState {
  if (state.lifecycle === "handoff" || state.lifecycle === "closed") return withoutPending(state);
  return { ...state, pendingMessageRole: "assistant" };
}

function withoutPending(state: ChatEventReducerState): ChatEventReducerState {
  if (state.pendingMessageRole === undefined) return state;
  const { pendingMessageRole: _, ...rest } = state;
  return rest;
}
