import { useEffect, useState, type FormEvent } from "react";
import { ApiError, apiKey, call, onAuthChange, setApiKey, type Health } from "./api";
import { linkProps, usePath } from "./router";
import { message } from "./ui";
import { MemoriesPage } from "./pages/Memories";
import { ReviewPage } from "./pages/Review";
import { ConflictsPage } from "./pages/Conflicts";
import { AuditPage } from "./pages/Audit";
import { ConnectorsPage } from "./pages/Connectors";
import { DreamPage } from "./pages/Dream";
import { GuardsPage } from "./pages/Guards";
import { ConversationsPage } from "./pages/Conversations";

const PAGES = [
  { path: "/memories", label: "Memories" },
  { path: "/review", label: "Review queue" },
  { path: "/conflicts", label: "Conflicts" },
  { path: "/audit", label: "Audit log" },
  { path: "/connectors", label: "Connectors" },
  { path: "/dream", label: "Dream cycle" },
  { path: "/guards", label: "Guards" },
  { path: "/conversations", label: "Conversations" },
];

type Auth = { state: "checking" } | { state: "in"; health: Health } | { state: "key"; error?: string } | { state: "down"; error: string };

export function App() {
  const [auth, setAuth] = useState<Auth>({ state: "checking" });
  const [signedIn, setSignedIn] = useState(apiKey() !== null);

  const check = async () => {
    try {
      const health = await call<Health>("GET", "/api/health");
      setAuth({ state: "in", health });
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 401) setAuth({ state: "key" });
      else setAuth({ state: "down", error: message(failure) });
    }
  };

  useEffect(() => {
    void check();
    return onAuthChange(() => {
      setSignedIn(apiKey() !== null);
      // A 401 anywhere forgot the key: ask for it again.
      if (apiKey() === null) void check();
    });
  }, []);

  if (auth.state === "checking") return <p className="splash">Connecting to the daemon…</p>;
  if (auth.state === "down")
    return (
      <main className="splash">
        <p className="error" role="alert">
          {auth.error}
        </p>
        <button type="button" onClick={() => void check()}>
          Retry
        </button>
      </main>
    );
  if (auth.state === "key") return <Login error={auth.error} onSignedIn={(health) => setAuth({ state: "in", health })} />;
  return (
    <Shell health={auth.health} signedIn={signedIn} onSignOut={() => setApiKey(null)} />
  );
}

function Login(props: { error?: string; onSignedIn: (health: Health) => void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState(props.error);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setApiKey(key.trim());
    try {
      props.onSignedIn(await call<Health>("GET", "/api/health"));
    } catch (failure) {
      setApiKey(null);
      setError(failure instanceof ApiError && failure.status === 401 ? "That API key is not valid (unknown or revoked)." : message(failure));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="login">
      <form onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">Cairn console</h1>
        <p>This daemon runs the production profile: every request needs an API key.</p>
        <label>
          API key
          <input
            type="password"
            autoComplete="off"
            name="api-key"
            placeholder="cairn_…"
            value={key}
            onChange={(event) => setKey(event.target.value)}
            required
          />
        </label>
        <p className="hint">
          Kept for this browser tab only (sessionStorage) and sent as <code>X-API-Key</code>. Create one with{" "}
          <code>cairn keys create --role admin</code>.
        </p>
        <button type="submit" disabled={busy || key.trim() === ""}>
          Sign in
        </button>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

function Shell(props: { health: Health; signedIn: boolean; onSignOut: () => void }) {
  const path = usePath();
  const current = path === "/" ? "/memories" : path;
  return (
    <div className="shell">
      <nav className="sidebar" aria-label="console">
        <div className="brand">Cairn</div>
        <ul>
          {PAGES.map((page) => (
            <li key={page.path}>
              <a {...linkProps(page.path)} aria-current={current.startsWith(page.path) ? "page" : undefined}>
                {page.label}
              </a>
            </li>
          ))}
        </ul>
        <div className="daemon">
          <span>v{props.health.version}</span>
          <span>{props.health.retrieval}</span>
          {props.signedIn && (
            <button type="button" className="link" onClick={props.onSignOut}>
              Sign out
            </button>
          )}
        </div>
      </nav>
      <main className="content">
        <Route path={current} />
      </main>
    </div>
  );
}

function Route({ path }: { path: string }) {
  if (path.startsWith("/memories")) return <MemoriesPage />;
  if (path.startsWith("/review")) return <ReviewPage />;
  if (path.startsWith("/conflicts")) return <ConflictsPage />;
  if (path.startsWith("/audit")) return <AuditPage />;
  if (path.startsWith("/connectors")) return <ConnectorsPage />;
  if (path.startsWith("/dream")) return <DreamPage />;
  if (path.startsWith("/guards")) return <GuardsPage />;
  if (path.startsWith("/conversations")) {
    const id = decodeURIComponent(path.slice("/conversations/".length).split("/")[0] ?? "");
    return <ConversationsPage selected={id || undefined} />;
  }
  return (
    <section className="page">
      <h1>Not found</h1>
      <p>
        No console page at <code>{path}</code>. <a {...linkProps("/memories")}>Memories</a>
      </p>
    </section>
  );
}
