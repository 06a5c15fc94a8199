// The chat widget: the chat hook's conversation as a message log with the agent's widget
// prompts in place, what the agent is doing, and a composer.

import { useEffect, useId, useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import { formatSupportReferences, type ChatMessage, type PromptState, type SupportSourceLink } from "@cairn/client";

import { appearanceStyle, serviceChatWidgetCss, type ServiceChatAppearance } from "./appearance.js";
import { defaultWidgetRenderers, FallbackWidget, type WidgetRenderers } from "./renderers.js";
import { useServiceChat, type UseServiceChatOptions } from "./useServiceChat.js";

/** What `onWidgetSubmit` receives. */
export interface ServiceChatWidgetSubmitEvent {
  kind: string;
  output: unknown;
  promptId: string;
}

export interface ServiceChatWidgetProps extends UseServiceChatOptions {
  /** Colours, radius and font, as CSS variables. */
  appearance?: ServiceChatAppearance;
  /** The composer's placeholder (default `Type a message…`). */
  placeholder?: string;
  /** The send button's text (default `Send`). */
  sendLabel?: string;
  /** The heading, also the widget's accessible name (default `Chat`). */
  title?: string;
  /** Renderers by widget kind, over the built-in ones (`form`, `rating`, `choice`, `date`, `confirm`). */
  widgets?: WidgetRenderers;
  /** Called after a widget's output was submitted to the runtime. */
  onWidgetSubmit?: (event: ServiceChatWidgetSubmitEvent) => void;
  /** An extra class on the widget's root. */
  className?: string;
}

type LogItem =
  | { type: "message"; key: string; position: number; order: number; message: ChatMessage }
  | { type: "prompt"; key: string; position: number; order: number; prompt: PromptState };

/** Messages in log order with each prompt after the message that asks for it. */
function logItems(messages: ChatMessage[], prompts: PromptState[]): LogItem[] {
  const items: LogItem[] = [];
  messages.forEach((message, order) => {
    // Messages not in the log yet (being sent, being written) come last, in their order.
    const position = message.offset ?? Number.MAX_SAFE_INTEGER;
    items.push({ type: "message", key: `m:${message.id}`, position, order, message });
  });
  prompts.forEach((prompt, order) => {
    const position = (prompt.displayOffset ?? prompt.offset) + 0.5;
    items.push({ type: "prompt", key: `p:${prompt.promptId}`, position, order: messages.length + order, prompt });
  });
  return items.sort((a, b) => a.position - b.position || a.order - b.order);
}

const STATUS_NOTES: Partial<Record<ChatMessage["status"], string>> = {
  sending: "Sending…",
  failed: "Not sent",
  aborted: "Interrupted",
};

/**
 * What a visitor reads for a failure: plain words by the kind of failure, never the server's
 * own message (which names conversations and routes; the hook's `error` keeps it for the app).
 */
export function visitorErrorText(error: Error): string {
  const status = (error as { status?: unknown }).status;
  if (typeof status !== "number") return "We couldn't reach the chat. Check your connection and try again.";
  if (status === 401 || status === 403) return "This chat session has expired. Reload the page to start again.";
  if (status === 409) return "This conversation can't take messages right now.";
  if (status === 413 || status === 422 || status === 400) return "That message couldn't be sent. Try a shorter one.";
  if (status === 429) return "Too many messages at once. Wait a moment and try again.";
  return "Something went wrong on our side. Please try again.";
}

/** A message's text without the sources line its links are shown for. */
function shownText(message: ChatMessage): string {
  if (!message.sources || message.sources.length === 0) return message.text;
  const sources = formatSupportReferences(message.sources);
  return message.text.endsWith(sources) ? message.text.slice(0, -sources.length).trimEnd() : message.text;
}

function Sources({ links }: { links: SupportSourceLink[] }): ReactNode {
  return (
    <ul className="cairn-chat__sources" aria-label="Sources">
      {links.map((link) => (
        <li key={link.url ?? link.id}>
          {link.url === undefined || !/^https?:\/\//i.test(link.url) ? (
            link.label
          ) : (
            <a href={link.url} target="_blank" rel="noopener noreferrer">
              {link.label}
            </a>
          )}
        </li>
      ))}
    </ul>
  );
}

