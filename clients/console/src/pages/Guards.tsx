import { useState, type FormEvent } from "react";
import { call, type GuardFinding, type GuardResult } from "../api";
import { ErrorText, Page, useAction } from "../ui";

/** Checks an action against the built-in rules and what memories and outcomes say. */
export function GuardsPage() {
  const [command, setCommand] = useState("");
  const [repo, setRepo] = useState("");
  const [result, setResult] = useState<GuardResult | undefined>(undefined);
  const action = useAction();
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const verdict = await action.run(() =>
      call<GuardResult>("POST", "/api/guard", { action: command, repo: repo.trim() || undefined }),
    );
    if (verdict) setResult(verdict);
  };
  return (
    <Page title="Guards">
      <form className="panel" onSubmit={submit} aria-label="Try an action">
        <label>
          Action
          <input required value={command} placeholder="git push --force origin main" onChange={(event) => setCommand(event.target.value)} />
        </label>
        <div className="row">
          <label>
            Repository
            <input value={repo} placeholder="optional" onChange={(event) => setRepo(event.target.value)} />
          </label>
          <button type="submit" disabled={action.busy}>
            Check
          </button>
        </div>
      </form>
      <ErrorText error={action.error} />
      {result && (
        <section className="report" aria-label="verdict" aria-live="polite">
          <h2 className={result.allowed ? "allowed" : "blocked"}>{result.allowed ? "Allowed" : "Blocked"}</h2>
          <Findings title="Blockers" findings={result.blockers} />
          <Findings title="Warnings" findings={result.warnings} />
          {result.blockers.length === 0 && result.warnings.length === 0 && <p>No rule or memory objects.</p>}
        </section>
      )}
    </Page>
  );
}

function Findings({ title, findings }: { title: string; findings: GuardFinding[] }) {
  if (findings.length === 0) return null;
  return (
    <>
      <h3>{title}</h3>
      <ul>
        {findings.map((finding, index) => (
          <li key={index}>
            <code>{finding.code}</code> {finding.message}
            {finding.memoryId && <span className="meta"> (memory {finding.memoryId})</span>}
          </li>
        ))}
      </ul>
    </>
  );
}
