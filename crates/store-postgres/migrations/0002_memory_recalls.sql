-- Recall bookkeeping in a narrow table of its own (issue 16). Every context pack marks its
-- memories recalled; on the memories' wide rows each mark was a new version of the whole row
-- (content, tags, metadata) in the heap and the write-ahead log. A row here is a few dozen
-- bytes, and only recalled memories have one.
--
-- The counts so far move here. Migrations only add (daemons of an earlier release may share
-- this database during an upgrade), so `memories.recall_count` and `last_recalled_at` stay as
-- this migration found them: this release neither reads nor writes them, and recalls an
-- older daemon records after it are not counted.
CREATE TABLE memory_recalls (
    memory_id text PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    recall_count bigint NOT NULL,
    last_recalled_at bigint
);
INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at)
    SELECT id, recall_count, last_recalled_at FROM memories
    WHERE recall_count <> 0 OR last_recalled_at IS NOT NULL;
