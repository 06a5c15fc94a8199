import { useEffect, useState } from "react";
import { call, formatTime, streamConversation, type Conversation, type ReplayResult, type RuntimeEvent } from "../api";
import { linkProps } from "../router";
import { Badge, ErrorText, Page, useAction, useLoad } from "../ui";
import { ChatPanel } from "../chat/ChatPanel";

interface ConversationList {
  conversations: Conversation[];
  nextCursor?: string | null;
  prevCursor?: string | null;
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
  return (
    <Page
      title="Conversations"
      actions={
        <button type="button" onClick={() => setChatting(!chatting)} aria-expanded={chatting}>
          {chatting ? "Close chat" : "New chat"}
        </button>
      }
    >
      <div className="split">
        <div className="list">
          <ErrorText error={error} />
          <ul className="conversations" aria-busy={loading} aria-label="conversation list">
            {data?.conversations.map((conversation) => (
              <li key={conversation.id} aria-current={conversation.id === selected ? "true" : undefined}>
                <a {...linkProps(`/conversations/${encodeURIComponent(conversation.id)}`)}>
                  <code>{conversation.id}</code>
                </a>
                <span className="meta">
                  {conversation.agentId} · <Badge value={conversation.lifecycle} /> · {formatTime(conversation.updatedAt)}
                </span>
              </li>
            ))}
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

  const events = [...replayed, ...streamed];
  const messages = [
    ...(data?.messages ?? []),
    ...streamed
      .filter((event) => event.type === "message")
      .map((event) => ({
        id: String(event.data.messageId ?? event.id),
        role: String(event.data.role ?? ""),
        text: String(event.data.text ?? ""),
        offset: event.offset,
        aborted: Boolean(event.data.aborted),
        intermediate: Boolean(event.data.intermediate),
      })),
  ];

  return (
    <section className="conversation" aria-label={`conversation ${id}`}>
      <header className="page-header">
        <h2>
          <code>{id}</code> {data && <Badge value={data.conversation.lifecycle} />}
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
      {data && <Operate id={id} lifecycle={data.conversation.lifecycle} onDone={reload} />}
      {data && data.openPrompts.length > 0 && (
        <p className="meta">
          Waiting for: {data.openPrompts.map((prompt) => `${prompt.widgetKind} (${prompt.promptId})`).join(", ")}
        </p>
      )}
      {view === "messages" ? (
        <ol className="transcript" aria-label="transcript">
          {messages.map((message) => (
            <li key={`${message.offset}-${message.id}`} className={`bubble ${message.role}${message.aborted ? " aborted" : ""}`}>
              <span className="role">{message.role}</span>
              <span className="text">{message.text}</span>
            </li>
          ))}
        </ol>
      ) : (
        <table aria-label="events">
          <thead>
            <tr>
              <th>#</th>
              <th>Type</th>
              <th>Time</th>
              <th>Data</th>
            </tr>
          </thead>
          <tbody>
            {events.map((event) => (
              <tr key={event.offset}>
                <td>{event.offset}</td>
                <td>{event.type}</td>
                <td>{formatTime(event.createdAt)}</td>
                <td>
                  <code className="json">{JSON.stringify(event.data)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data?.nextAfterOffset != null && <p className="meta">The replay shows the first 1,000 events.</p>}
    </section>
  );
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
