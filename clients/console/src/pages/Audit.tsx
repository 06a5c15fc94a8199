import { useState, type FormEvent } from "react";
import { call, formatTime, type AuditEntry } from "../api";
import { ErrorText, Page, Pager, useLoad } from "../ui";

const LIMIT = 50;

/** Every change to a memory, newest first, with what changed. */
export function AuditPage() {
  const [draft, setDraft] = useState({ memoryId: "", actor: "" });
  const [filters, setFilters] = useState(draft);
  const [offset, setOffset] = useState(0);
  const { data, error, loading } = useLoad(
    () =>
      call<{ entries: AuditEntry[]; total: number }>("GET", "/api/governance/audit", undefined, {
        memoryId: filters.memoryId.trim(),
        actor: filters.actor.trim(),
        limit: LIMIT,
        offset,
      }),
    [filters, offset],
  );
  const apply = (event: FormEvent) => {
    event.preventDefault();
    setOffset(0);
    setFilters({ ...draft });
  };
  return (
    <Page title="Audit log">
      <form className="filters" onSubmit={apply}>
        <input aria-label="Memory id" placeholder="memory id (mem_…)" value={draft.memoryId} onChange={(event) => setDraft({ ...draft, memoryId: event.target.value })} />
        <input aria-label="Actor" placeholder="actor (key:…, local:…)" value={draft.actor} onChange={(event) => setDraft({ ...draft, actor: event.target.value })} />
        <button type="submit">Apply</button>
      </form>
      <ErrorText error={error} />
      <table aria-busy={loading} aria-label="audit log">
        <thead>
          <tr>
            <th>When</th>
            <th>Action</th>
            <th>Actor</th>
            <th>Memory</th>
            <th>Change</th>
          </tr>
        </thead>
        <tbody>
          {data?.entries.map((entry) => (
            <tr key={entry.id}>
              <td>{formatTime(entry.at)}</td>
              <td>{entry.action}</td>
              <td>{entry.actor}</td>
              <td>
                <code>{entry.memoryId}</code>
              </td>
              <td>
                <Change before={entry.before} after={entry.after} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {data && <Pager offset={offset} limit={LIMIT} total={data.total} onChange={setOffset} />}
    </Page>
  );
}

const IGNORED = new Set(["updatedAt"]);

function Change({ before, after }: { before: Record<string, unknown> | null; after: Record<string, unknown> | null }) {
  if (!before && after) return <span className="change">{String(after.content ?? "").slice(0, 120)}</span>;
  if (before && !after) return <span className="change">removed</span>;
  if (!before || !after) return null;
  const changed = Object.keys({ ...before, ...after }).filter(
    (key) => !IGNORED.has(key) && JSON.stringify(before[key]) !== JSON.stringify(after[key]),
  );
  if (changed.length === 0) return <span className="change">no field changed</span>;
  return (
    <ul className="change">
      {changed.map((key) => (
        <li key={key}>
          <strong>{key}</strong>: {show(before[key])} → {show(after[key])}
        </li>
      ))}
    </ul>
  );
}

function show(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === undefined ? "—" : text.length > 80 ? text.slice(0, 79) + "…" : text;
}
