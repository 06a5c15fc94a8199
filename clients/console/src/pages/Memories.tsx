import { useState, type FormEvent } from "react";
import { call, formatTime, type Memory, type MemoryList, type Scope, type Status } from "../api";
import { Badge, ErrorText, Page, Pager, useAction, useAdding, useLoad } from "../ui";

const SCOPES: Scope[] = ["repo", "user", "global", "task"];
const STATUSES: Status[] = ["active", "review", "stale"];
const LIMIT = 20;

interface Filters {
  q: string;
  scope: string;
  status: string;
  repo: string;
  includeArchived: boolean;
}

const EMPTY: Filters = { q: "", scope: "", status: "", repo: "", includeArchived: false };

type Listing = { kind: "list"; list: MemoryList } | { kind: "search"; hits: { memory: Memory; score: number }[] };

export function MemoriesPage() {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [offset, setOffset] = useState(0);
  const { data, error, loading, reload } = useLoad<Listing>(async () => {
    const common = { scope: filters.scope, status: filters.status, repo: filters.repo.trim() };
    if (filters.q.trim()) {
      const result = await call<{ hits: { memory: Memory; score: number }[] }>("GET", "/api/search", undefined, {
        q: filters.q.trim(),
        limit: 50,
        ...common,
      });
      return { kind: "search", hits: result.hits };
    }
    const list = await call<MemoryList>("GET", "/api/memories", undefined, {
      ...common,
      includeArchived: filters.includeArchived ? true : undefined,
      limit: LIMIT,
      offset,
    });
    return { kind: "list", list };
  }, [filters, offset]);
  const adding = useAdding("Add memory", () => {
    setOffset(0);
    reload();
  });

  const apply = (event: FormEvent) => {
    event.preventDefault();
    setOffset(0);
    setFilters({ ...draft });
  };
  const memories = data?.kind === "list" ? data.list.memories : data?.kind === "search" ? data.hits.map((hit) => hit.memory) : [];
  const scores = new Map(data?.kind === "search" ? data.hits.map((hit) => [hit.memory.id, hit.score]) : []);

  return (
    <Page title="Memories" actions={adding.toggle}>
      {adding.open && <AddMemory onAdded={adding.added} />}
      <form className="filters" onSubmit={apply} role="search">
        <input
          type="search"
          aria-label="Search memories"
          placeholder="Search memories…"
          value={draft.q}
          onChange={(event) => setDraft({ ...draft, q: event.target.value })}
        />
        <select aria-label="Scope" value={draft.scope} onChange={(event) => setDraft({ ...draft, scope: event.target.value })}>
          <option value="">any scope</option>
          {SCOPES.map((scope) => (
            <option key={scope}>{scope}</option>
          ))}
        </select>
        <select aria-label="Status" value={draft.status} onChange={(event) => setDraft({ ...draft, status: event.target.value })}>
          <option value="">any status</option>
          {STATUSES.map((status) => (
            <option key={status}>{status}</option>
          ))}
        </select>
        <input
          aria-label="Repository"
          placeholder="repository"
          value={draft.repo}
          onChange={(event) => setDraft({ ...draft, repo: event.target.value })}
        />
        <label className="inline">
          <input
            type="checkbox"
            checked={draft.includeArchived}
            disabled={draft.q.trim() !== ""}
            onChange={(event) => setDraft({ ...draft, includeArchived: event.target.checked })}
          />
          archived too
        </label>
        <button type="submit">{draft.q.trim() ? "Search" : "Apply"}</button>
        {(filters.q || filters.scope || filters.status || filters.repo || filters.includeArchived) && (
          <button
            type="button"
            className="secondary"
            onClick={() => {
              setDraft(EMPTY);
              setFilters(EMPTY);
              setOffset(0);
            }}
          >
            Clear
          </button>
        )}
      </form>
      <ErrorText error={error} />
      {data?.kind === "search" && (
        <p className="summary">
          {data.hits.length} {data.hits.length === 1 ? "match" : "matches"} for “{filters.q.trim()}”, best first
        </p>
      )}
      <ul className="cards" aria-busy={loading} aria-label="memories">
        {memories.map((memory) => (
          <MemoryCard key={memory.id} memory={memory} score={scores.get(memory.id)} onChanged={reload} />
        ))}
      </ul>
      {!loading && memories.length === 0 && !error && <p className="empty">No memories match.</p>}
      {data?.kind === "list" && <Pager offset={offset} limit={LIMIT} total={data.list.total} onChange={setOffset} />}
    </Page>
  );
}

