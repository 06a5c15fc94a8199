import { useState } from "react";
import { call, type MemoryList } from "../api";
import { CardList, ErrorText, Page, Pager, useAction, useLoad } from "../ui";
import { MemoryCard } from "./Memories";

const LIMIT = 20;

/** The memories in `review`: approve makes one active, reject archives it as stale. */
export function ReviewPage() {
  const [offset, setOffset] = useState(0);
  const { data, error, loading, reload } = useLoad(
    () => call<MemoryList>("GET", "/api/governance/review", undefined, { limit: LIMIT, offset }),
    [offset],
  );
  const action = useAction();
  const decide = async (id: string, decision: "approve" | "reject") => {
    const done = await action.run(() => call("POST", `/api/governance/review/${id}/${decision}`));
    if (done !== undefined) reload();
  };
  return (
    <Page title="Review queue">
      <p className="hint">
        Memories waiting for a person: set to review by an edit or by conflict detection. Approving a memory of an open
        conflict keeps its side; rejecting archives it (restorable).
      </p>
      <ErrorText error={error ?? action.error} />
      <CardList label="review queue" loading={loading} items={data?.memories} empty="Nothing waits for review.">
        {(memory) => (
          <MemoryCard
            key={memory.id}
            memory={memory}
            onChanged={reload}
            actions={
              <>
                <button type="button" disabled={action.busy} onClick={() => void decide(memory.id, "approve")}>
                  Approve
                </button>
                <button type="button" className="danger" disabled={action.busy} onClick={() => void decide(memory.id, "reject")}>
                  Reject
                </button>
              </>
            }
          />
        )}
      </CardList>
      {data && <Pager offset={offset} limit={LIMIT} total={data.total} onChange={setOffset} />}
    </Page>
  );
}
