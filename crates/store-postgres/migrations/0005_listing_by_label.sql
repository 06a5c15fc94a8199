-- Listing by a label at a million memories (issue 31): a page or a count of one scope,
-- status or repository reads that label's live rows through its index, newest first,
-- instead of every row.
CREATE INDEX memories_live_by_scope ON memories (scope, created_at DESC, pk DESC)
    WHERE archived_at IS NULL;
CREATE INDEX memories_live_by_status ON memories (status, created_at DESC, pk DESC)
    WHERE archived_at IS NULL;
CREATE INDEX memories_live_by_repo ON memories (lower(repo), created_at DESC, pk DESC)
    WHERE archived_at IS NULL;
