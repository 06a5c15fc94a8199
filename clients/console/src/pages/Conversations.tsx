import { useCallback, useEffect, useState } from "react";
import {
  call,
  formatTime,
  streamConversation,
  type Conversation,
  type ReplayMessage,
  type ReplayResult,
  type RuntimeEvent,
} from "../api";
import { linkProps } from "../router";
import { Badge, ErrorText, Page, Toggle, useAction, useLoad } from "../ui";
import { ChatPanel } from "../chat/ChatPanel";

interface LastMessage {
  role: string;
  text: string;
  offset: number;
  createdAt: string;
}

interface ConversationList {
  conversations: Conversation[];
  nextCursor?: string | null;
  prevCursor?: string | null;
  lastMessages?: Record<string, LastMessage>;
}

/** How often the list and an open conversation are read again, so lifecycles stay current. */
const REFRESH_MS = 3000;

/** A conversation's channel type (`web`, `sms`, `voice`, …), when it has one. */
function channelOf(conversation: Conversation): string | undefined {
  const channel = conversation.channel as { type?: unknown } | string | null | undefined;
  if (typeof channel === "string") return channel;
  return typeof channel?.type === "string" ? channel.type : undefined;
}

/** Reads `reload` again every `ms` while the page shows. */
function useEvery(ms: number, reload: () => void) {
  useEffect(() => {
    const timer = setInterval(reload, ms);
    return () => clearInterval(timer);
  }, [ms, reload]);
}

type Cursor = { after?: string; before?: string };

/** Conversations of the runtime: the list, a replay, the live event stream, and a chat. */
export function ConversationsPage({ selected }: { selected?: string }) {
  const [cursor, setCursor] = useState<Cursor>({});
  const [chatting, setChatting] = useState(false);
  const { data, error, loading, reload } = useLoad(
    () => call<ConversationList>("GET", "/api/runtime/conversations", undefined, { limit: 20, ...cursor }),
    [cursor],
  );
  // Lifecycles change under the console's eyes (a handoff, a close): the list keeps up.
  useEvery(REFRESH_MS, reload);
  return (
    <Page
      title="Conversations"
      actions={<Toggle open={chatting} onToggle={setChatting} label="New chat" closeLabel="Close chat" />}
    >
      <div className="split">
        <div className="list">
          <ErrorText error={error} />
          <ul className="conversations" aria-busy={loading} aria-label="conversation list">
            {data?.conversations.map((conversation) => {
              const last = data.lastMessages?.[conversation.id];
              return (
                <li key={conversation.id} aria-current={conversation.id === selected ? "true" : undefined} aria-label={`conversation ${conversation.id}`}>
                  <a {...linkProps(`/conversations/${encodeURIComponent(conversation.id)}`)}>
                    <code>{conversation.id}</code>
                  </a>
                  <span className="last" data-testid="last-message">
                    {last ? `${last.role === "user" ? "Visitor" : "Agent"}: ${last.text}` : "No messages yet"}
                  </span>
                  <span className="meta">
                    <span data-testid="channel">{channelOf(conversation) ?? "no channel"}</span> · {conversation.agentId} ·{" "}
                    <Badge value={conversation.lifecycle} /> · <time dateTime={conversation.updatedAt}>{formatTime(conversation.updatedAt)}</time>
                  </span>
                </li>
              );
            })}
          </ul>
          {data && data.conversations.length === 0 && <p className="empty">No conversations yet.</p>}
          <nav className="pager" aria-label="conversation pages">
            <button type="button" disabled={!data?.prevCursor} onClick={() => setCursor({ before: data?.prevCursor ?? undefined })}>
              Newer
            </button>
            <button type="button" className="secondary" onClick={reload}>
              Refresh
            </button>
            <button type="button" disabled={!data?.nextCursor} onClick={() => setCursor({ after: data?.nextCursor ?? undefined })}>
              Older
            </button>
          </nav>
        </div>
        <div className="detail">
          {chatting && (
            <ChatPanel
              onConversationCreated={() => {
                reload();
              }}
            />
          )}
          {selected ? <ConversationDetail key={selected} id={selected} /> : !chatting && <p className="empty">Pick a conversation to replay it.</p>}
        </div>
      </div>
    </Page>
  );
}

