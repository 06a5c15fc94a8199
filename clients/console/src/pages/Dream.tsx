import { useState } from "react";
import { call, type DreamReport } from "../api";
import { linkProps } from "../router";
import { ErrorText, Page, useAction } from "../ui";

/** The dream cycle: merge near-duplicates, mark stale memories, find conflicts. */
export function DreamPage() {
  const [staleAfterDays, setStaleAfterDays] = useState("90");
  const [similarity, setSimilarity] = useState("0.8");
  const [report, setReport] = useState<DreamReport | undefined>(undefined);
  const action = useAction();
  const run = async (dryRun: boolean) => {
    if (!dryRun && !confirm("Run the dream cycle for real? It merges, marks stale and opens conflicts.")) return;
    const result = await action.run(() =>
      call<DreamReport>("POST", "/api/dream-cycle", {
        dryRun,
        staleAfterDays: Number(staleAfterDays),
        similarity: Number(similarity),
      }),
    );
    if (result) setReport(result);
  };
  return (
    <Page title="Dream cycle">
      <p className="hint">
        A dry run reports what the cycle would do and changes nothing. A run merges near-duplicates, marks memories not
        changed or recalled for a while as stale, and opens conflicts (their memories go to the review queue).
      </p>
      <div className="panel row">
        <label>
          Stale after (days)
          <input type="number" min="0" step="any" value={staleAfterDays} onChange={(event) => setStaleAfterDays(event.target.value)} />
        </label>
        <label>
          Similarity
          <input type="number" min="0" max="1" step="0.05" value={similarity} onChange={(event) => setSimilarity(event.target.value)} />
        </label>
        <button type="button" disabled={action.busy} onClick={() => void run(true)}>
          Dry run
        </button>
        <button type="button" className="danger" disabled={action.busy} onClick={() => void run(false)}>
          Run
        </button>
      </div>
      <ErrorText error={action.error} />
      {report && <Report report={report} />}
    </Page>
  );
}

function Report({ report }: { report: DreamReport }) {
  return (
    <section className="report" aria-label="dream report">
      <h2>{report.dryRun ? "Dry run: nothing was changed" : "The cycle ran"}</h2>
      <p>
        {report.examined} memories examined · {report.merged.length} merge groups · {report.staled.length} stale ·{" "}
        {report.conflicts.length} conflicts
      </p>
      {report.merged.length > 0 && (
        <>
          <h3>Merges</h3>
          <ul>
            {report.merged.map((group) => (
              <li key={group.keptId}>
                keep <code>{group.keptId}</code>, archive {group.mergedIds.map((id) => <code key={id}>{id} </code>)}
              </li>
            ))}
          </ul>
        </>
      )}
      {report.staled.length > 0 && (
        <>
          <h3>Stale</h3>
          <ul>
            {report.staled.map((id) => (
              <li key={id}>
                <code>{id}</code>
              </li>
            ))}
          </ul>
        </>
      )}
      {report.conflicts.length > 0 && (
        <>
          <h3>Conflicts</h3>
          <ul>
            {report.conflicts.map((conflict) => (
              <li key={conflict.id}>{conflict.reason}</li>
            ))}
          </ul>
          {!report.dryRun && <a {...linkProps("/conflicts")}>Resolve them</a>}
        </>
      )}
    </section>
  );
}
