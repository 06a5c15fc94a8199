import { useEffect, useState, type FormEvent } from "react";
import { call, formatTime, type Connector, type ConnectorHealth, type SyncReport } from "../api";
import { Badge, CardList, ErrorText, Page, useAction, useAdding, useLoad } from "../ui";

/** Folders and repositories imported as memories: their health, a sync, adding and removing. */
export function ConnectorsPage() {
  const { data, error, loading, reload } = useLoad(() => call<{ connectors: Connector[] }>("GET", "/api/connectors"), []);
  const adding = useAdding("Add connector", reload);
  return (
    <Page title="Connectors" actions={adding.toggle}>
      {adding.open && <AddConnector onAdded={adding.added} />}
      <ErrorText error={error} />
      <CardList
        label="connectors"
        loading={loading}
        items={data?.connectors}
        empty="No connectors. A connector imports a folder of docs or a repository's history."
      >
        {(connector) => <ConnectorCard key={connector.id} connector={connector} onChanged={reload} />}
      </CardList>
    </Page>
  );
}

function AddConnector(props: { onAdded: () => void }) {
  const [form, setForm] = useState({ kind: "folder", path: "", name: "", repo: "" });
  const action = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const done = await action.run(() =>
      call("POST", "/api/connectors", {
        kind: form.kind,
        path: form.path.trim(),
        name: form.name.trim() || undefined,
        repo: form.repo.trim() || undefined,
      }),
    );
    if (done !== undefined) props.onAdded();
  };
  return (
    <form className="panel" onSubmit={submit} aria-label="Add connector">
      <div className="row">
        <label>
          Kind
          <select value={form.kind} onChange={(event) => setForm({ ...form, kind: event.target.value })}>
            <option value="folder">folder</option>
            <option value="git">git</option>
          </select>
        </label>
        <label className="grow">
          Absolute path
          <input required value={form.path} placeholder="/home/me/src/shop/docs" onChange={(event) => setForm({ ...form, path: event.target.value })} />
        </label>
      </div>
      <div className="row">
        <label>
          Name
          <input value={form.name} placeholder="optional" onChange={(event) => setForm({ ...form, name: event.target.value })} />
        </label>
        <label>
          Repository
          <input value={form.repo} placeholder="default: the folder's name" onChange={(event) => setForm({ ...form, repo: event.target.value })} />
        </label>
      </div>
      <button type="submit" disabled={action.busy}>
        Add
      </button>
      <ErrorText error={action.error} />
    </form>
  );
}

function ConnectorCard(props: { connector: Connector; onChanged: () => void }) {
  const { connector } = props;
  const [health, setHealth] = useState<ConnectorHealth | undefined>(undefined);
  const [report, setReport] = useState<SyncReport | undefined>(undefined);
  const action = useAction();
  const loadHealth = () =>
    action.run(async () => setHealth(await call<ConnectorHealth>("GET", `/api/connectors/${connector.id}/health`)));
  useEffect(() => {
    void loadHealth();
    // Once per connector.
  }, [connector.id]);
  const sync = async () => {
    const result = await action.run(() => call<SyncReport>("POST", `/api/connectors/${connector.id}/sync`));
    if (result) setReport(result);
    await loadHealth();
  };
  const remove = async () => {
    if (!confirm(`Remove ${connector.name}? Its memories are archived (restorable).`)) return;
    const done = await action.run(() => call("DELETE", `/api/connectors/${connector.id}`));
    if (done !== undefined) props.onChanged();
  };
  return (
    <li className="card" data-connector-id={connector.id}>
      <h2>
        {connector.name} <Badge value={connector.kind} /> {health && <Badge value={health.status} />}
      </h2>
      <p className="meta">
        <code>{connector.path}</code> · {connector.scope}
        {connector.repo && ` · ${connector.repo}`}
      </p>
      {health && (
        <p className="meta">
          {health.memories} memories · last sync {formatTime(health.lastSyncAt)}
          {health.progress && ` · syncing ${health.progress.done}/${health.progress.total}`}
          {health.lastSync?.error && <span className="error"> · {health.lastSync.error}</span>}
        </p>
      )}
      {report && (
        <p className="report" role="status">
          Sync {report.status}: {report.imported} imported, {report.updated} updated, {report.unchanged} unchanged,{" "}
          {report.archived} archived, {report.skipped} skipped{report.error ? ` — ${report.error}` : ""}
        </p>
      )}
      <div className="actions">
        <button type="button" disabled={action.busy} onClick={() => void sync()}>
          Sync now
        </button>
        <button type="button" className="secondary" disabled={action.busy} onClick={() => void loadHealth()}>
          Check health
        </button>
        <button type="button" className="danger" disabled={action.busy} onClick={() => void remove()}>
          Remove
        </button>
      </div>
      <ErrorText error={action.error} />
    </li>
  );
}