function ConversationDetail({ id }: { id: string }) {
  const { data, error, reload } = useLoad(
    () => call<ReplayResult>("GET", `/api/runtime/conversations/${encodeURIComponent(id)}/replay`),
    [id],
  );
  const [live, setLive] = useState(false);
  const [streamed, setStreamed] = useState<RuntimeEvent[]>([]);
  const [state, setState] = useState<string>("closed");
  const [view, setView] = useState<"messages" | "events">("messages");
  // Without the live stream, the replay is read again now and then: a handoff or a close
  // made elsewhere shows without a reload.
  const poll = useCallback(() => {
    if (!live) reload();
  }, [live, reload]);
  useEvery(REFRESH_MS, poll);

  const replayed = data?.events ?? [];
  const lastReplayed = replayed.length ? replayed[replayed.length - 1].offset : undefined;
  useEffect(() => {
    if (!live || !data) return;
    const stop = streamConversation(
      id,
      lastReplayed,
      (event) => setStreamed((events) => [...events, event]),
      (next, reason) => setState(reason ? `${next}: ${reason}` : next),
    );
    return () => {
      stop();
      setState("closed");
    };
  }, [live, data, id, lastReplayed]);

  const events = [...replayed, ...streamed.filter((event) => lastReplayed === undefined || event.offset > lastReplayed)];
  const lifecycle = lifecycleAfter(data?.conversation.lifecycle, streamed);
  const timeline = timelineOf(events, data?.messages ?? []);

  return (
    <section className="conversation" aria-label={`conversation ${id}`}>
      <header className="page-header">
        <h2>
          <code>{id}</code> {lifecycle && <Badge value={lifecycle} />}
        </h2>
        <div className="actions">
          <label className="inline">
            <input type="checkbox" checked={live} onChange={(event) => setLive(event.target.checked)} />
            Live
          </label>
          {live && (
            <span className="meta" role="status">
              stream {state}
            </span>
          )}
          <select aria-label="View" value={view} onChange={(event) => setView(event.target.value as "messages" | "events")}>
            <option value="messages">messages</option>
            <option value="events">events</option>
          </select>
        </div>
      </header>
      <ErrorText error={error} />
      {data && lifecycle && <Operate id={id} lifecycle={lifecycle} onDone={reload} />}
      {view === "messages" ? (
        <ol className="transcript" aria-label="transcript">
          {timeline.map((item) => (
            <TimelineEntry key={item.key} item={item} />
          ))}
        </ol>
      ) : (
        <ol className="events" aria-label="events">
          {events.map((event) => (
            <li key={event.offset}>
              <details>
                <summary>
                  <span className="offset">#{event.offset}</span> <strong>{event.type}</strong>{" "}
                  <time className="meta" dateTime={event.createdAt}>
                    {formatTime(event.createdAt)}
                  </time>{" "}
                  <span className="meta">{eventGist(event)}</span>
                </summary>
                <pre className="json">{JSON.stringify(event.data, null, 2)}</pre>
              </details>
            </li>
          ))}
        </ol>
      )}
      {data?.nextAfterOffset != null && <p className="meta">The replay shows the first 1,000 events.</p>}
    </section>
  );
}

/** The lifecycle after the events streamed since the replay. */
function lifecycleAfter(replayed: string | undefined, streamed: RuntimeEvent[]): string | undefined {
  let lifecycle = replayed;
  for (const event of streamed) {
    if (event.type === "conversation.handoff") lifecycle = "handoff";
    else if (event.type === "conversation.closed") lifecycle = "closed";
    else if (event.type === "conversation.resumed") lifecycle = "active";
  }
  return lifecycle;
}

type TimelineItem =
  | { key: string; kind: "message"; role: string; text: string; aborted: boolean; intermediate: boolean; sources: SourceLink[] }
  | { key: string; kind: "prompt"; widgetKind: string; input: unknown; answer?: unknown; status: "open" | "answered" | "closed" }
  | { key: string; kind: "marker"; text: string };

interface SourceLink {
  id: string;
  label: string;
  url?: string;
}

/**
 * What the replay view shows, in log order: messages (with a truncation applied and their
 * sources), each widget prompt with its answer, and markers where a person took over, the
 * conversation resumed or closed.
 */
function timelineOf(events: RuntimeEvent[], replayedMessages: ReplayMessage[]): TimelineItem[] {
  const replayedText = new Map(replayedMessages.map((message) => [message.offset, message]));
  const truncated = new Map<string, string>();
  for (const event of events) {
    if (event.type === "message.truncated") truncated.set(String(event.data.messageId), String(event.data.text ?? ""));
  }
  const answers = new Map<string, unknown>();
  for (const event of events) {
    if (event.type === "prompt.submitted") answers.set(String(event.data.promptId), event.data.output);
  }
  const closed = events.some((event) => event.type === "conversation.closed");
  const items: TimelineItem[] = [];
  for (const event of events) {
    const data = event.data;
    const key = `${event.offset}`;
    switch (event.type) {
      case "message": {
        const messageId = String(data.messageId ?? event.id);
        const replayed = replayedText.get(event.offset);
        const text = truncated.get(messageId) ?? replayed?.text ?? String(data.text ?? "");
        const sources = Array.isArray(data.supportSourceLinks) ? (data.supportSourceLinks as SourceLink[]) : [];
        items.push({
          key,
          kind: "message",
          role: String(data.role ?? ""),
          text: sources.length > 0 ? text.replace(/\n\nSources: .*$/s, "") : text,
          aborted: Boolean(data.aborted) || truncated.has(messageId),
          intermediate: Boolean(data.intermediate),
          sources,
        });
        break;
      }
      case "prompt.opened": {
        const promptId = String(data.promptId);
        const answered = answers.has(promptId);
        items.push({
          key,
          kind: "prompt",
          widgetKind: String(data.widgetKind ?? "widget"),
          input: data.input,
          answer: answers.get(promptId),
          status: answered ? "answered" : closed ? "closed" : "open",
        });
        break;
      }
      case "conversation.handoff":
        items.push({ key, kind: "marker", text: `Handed off to a person${data.reason ? `: ${String(data.reason)}` : ""}` });
        break;
      case "conversation.resumed":
        items.push({ key, kind: "marker", text: "Resumed by the agent" });
        break;
      case "conversation.closed":
        items.push({ key, kind: "marker", text: `Closed${data.reason ? `: ${String(data.reason)}` : ""}` });
        break;
    }
  }
  return items;
}