/** The chat widget. Takes the chat hook's options plus its own; see `docs/react.md`. */
export function ServiceChatWidget(props: ServiceChatWidgetProps): ReactNode {
  const {
    appearance,
    placeholder = "Type a message…",
    sendLabel = "Send",
    title = "Chat",
    widgets,
    onWidgetSubmit,
    className,
    ...chatOptions
  } = props;
  const chat = useServiceChat(chatOptions);
  const [draft, setDraft] = useState("");
  const id = useId();
  const logRef = useRef<HTMLDivElement>(null);
  const closed = chat.lifecycle === "closed";
  const busy = closed || chat.status === "starting" || chat.status === "sending" || chat.status === "streaming";
  const renderers = { ...defaultWidgetRenderers, ...widgets };

  const lastText = chat.messages[chat.messages.length - 1]?.text;
  useEffect(() => {
    const log = logRef.current;
    if (log !== null) log.scrollTop = log.scrollHeight;
  }, [chat.messages.length, chat.prompts.length, lastText]);

  const send = () => {
    const text = draft.trim();
    if (text === "" || busy) return;
    setDraft("");
    void chat.sendMessage(text);
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      send();
    }
  };
  const running = chat.activities.filter((activity) => activity.status === "running");
  // Waiting for the reply, and no piece of it showing yet.
  const typing =
    chat.pendingMessageRole === "assistant" &&
    running.length === 0 &&
    !chat.messages.some((message) => message.status === "streaming");

  return (
    <section
      className={className === undefined ? "cairn-chat" : `cairn-chat ${className}`}
      style={appearanceStyle(appearance)}
      aria-labelledby={`${id}-title`}
      data-status={chat.status}
    >
      <style href="cairn-chat-widget" precedence="low">
        {serviceChatWidgetCss}
      </style>
      <header className="cairn-chat__header">
        <h2 className="cairn-chat__title" id={`${id}-title`}>
          {title}
        </h2>
      </header>
      <div className="cairn-chat__log" role="log" aria-live="polite" aria-label="Messages" ref={logRef}>
        {logItems(chat.messages, chat.prompts).map((item) => {
          if (item.type === "message") {
            const { message } = item;
            const note = STATUS_NOTES[message.status];
            return (
              <div
                key={item.key}
                className={`cairn-chat__message cairn-chat__message--${message.role}`}
                data-role={message.role}
                data-status={message.status}
                aria-busy={message.status === "streaming" || message.status === "sending" ? true : undefined}
              >
                <span className="cairn-chat__visually-hidden">{message.role === "user" ? "You: " : "Assistant: "}</span>
                {shownText(message)}
                {message.sources && message.sources.length > 0 ? <Sources links={message.sources} /> : null}
                {note === undefined ? null : <span className="cairn-chat__message-note">{note}</span>}
              </div>
            );
          }
          const { prompt } = item;
          const Renderer = renderers[prompt.kind] ?? FallbackWidget;
          const submitted = prompt.status !== "open";
          return (
            <Renderer
              key={item.key}
              kind={prompt.kind}
              promptId={prompt.promptId}
              input={prompt.input}
              output={prompt.output}
              submitted={submitted}
              disabled={submitted || busy}
              {...(appearance === undefined ? {} : { appearance })}
              submit={(output: unknown) => {
                if (submitted) return;
                void chat.submitWidget({ promptId: prompt.promptId, widgetKind: prompt.kind, output }).then((accepted) => {
                  if (accepted) onWidgetSubmit?.({ kind: prompt.kind, output, promptId: prompt.promptId });
                });
              }}
            />
          );
        })}
        {running.map((activity) => (
          <div key={activity.id} className="cairn-chat__activity" role="status">
            {activity.label}…
          </div>
        ))}
        {typing ? (
          <div className="cairn-chat__typing" role="status" aria-label="The assistant is typing">
            <span />
            <span />
            <span />
          </div>
        ) : null}
        {chat.lifecycle === "handoff" ? (
          <p className="cairn-chat__notice" role="status">
            A person from the team is joining this conversation. They will reply here.
          </p>
        ) : null}
      </div>
      {chat.error === undefined || closed ? null : (
        <p className="cairn-chat__error" role="alert">
          {visitorErrorText(chat.error)}
        </p>
      )}
      {closed ? (
        <div className="cairn-chat__closed" role="status">
          <p>This conversation has ended.</p>
          <button
            type="button"
            className="cairn-chat__button"
            onClick={() => {
              setDraft("");
              chat.startNewConversation();
            }}
          >
            Start a new conversation
          </button>
        </div>
      ) : null}
      <form
        className="cairn-chat__composer"
        onSubmit={(event) => {
          event.preventDefault();
          send();
        }}
      >
        <label className="cairn-chat__visually-hidden" htmlFor={`${id}-input`}>
          Message
        </label>
        <textarea
          id={`${id}-input`}
          rows={1}
          value={draft}
          placeholder={placeholder}
          disabled={closed}
          onChange={(event) => setDraft(event.currentTarget.value)}
          onKeyDown={onKeyDown}
        />
        <button type="submit" className="cairn-chat__button" disabled={busy || draft.trim() === ""}>
          {sendLabel}
        </button>
      </form>
    </section>
  );
}
