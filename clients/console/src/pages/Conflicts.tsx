import { useState } from "react";
import { call, formatTime, type Conflict } from "../api";
import { Badge, CardList, ErrorText, Page, useAction, useLoad } from "../ui";

/** Contradicting memories the dream cycle found: keep a side, keep both, or merge. */
export function ConflictsPage() {
  const [status, setStatus] = useState("open");
  const { data, error, loading, reload } = useLoad(
    () => call<{ conflicts: Conflict[] }>("GET", "/api/conflicts", undefined, { status }),
    [status],
  );
  return (
    <Page
      title="Conflicts"
      actions={
        <select aria-label="Conflict status" value={status} onChange={(event) => setStatus(event.target.value)}>
          <option value="open">open</option>
          <option value="resolved">resolved</option>
          <option value="all">all</option>
        </select>
      }
    >
      <ErrorText error={error} />
      <CardList
        label="conflicts"
        loading={loading}
        items={data?.conflicts}
        empty={
          <>
            No {status === "all" ? "" : status} conflicts. The dream cycle finds them (run it from the Dream cycle page).
          </>
        }
      >
        {(conflict) => <ConflictCard key={conflict.id} conflict={conflict} onResolved={reload} />}
      </CardList>
    </Page>
  );
}

function ConflictCard(props: { conflict: Conflict; onResolved: () => void }) {
  const { conflict } = props;
  const [merging, setMerging] = useState(false);
  const [content, setContent] = useState(
    conflict.memories.length === 2 ? conflict.memories.map((memory) => memory.content).join(" ") : "",
  );
  const action = useAction();
  const byId = new Map(conflict.memories.map((memory) => [memory.id, memory]));
  const open = conflict.status === "open";
  const resolve = async (body: Record<string, unknown>) => {
    const done = await action.run(() => call("POST", `/api/conflicts/${conflict.id}/resolve`, body));
    if (done !== undefined) props.onResolved();
  };
  return (
    <li className="card conflict" data-conflict-id={conflict.id}>
      <h2>
        {conflict.subject}
        {conflict.repo && <span className="repo"> in {conflict.repo}</span>} <Badge value={conflict.status} />
      </h2>
      <p className="reason">{conflict.reason}</p>
      <div className="sides">
        {conflict.sides.map((side) => (
          <div className="side" key={side.label} role="group" aria-label={`side ${side.label}`}>
            <h3>{side.label}</h3>
            <ul>
              {side.memoryIds.map((id) => (
                <li key={id} title={id}>
                  {byId.get(id)?.content ?? id}
                </li>
              ))}
            </ul>
            {open && (
              <button type="button" disabled={action.busy} onClick={() => void resolve({ action: "keep", memoryId: side.memoryIds[0] })}>
                Keep {side.label}
              </button>
            )}
          </div>
        ))}
      </div>
      {open ? (
        <div className="actions">
          <button type="button" className="secondary" disabled={action.busy} onClick={() => void resolve({ action: "keepBoth" })}>
            Keep both
          </button>
          <button type="button" className="secondary" onClick={() => setMerging(!merging)} aria-expanded={merging}>
            Merge…
          </button>
        </div>
      ) : (
        <p className="meta">resolved {formatTime(conflict.resolvedAt)}</p>
      )}
      {open && merging && (
        <form
          className="edit"
          onSubmit={(event) => {
            event.preventDefault();
            void resolve({ action: "merge", content });
          }}
        >
          <label>
            Merged memory
            <textarea rows={3} required value={content} onChange={(event) => setContent(event.target.value)} />
          </label>
          <button type="submit" disabled={action.busy}>
            Merge into one memory
          </button>
        </form>
      )}
      <ErrorText error={action.error} />
    </li>
  );
}
