// The chat hook: a conversation followed over its event stream and reduced with the
// client's `reduceChatRuntimeEvent`, plus sending, streaming replies and widget submissions
// (seed 001 "Chat and voice bindings", "Client-side chat state").

import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { initialChatState, reduceChatRuntimeEvent } from "@cairn/client";
import type {
  ChatActivity,
  ChatActivityLabelInput,
  ChatEventReducerState,
  ChatMessage,
  ConversationChannelInput,
  ConversationLifecycle,
  PromptState,
  RuntimeEvent,
  ServiceClient,
} from "@cairn/client";

/** Where the chat is: the seed's chat hook statuses. */
export type ServiceChatStatus = "error" | "starting" | "sending" | "streaming" | "idle";

/** The client operations the chat hook calls. */
export type ServiceChatClient = Pick<
  ServiceClient,
  "createConversation" | "listEvents" | "sendMessage" | "streamEvents" | "submitWidget"
>;

export interface UseServiceChatOptions {
  /**
   * The runtime client (`createServiceClient`). The hook uses the latest one for each call;
   * a new client object does not restart the conversation's stream.
   */
  client: ServiceChatClient;
  /** The agent of a conversation the hook creates (default: the runtime's). */
  agentId?: string;
  /** The channel of a conversation the hook creates, also recorded on each message. */
  channel?: ConversationChannelInput;
  /**
   * An existing conversation to show and continue. Without one, the first `sendMessage`
   * creates a conversation. Changing it switches the chat to that conversation.
   */
  conversationId?: string;
  /** The `context` of a conversation the hook creates. */
  initialContext?: unknown;
  /** Labels activities (the reducer's option); `undefined` keeps the runtime's label. */
  formatActivityLabel?: (input: ChatActivityLabelInput) => string | undefined;
  /** Called once with the id of the conversation the hook created. */
  onConversationCreated?: (conversationId: string) => void;
}

/** What `submitWidget` takes: the prompt and the widget's output. */
export interface ServiceChatWidgetSubmission {
  promptId: string;
  output: unknown;
  /** The widget kind; default: the prompt's. */
  widgetKind?: string;
}

export interface UseServiceChatResult {
  /** What the agent does or did (`Understood: book demo`), `running` then `done`. */
  activities: ChatActivity[];
  /** Hides a prompt from `prompts` (after the UI is done with it); it stays in the log. */
  clearPrompt: (promptId: string) => void;
  /** The conversation shown: the option's, or the one the hook created. */
  conversationId: string | undefined;
  /** The last failure (a `ServiceApiError` for refused requests); cleared by the next send. */
  error: Error | undefined;
  /** The conversation's messages, with the one being sent and the reply being written. */
  messages: ChatMessage[];
  /** Widget prompts, `open` or `submitted`, not cleared. */
  prompts: PromptState[];
  /**
   * Sends a user message (creating the conversation first when there is none). Never
   * rejects: resolves `true` once the runtime took it, `false` on failure (see `error`).
   */
  sendMessage: (text: string) => Promise<boolean>;
  /** `starting`, `sending`, `streaming`, `idle` or `error`. */
  status: ServiceChatStatus;
  /**
   * The conversation's lifecycle as its events tell it: `active`, `handoff` (a person takes
   * over; the agent stays silent) or `closed`; `undefined` before there is a conversation.
   */
  lifecycle: ConversationLifecycle | undefined;
  /**
   * `assistant` while a reply is awaited (show a typing indicator): from sending a message or
   * a widget until the reply comes; never while a person has the conversation or it is closed.
   */
  pendingMessageRole: "user" | "assistant" | undefined;
  /**
   * Leaves the conversation shown (a closed one, say): the chat empties and the next
   * `sendMessage` starts a new conversation. A `conversationId` option is set aside until
   * it changes.
   */
  startNewConversation: () => void;
  /**
   * Submits a widget's output for an open prompt. Never rejects: resolves `true` once the
   * runtime took it, `false` on failure (see `error`).
   */
  submitWidget: (input: ServiceChatWidgetSubmission) => Promise<boolean>;
}