function AddMemory(props: { onAdded: (memory: Memory) => void }) {
  const [content, setContent] = useState("");
  const [scope, setScope] = useState<Scope>("repo");
  const [repo, setRepo] = useState("");
  const [tags, setTags] = useState("");
  const action = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const memory = await action.run(() =>
      call<Memory>("POST", "/api/memories", {
        content,
        scope,
        repo: repo.trim() || undefined,
        tags: splitTags(tags),
        source: "console",
      }),
    );
    if (memory) props.onAdded(memory);
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Add memory">
      <label>
        Content
        <textarea required rows={3} value={content} onChange={(event) => setContent(event.target.value)} />
      </label>
      <div className="row">
        <label>
          Scope
          <select value={scope} onChange={(event) => setScope(event.target.value as Scope)}>
            {SCOPES.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        </label>
        <label>
          Repository
          <input value={repo} onChange={(event) => setRepo(event.target.value)} placeholder="optional" />
        </label>
        <label>
          Tags
          <input value={tags} onChange={(event) => setTags(event.target.value)} placeholder="comma, separated" />
        </label>
      </div>
      <button type="submit" disabled={action.busy}>
        Save memory
      </button>
      <ErrorText error={action.error} />
    </form>
  );
}

function splitTags(text: string): string[] {
  return text
    .split(",")
    .map((tag) => tag.trim())
    .filter(Boolean);
}

export function MemoryCard(props: { memory: Memory; score?: number; onChanged: () => void; actions?: React.ReactNode }) {
  const { memory } = props;
  const [editing, setEditing] = useState(false);
  const action = useAction();
  const archived = Boolean(memory.archivedAt);
  const patch = async (body: Record<string, unknown>) => {
    const done = await action.run(() => call<Memory>("PATCH", `/api/memories/${memory.id}`, body));
    if (done) {
      setEditing(false);
      props.onChanged();
    }
  };
  return (
    <li className={`card${archived ? " archived" : ""}`} data-memory-id={memory.id}>
      {editing ? (
        <EditMemory memory={memory} busy={action.busy} onSave={patch} onCancel={() => setEditing(false)} />
      ) : (
        <p className="memory-text">{memory.content}</p>
      )}
      <div className="meta">
        <Badge value={memory.scope} />
        <Badge value={memory.status} />
        {archived && <Badge value="archived" />}
        {memory.repo && <span className="repo">{memory.repo}</span>}
        {memory.tags.map((tag) => (
          <span key={tag} className="tag">
            #{tag}
          </span>
        ))}
        {props.score !== undefined && <span className="score">score {props.score.toFixed(2)}</span>}
        <span className="time" title={memory.id}>
          updated {formatTime(memory.updatedAt)}
        </span>
        {memory.source && <span className="source">{memory.source}</span>}
      </div>
      {!editing && (
        <div className="actions">
          {props.actions}
          <button type="button" className="secondary" onClick={() => setEditing(true)}>
            Edit
          </button>
          {archived ? (
            <button type="button" className="secondary" disabled={action.busy} onClick={() => void patch({ archived: false })}>
              Restore
            </button>
          ) : (
            <button
              type="button"
              className="secondary"
              disabled={action.busy}
              onClick={async () => {
                const done = await action.run(() => call<Memory>("DELETE", `/api/memories/${memory.id}`));
                if (done) props.onChanged();
              }}
            >
              Archive
            </button>
          )}
        </div>
      )}
      <ErrorText error={action.error} />
    </li>
  );
}

function EditMemory(props: {
  memory: Memory;
  busy: boolean;
  onSave: (patch: Record<string, unknown>) => void;
  onCancel: () => void;
}) {
  const { memory } = props;
  const [content, setContent] = useState(memory.content);
  const [scope, setScope] = useState(memory.scope);
  const [status, setStatus] = useState(memory.status);
  const [tags, setTags] = useState(memory.tags.join(", "));
  const save = (event: FormEvent) => {
    event.preventDefault();
    const patch: Record<string, unknown> = {};
    if (content !== memory.content) patch.content = content;
    if (scope !== memory.scope) patch.scope = scope;
    if (status !== memory.status) patch.status = status;
    const nextTags = splitTags(tags);
    if (nextTags.join("\u0000") !== memory.tags.join("\u0000")) patch.tags = nextTags;
    if (Object.keys(patch).length === 0) return props.onCancel();
    props.onSave(patch);
  };
  return (
    <form className="edit" onSubmit={save} aria-label="Edit memory">
      <label>
        Content
        <textarea rows={3} value={content} required onChange={(event) => setContent(event.target.value)} />
      </label>
      <div className="row">
        <label>
          Scope
          <select value={scope} onChange={(event) => setScope(event.target.value as Scope)}>
            {SCOPES.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(event) => setStatus(event.target.value as Status)}>
            {STATUSES.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        </label>
        <label>
          Tags
          <input value={tags} onChange={(event) => setTags(event.target.value)} />
        </label>
      </div>
      <div className="actions">
        <button type="submit" disabled={props.busy}>
          Save
        </button>
        <button type="button" className="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