function TimelineEntry({ item }: { item: TimelineItem }) {
  if (item.kind === "marker") {
    return (
      <li className="marker" role="separator" aria-label={item.text}>
        {item.text}
      </li>
    );
  }
  if (item.kind === "prompt") {
    return (
      <li className="prompt" aria-label={`${item.widgetKind} prompt`}>
        <span className="role">
          {item.widgetKind} · {item.status}
        </span>
        <span className="meta">asked: {gist(item.input)}</span>
        {item.answer !== undefined && <span className="answer">answer: {gist(item.answer)}</span>}
      </li>
    );
  }
  return (
    <li className={`bubble ${item.role}${item.aborted ? " aborted" : ""}${item.intermediate ? " intermediate" : ""}`}>
      <span className="role">{item.role}</span>
      <span className="text">{item.text}</span>
      {item.sources.length > 0 && (
        <ul className="sources" aria-label="Sources">
          {item.sources.map((source) => (
            <li key={source.url ?? source.id}>
              {source.url && /^https?:\/\//i.test(source.url) ? (
                <a href={source.url} target="_blank" rel="noopener noreferrer">
                  {source.label}
                </a>
              ) : (
                source.label
              )}
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/** A value in a line: an object's `key: value` pairs, else its JSON. */
function gist(value: unknown): string {
  if (value === undefined || value === null) return "nothing";
  if (typeof value === "object" && !Array.isArray(value)) {
    return Object.entries(value as Record<string, unknown>)
      .map(([key, item]) => `${key}: ${typeof item === "string" ? item : JSON.stringify(item)}`)
      .join(", ");
  }
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The line after an event's type: who said what, which widget, why. */
function eventGist(event: RuntimeEvent): string {
  const data = event.data;
  if (event.type === "message") return `${String(data.role ?? "")}: ${String(data.text ?? "").slice(0, 80)}`;
  if (event.type === "activity") return `${String(data.label ?? data.kind ?? "")} (${String(data.status ?? "")})`;
  if (event.type.startsWith("prompt.")) return String(data.widgetKind ?? data.promptId ?? "");
  if (event.type.startsWith("journey.")) return [data.journeyId, data.stateId].filter(Boolean).join(" / ");
  if (typeof data.reason === "string") return data.reason;
  return "";
}

/** What an operator does to a conversation: a journey event (e.g. `feedback.requested`), hand-off, resume, close. */
function Operate(props: { id: string; lifecycle: string; onDone: () => void }) {
  const [eventName, setEventName] = useState("feedback.requested");
  const action = useAction();
  const base = `/api/runtime/conversations/${encodeURIComponent(props.id)}`;
  const run = async (path: string, body: unknown) => {
    const done = await action.run(() => call("POST", base + path, body));
    if (done !== undefined) props.onDone();
  };
  const closed = props.lifecycle === "closed";
  return (
    <div className="panel row" role="group" aria-label="operate">
      <label>
        Journey event
        <input value={eventName} onChange={(event) => setEventName(event.target.value)} />
      </label>
      <button type="button" disabled={action.busy || closed || eventName.trim() === ""} onClick={() => void run("/journey-events", { eventName: eventName.trim(), payload: {} })}>
        Send event
      </button>
      {props.lifecycle === "active" && (
        <button type="button" className="secondary" disabled={action.busy} onClick={() => void run("/handoff", { reason: "taken over from the console" })}>
          Hand off
        </button>
      )}
      {props.lifecycle !== "active" && (
        <button type="button" className="secondary" disabled={action.busy} onClick={() => void run("/resume", {})}>
          Resume
        </button>
      )}
      {!closed && (
        <button type="button" className="danger" disabled={action.busy} onClick={() => void run("/close", {})}>
          Close
        </button>
      )}
      <ErrorText error={action.error} />
    </div>
  );
}