let localIds = 0;
function localId(prefix: string): string {
  localIds += 1;
  return `local_${prefix}_${Date.now().toString(36)}_${localIds}`;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** The chat hook. See `UseServiceChatOptions` and `docs/react.md`. */
export function useServiceChat(options: UseServiceChatOptions): UseServiceChatResult {
  const [createdConversationId, setCreatedConversationId] = useState<string | undefined>(undefined);
  /** A given conversation the chat left (`startNewConversation`): set aside until the option changes. */
  const [leftConversationId, setLeftConversationId] = useState<string | undefined>(undefined);
  const givenConversationId = options.conversationId === leftConversationId ? undefined : options.conversationId;
  const conversationId = givenConversationId ?? createdConversationId;
  const [chat, setChat] = useState<ChatEventReducerState>(initialChatState);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [phase, setPhase] = useState<ServiceChatStatus>("idle");
  const [loading, setLoading] = useState(false);
  const [cleared, setCleared] = useState<ReadonlySet<string>>(() => new Set());
  /** Prompts submitted here that the log has not confirmed yet: their output. */
  const [submitting, setSubmitting] = useState<ReadonlyMap<string, unknown>>(() => new Map());

  // The latest options, for callbacks that outlive a render.
  const latest = useRef(options);
  latest.current = options;
  /** The conversation the event stream follows, and whether the hook created it. */
  const following = useRef<{ id: string | undefined; created: boolean }>({ id: undefined, created: false });
  const creating = useRef<Promise<string> | undefined>(undefined);
  const aborts = useRef(new Set<AbortController>());
  const mounted = useRef(true);
  const conversationRef = useRef(conversationId);
  conversationRef.current = conversationId;

  const apply = useCallback((event: RuntimeEvent) => {
    setChat((state) =>
      reduceChatRuntimeEvent(state, event, {
        formatActivityLabel: (input) => latest.current.formatActivityLabel?.(input),
      }),
    );
  }, []);

  // Follow the conversation: its history (a conversation given by the caller), then its
  // event stream, the single source of what the chat shows.
  useEffect(() => {
    if (conversationId === undefined) {
      if (following.current.id !== undefined) {
        // The conversation was taken away: an empty chat, the next send creates one.
        following.current = { id: undefined, created: false };
        setChat(initialChatState);
        setCleared(new Set());
        setSubmitting(new Map());
        setError(undefined);
        setPhase("idle");
      }
      return;
    }
    const createdHere = following.current.created && following.current.id === conversationId;
    if (!createdHere) {
      // Another conversation: start from nothing.
      setChat(initialChatState);
      setCleared(new Set());
      setSubmitting(new Map());
      setError(undefined);
    }
    following.current = { id: conversationId, created: createdHere };
    // The client of this render: a new client object (made inline, say) does not restart
    // the stream; a new conversation does.
    const client = latest.current.client;
    let stop: (() => void) | undefined;
    let cancelled = false;
    const follow = (afterOffset: number | undefined) => {
      stop = client.streamEvents(
        conversationId,
        {
          onEvent: (event) => {
            if (!cancelled) apply(event);
          },
          onError: (streamError) => {
            // A ServiceApiError ends the stream for good (unknown conversation, refused
            // credentials); other errors are reconnections the client makes by itself.
            if (cancelled || !isFatalStreamError(streamError)) return;
            setError(asError(streamError));
            setPhase("error");
          },
        },
        afterOffset === undefined ? {} : { afterOffset },
      );
    };
    if (createdHere) {
      follow(undefined);
    } else {
      setLoading(true);
      client
        .listEvents(conversationId)
        .then(({ events }) => {
          if (cancelled) return;
          let last: number | undefined;
          for (const event of events) {
            apply(event);
            last = event.offset;
          }
          setLoading(false);
          follow(last);
        })
        .catch((loadError: unknown) => {
          if (cancelled) return;
          setLoading(false);
          setError(asError(loadError));
          setPhase("error");
        });
    }
    return () => {
      cancelled = true;
      stop?.();
    };
  }, [conversationId, apply]);

  useEffect(() => {
    mounted.current = true;
    const pending = aborts.current;
    return () => {
      mounted.current = false;
      for (const controller of pending) controller.abort();
      pending.clear();
    };
  }, []);

  /** The conversation to write to, created on first use. */
  const ensureConversation = useCallback(async (): Promise<string> => {
    const existing = conversationRef.current;
    if (existing !== undefined) return existing;
    if (creating.current === undefined) {
      const { agentId, channel, initialContext } = latest.current;
      creating.current = latest.current.client
        .createConversation({
          ...(agentId === undefined ? {} : { agentId }),
          ...(channel === undefined ? {} : { channel }),
          ...(initialContext === undefined ? {} : { context: initialContext }),
        })
        .then(({ conversation }) => {
          following.current = { id: conversation.id, created: true };
          conversationRef.current = conversation.id;
          if (mounted.current) setCreatedConversationId(conversation.id);
          latest.current.onConversationCreated?.(conversation.id);
          return conversation.id;
        })
        .finally(() => {
          creating.current = undefined;
        });
    }
    return creating.current;
  }, []);

  const sendMessage = useCallback(
    async (text: string): Promise<boolean> => {
      const message = text.trim();
      if (message === "") return false;
      const userId = localId("user");
      const replyId = localId("reply");
      setError(undefined);
      // The message shows at once; its `message` event replaces it (same text).
      setChat((state) => ({
        ...state,
        messages: [...state.messages, { id: userId, role: "user", text: message, status: "sending" }],
      }));
      const controller = new AbortController();
      aborts.current.add(controller);
      try {
        if (conversationRef.current === undefined) setPhase("starting");
        const id = await ensureConversation();
        if (!mounted.current) return false;
        setPhase("sending");
        const { channel } = latest.current;
        const result = await latest.current.client.sendMessage(id, message, {
          ...(channel === undefined ? {} : { channel }),
          signal: controller.signal,
          onAssistantTextDelta: (delta) => {
            if (!mounted.current) return;
            setPhase("streaming");
            setChat((state) => withReplyDelta(state, userId, replyId, delta));
          },
        });
        if (!mounted.current) return true;
        // A reply that came whole (no deltas) shows until the stream brings its event.
        if (result.text !== "") {
          setChat((state) => withReplyText(state, userId, replyId, result.text));
        }
        setPhase("idle");
        return true;
      } catch (sendError) {
        if (!mounted.current || controller.signal.aborted) return false;
        setChat((state) => ({
          ...state,
          messages: state.messages
            .filter((existing) => existing.id !== replyId)
            .map((existing) => (existing.id === userId ? { ...existing, status: "failed" } : existing)),
        }));
        setError(asError(sendError));
        setPhase("error");
        return false;
      } finally {
        aborts.current.delete(controller);
      }
    },
    [ensureConversation],
  );

  const submitWidget = useCallback(
    async (input: ServiceChatWidgetSubmission): Promise<boolean> => {
      const id = conversationRef.current;
      if (id === undefined) {
        setError(new Error("submitWidget: there is no conversation yet"));
        setPhase("error");
        return false;
      }
      const widgetKind = input.widgetKind ?? promptsRef.current.find((prompt) => prompt.promptId === input.promptId)?.kind;
      if (widgetKind === undefined) {
        setError(new Error(`submitWidget: no prompt ${input.promptId} in this chat; pass widgetKind`));
        setPhase("error");
        return false;
      }
      setError(undefined);
      setSubmitting((map) => new Map(map).set(input.promptId, input.output));
      setPhase("sending");
      try {
        await latest.current.client.submitWidget(id, { promptId: input.promptId, widgetKind, output: input.output });
        if (!mounted.current) return true;
        setPhase("idle");
        return true;
      } catch (submitError) {
        if (!mounted.current) return false;
        setSubmitting((map) => {
          const next = new Map(map);
          next.delete(input.promptId);
          return next;
        });
        setError(asError(submitError));
        setPhase("error");
        return false;
      }
    },
    [],
  );

  const startNewConversation = useCallback(() => {
    for (const controller of aborts.current) controller.abort();
    aborts.current.clear();
    setLeftConversationId(latest.current.conversationId);
    setCreatedConversationId(undefined);
    conversationRef.current = undefined;
  }, []);

  const clearPrompt = useCallback((promptId: string) => {
    setCleared((set) => new Set(set).add(promptId));
  }, []);

  const prompts = useMemo(
    () =>
      chat.prompts
        .filter((prompt) => !cleared.has(prompt.promptId))
        .map((prompt) =>
          prompt.status === "open" && submitting.has(prompt.promptId)
            ? { ...prompt, status: "submitted" as const, output: submitting.get(prompt.promptId) }
            : prompt,
        ),
    [chat.prompts, cleared, submitting],
  );
  const promptsRef = useRef(prompts);
  promptsRef.current = prompts;

  const status: ServiceChatStatus = phase === "idle" && loading ? "starting" : phase;
  const lifecycle = conversationId === undefined ? undefined : chat.lifecycle;
  // A reply is awaited from the moment a message is sent (the runtime answers within the
  // request) until it comes, as the log tells; never while a person has the conversation.
  const quiet = lifecycle === "handoff" || lifecycle === "closed";
  const pendingMessageRole = quiet ? undefined : (chat.pendingMessageRole ?? (phase === "sending" ? "assistant" : undefined));

  return {
    activities: chat.activities,
    clearPrompt,
    conversationId,
    error,
    messages: chat.messages,
    prompts,
    sendMessage,
    status,
    submitWidget,
    lifecycle,
    pendingMessageRole,
    startNewConversation,
  };
}

/** Whether a stream error ends the stream (the client stops on 4xx answers). */
function isFatalStreamError(error: unknown): boolean {
  return (
    typeof error === "object" &&
    error !== null &&
    (error as { name?: unknown }).name === "ServiceApiError" &&
    typeof (error as { status?: unknown }).status === "number"
  );
}

/**
 * The state with a piece of the reply being written: appended to the reply's stand-in
 * (created on the first piece). Once the log has brought the turn (the user's stand-in was
 * replaced by its event) a late piece changes nothing, so the reply never shows twice.
 */
function withReplyDelta(state: ChatEventReducerState, userId: string, replyId: string, delta: string): ChatEventReducerState {
  if (!state.messages.some((message) => message.id === userId)) return state;
  const index = state.messages.findIndex((message) => message.id === replyId);
  const messages = [...state.messages];
  if (index < 0) {
    messages.push({ id: replyId, role: "assistant", text: delta, status: "streaming" });
  } else {
    const reply = messages[index] as ChatMessage;
    messages[index] = { ...reply, text: reply.text + delta };
  }
  return { ...state, messages };
}

/** The state with the whole reply in its stand-in, unless the log has brought the turn. */
function withReplyText(state: ChatEventReducerState, userId: string, replyId: string, text: string): ChatEventReducerState {
  if (!state.messages.some((message) => message.id === userId)) return state;
  const index = state.messages.findIndex((message) => message.id === replyId);
  const messages = [...state.messages];
  if (index < 0) messages.push({ id: replyId, role: "assistant", text, status: "streaming" });
  else messages[index] = { ...(messages[index] as ChatMessage), text };
  return { ...state, messages };
}
