//! Versioned schema migrations, tracked in SQLite's `user_version` and applied at open.

use rusqlite::{Connection, TransactionBehavior};

/// Each entry moves the schema up by one version. Never edit an entry that has shipped;
/// add a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: memories with full-text search, the recall log, outcomes and patch evidence.
    r#"
    CREATE TABLE memories (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        scope TEXT NOT NULL,
        status TEXT NOT NULL,
        repo TEXT,
        tags TEXT NOT NULL DEFAULT '[]',
        source TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        last_recalled_at INTEGER,
        recall_count INTEGER NOT NULL DEFAULT 0,
        archived_at INTEGER
    );
    CREATE INDEX memories_by_created ON memories (created_at DESC);
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        content, tags,
        content = 'memories', content_rowid = 'rowid',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    -- The full-text index holds live memories only: archiving takes a memory out, restoring
    -- puts it back, so archived rows never crowd a search's scored window.
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.archived_at IS NULL BEGIN
        INSERT INTO memories_fts (rowid, content, tags) VALUES (new.rowid, new.content, new.tags);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.archived_at IS NULL BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        VALUES ('delete', old.rowid, old.content, old.tags);
    END;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags, archived_at ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        SELECT 'delete', old.rowid, old.content, old.tags WHERE old.archived_at IS NULL;
        INSERT INTO memories_fts (rowid, content, tags)
        SELECT new.rowid, new.content, new.tags WHERE new.archived_at IS NULL;
    END;

    CREATE TABLE task_recalls (
        seq INTEGER PRIMARY KEY,
        task_key TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        first_recalled_at INTEGER NOT NULL,
        UNIQUE (task_key, memory_id)
    );

    CREATE TABLE outcomes (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        command TEXT NOT NULL,
        exit_code INTEGER NOT NULL,
        task TEXT,
        task_key TEXT,
        repo TEXT,
        recorded_at INTEGER NOT NULL,
        previous_failures INTEGER NOT NULL
    );
    CREATE INDEX outcomes_by_command ON outcomes (command, recorded_at DESC);
    CREATE INDEX outcomes_by_task ON outcomes (task_key);

    CREATE TABLE evidence (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        task TEXT NOT NULL,
        task_key TEXT NOT NULL,
        files TEXT NOT NULL,
        commands TEXT NOT NULL,
        memories_used TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE INDEX evidence_by_task ON evidence (task_key);
    "#,
    // 2: API keys, the audit log, connectors and conflicts.
    r#"
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        name TEXT,
        role TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );

    CREATE TABLE audit_log (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        before TEXT,
        after TEXT
    );
    CREATE INDEX audit_by_memory ON audit_log (memory_id);

    CREATE TABLE connectors (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        path TEXT NOT NULL,
        scope TEXT NOT NULL,
        repo TEXT,
        max_commits INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        last_sync TEXT
    );
    CREATE TABLE connector_items (
        connector_id TEXT NOT NULL,
        key TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        PRIMARY KEY (connector_id, key)
    ) WITHOUT ROWID;

    CREATE TABLE conflicts (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        first_id TEXT NOT NULL,
        second_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        reason TEXT NOT NULL,
        status TEXT NOT NULL,
        detected_at INTEGER NOT NULL,
        resolution TEXT,
        resolved_at INTEGER,
        UNIQUE (first_id, second_id)
    );
    "#,
    // 3: embeddings, one per memory and model, kept for one version of the memory.
    r#"
    CREATE TABLE embeddings (
        memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
        model TEXT NOT NULL,
        version INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (memory_rowid, model)
    ) WITHOUT ROWID;
    "#,
    // 4: the conversation runtime: conversations with their snapshot, the event log, widget
    // prompts and idempotency keys. JSON columns hold text; times are milliseconds.
    r#"
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        channel TEXT,
        context TEXT NOT NULL,
        lifecycle TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        -- The offset the next event gets: commits read and bump it, so offsets have no gaps.
        next_offset INTEGER NOT NULL,
        snapshot TEXT NOT NULL
    );
    CREATE INDEX conversations_by_agent ON conversations (agent_id, id);
    CREATE INDEX conversations_by_updated ON conversations (updated_at);

    CREATE TABLE runtime_events (
        conversation_id TEXT NOT NULL,
        offset INTEGER NOT NULL,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (conversation_id, offset)
    ) WITHOUT ROWID;

    CREATE TABLE runtime_prompts (
        conversation_id TEXT NOT NULL,
        prompt_id TEXT NOT NULL,
        widget_kind TEXT NOT NULL,
        input TEXT NOT NULL,
        offset INTEGER NOT NULL,
        -- NULL while the prompt is open.
        output TEXT,
        PRIMARY KEY (conversation_id, prompt_id)
    ) WITHOUT ROWID;

    CREATE TABLE runtime_idempotency (
        key TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        first_offset INTEGER NOT NULL,
        end_offset INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 5: conversations list newest first by creation (then id), so ids of a caller's choosing
    // sort by when they were made; idempotency keys keep a fingerprint of their request.
    r#"
    DROP INDEX conversations_by_agent;
    CREATE INDEX conversations_by_created ON conversations (created_at, id);
    CREATE INDEX conversations_by_agent ON conversations (agent_id, created_at, id);
    -- What an idempotency key was used for, so a reuse for something else is refused.
    ALTER TABLE runtime_idempotency ADD COLUMN fingerprint TEXT;
    "#,
    // 6: conversation tokens: short-lived credentials that open one conversation.
    r#"
    CREATE TABLE conversation_tokens (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        revoked_at INTEGER
    );
    "#,
    // 7: a repository's newest active repo-scoped memories, for the standing rules of its
    // packs: a partial index, so other memories cost nothing to keep it.
    r#"
    CREATE INDEX memories_repo_rules ON memories (repo, created_at DESC)
        WHERE scope = 'repo' AND status = 'active' AND archived_at IS NULL;
    "#,
    // 8: a conflict is a subject in a repository with its memories on two sides or more,
    // instead of one row per pair of memories. Pairs recorded before become conflicts of two.
    r#"
    CREATE TABLE conflict_sets (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        subject TEXT NOT NULL,
        repo TEXT,
        reason TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
        detected_at INTEGER NOT NULL,
        resolution TEXT,
        resolved_at INTEGER
    );
    CREATE INDEX conflict_sets_by_subject ON conflict_sets (subject, repo, status);
    CREATE TABLE conflict_members (
        conflict_id TEXT NOT NULL REFERENCES conflict_sets (id) ON DELETE CASCADE,
        memory_id TEXT NOT NULL,
        side INTEGER NOT NULL,
        label TEXT NOT NULL,
        PRIMARY KEY (conflict_id, memory_id)
    ) WITHOUT ROWID;
    CREATE INDEX conflict_members_by_memory ON conflict_members (memory_id);
    INSERT INTO conflict_sets (id, subject, repo, reason, status, detected_at, resolution, resolved_at)
        SELECT c.id, c.subject, m.repo, c.reason, c.status, c.detected_at, c.resolution, c.resolved_at
        FROM conflicts c LEFT JOIN memories m ON m.id = c.first_id ORDER BY c.rowid;
    INSERT INTO conflict_members (conflict_id, memory_id, side, label)
        SELECT id, first_id, 0, 'one side' FROM conflicts
        UNION ALL SELECT id, second_id, 1, 'the other side' FROM conflicts;
    DROP TABLE conflicts;
    "#,
    // 9: voice segments, one row each with its connection. The socket token is kept as its
    // hash only; a segment goes with its conversation.
    r#"
    CREATE TABLE voice_segments (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        channel TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        connection_id TEXT NOT NULL UNIQUE,
        adapter TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'connected', 'ended')),
        provider TEXT,
        provider_session_id TEXT,
        expires_at INTEGER,
        token_hash TEXT NOT NULL UNIQUE,
        token_used_at INTEGER,
        -- JSON text, NULL when the start request had none.
        app TEXT,
        client TEXT
    );
    CREATE INDEX voice_segments_by_conversation ON voice_segments (conversation_id);
    "#,
    // 10: recall bookkeeping in a narrow table of its own. Every context pack marks its
    // memories recalled; on the memories' wide rows (eight to a page) that wrote some thirty
    // pages a pack to the log, whose checkpoints stalled reads (issue 16). A row here is about
    // forty bytes, a hundred to a page, and only recalled memories have one. The counts so far
    // move here; the memories' two columns stay as the migration found them, for a binary of
    // an earlier release opening this file, and nothing reads or writes them any more.
    r#"
    CREATE TABLE memory_recalls (
        memory_id TEXT PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
        recall_count INTEGER NOT NULL,
        last_recalled_at INTEGER
    ) WITHOUT ROWID;
    INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at)
        SELECT id, recall_count, last_recalled_at FROM memories
        WHERE recall_count <> 0 OR last_recalled_at IS NOT NULL ORDER BY id;
    "#,
    // 11: embeddings in a table with row ids. In the `WITHOUT ROWID` table of migration 3 a
    // row may keep at most about 1,000 bytes on its page, so each vector (1,536 bytes for 384
    // dimensions) spilled into an overflow page of its own: 100,000 vectors took 468 MB
    // instead of about 200, and reading one, as every hybrid query does for the shortlist it
    // scores exactly, took two page reads far apart (issue 16). A table with row ids keeps up to
    // about 4,000 bytes a row on its page; the key is a unique index beside it.
    r#"
    CREATE TABLE embeddings_by_row (
        memory_rowid INTEGER NOT NULL REFERENCES memories (rowid) ON DELETE CASCADE,
        model TEXT NOT NULL,
        version INTEGER NOT NULL,
        vector BLOB NOT NULL,
        UNIQUE (memory_rowid, model)
    );
    INSERT INTO embeddings_by_row (memory_rowid, model, version, vector)
        SELECT memory_rowid, model, version, vector FROM embeddings ORDER BY memory_rowid, model;
    DROP TABLE embeddings;
    ALTER TABLE embeddings_by_row RENAME TO embeddings;
    "#,
    // 12: erasing a memory clears its connector items, found by memory; without this index
    // each erased memory scanned them all. (The per-task recall log is not indexed by memory:
    // every pack writes to it, and with such an index the steady pack's p99 at 20,000 rose
    // from 6.9 to 8.7 ms; an erase deletes its rows in one pass for all its memories.)
    // PostgreSQL has had both indexes from its first migration.
    r#"
    CREATE INDEX connector_items_by_memory ON connector_items (memory_id);
    "#,
    // 13: an erased memory's words leave the full-text index's segments at once (FTS5's
    // secure-delete), not at some later merge, so no erased text stays in the file. The
    // rows themselves are overwritten by `secure_delete`, set on every connection.
    r#"
    INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1);
    "#,
    // 14: repository names compare case-insensitively (issue 29: `Shop` is `shop`), so the
    // standing rules' index is on the name without case. Migration 7's index stays for a
    // binary of an earlier release that names it.
    r#"
    CREATE INDEX memories_repo_rules_nocase ON memories (repo COLLATE NOCASE, created_at DESC)
        WHERE scope = 'repo' AND status = 'active' AND archived_at IS NULL;
    "#,
    // 15: idempotency keys of HTTP writes (issue 30): a key's first answer, kept a day
    // (`status` NULL while the request runs); and API keys' expiry and last use.
    r#"
    CREATE TABLE idempotency_keys (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        status INTEGER,
        content_type TEXT,
        body BLOB,
        PRIMARY KEY (scope, key)
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
    ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
    ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
    "#,
    // 16: listing by a label at a million memories (issue 31): a page or a count of one
    // scope, status or repository reads that label's live rows through its index, newest
    // first by scanning it backwards, instead of every row.
    r#"
    CREATE INDEX memories_live_by_scope ON memories (scope, created_at)
        WHERE archived_at IS NULL;
    CREATE INDEX memories_live_by_status ON memories (status, created_at)
        WHERE archived_at IS NULL;
    CREATE INDEX memories_live_by_repo ON memories (repo COLLATE NOCASE, created_at)
        WHERE archived_at IS NULL;
    "#,
    // 17: a change of status alone (the dream cycle puts half a million memories in review
    // at a million) no longer deletes and inserts the same text in the full-text index:
    // the trigger fires when the text, the tags, or whether the memory is live changed.
    r#"
    DROP TRIGGER memories_fts_update;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF content, tags, archived_at ON memories
    WHEN old.content IS NOT new.content OR old.tags IS NOT new.tags
        OR (old.archived_at IS NULL) IS NOT (new.archived_at IS NULL)
    BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content, tags)
        SELECT 'delete', old.rowid, old.content, old.tags WHERE old.archived_at IS NULL;
        INSERT INTO memories_fts (rowid, content, tags)
        SELECT new.rowid, new.content, new.tags WHERE new.archived_at IS NULL;
    END;
    "#,
    // 18: secure-delete is on only while an erasure runs (see `erase_memories`). Always on,
    // every delete from the full-text index (an archive, an edit, each of a dream cycle's
    // merges) walked the doclists of the memory's words to take its entries out: a common
    // word's list grows with the corpus, so the dream cycle grew with its square (13.4 s of
    // merges at 100,000 memories). Off, a delete is a marker that merges fold in later, and
    // an erasure folds them in at once where an erased memory may have left any.
    r#"
    INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 0);
    "#,
];

/// Applies every migration above the database's version, each in its own transaction.
pub(crate) fn apply(connection: &mut Connection) -> rusqlite::Result<()> {
    let current: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute_batch(migration)?;
        transaction.pragma_update(None, "user_version", index as i64 + 1)?;
        transaction.commit()?;
        tracing::info!(version = index + 1, "applied storage migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use cairn_store::MemoryStore;

    use super::*;

    /// A database file at `path` as a release with the first `version` migrations left it.
    fn database_at(path: &std::path::Path, version: usize) -> Connection {
        let connection = Connection::open(path).unwrap();
        for (index, migration) in MIGRATIONS[..version].iter().enumerate() {
            connection.execute_batch(migration).unwrap();
            connection.pragma_update(None, "user_version", index as i64 + 1).unwrap();
        }
        connection
    }

    /// A data directory of the release before `memory_recalls` opens with its recall counts
    /// where reads find them, and recalls go on from there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn recall_counts_of_an_earlier_release_are_kept() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        {
            let connection = database_at(&path, 9);
            connection
                .execute_batch(
                    "INSERT INTO memories (id, content, scope, status, created_at, updated_at, \
                     last_recalled_at, recall_count) VALUES \
                     ('mem_recalled', 'Deploys go through the release script.', 'repo', \
                      'active', 1000, 1000, 5000, 7), \
                     ('mem_never', 'Use pnpm, not npm.', 'repo', 'active', 2000, 2000, NULL, 0);",
                )
                .unwrap();
        }
        let store = crate::SqliteStore::open(&path).unwrap();
        cairn_store::conformance::migrated_recalls_count_on(&store).await;
        let found =
            store.search_memories(&["release".to_owned()], &Default::default(), 10).await.unwrap();
        assert_eq!(found[0].memory.recall_count, 8);
    }

    /// The vectors of an earlier release are read after the move to a table with row ids, are
    /// replaced and deleted with their memory as before, and a vector takes no overflow page any more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn vectors_of_an_earlier_release_are_kept() {
        use cairn_store::{PendingEmbedding, VectorStore};
        use cairn_types::Timestamp;

        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let vector = |seed: f32| (0..384).map(|i| seed + i as f32 / 1000.0).collect::<Vec<f32>>();
        let blob =
            |vector: &[f32]| -> Vec<u8> { vector.iter().flat_map(|v| v.to_le_bytes()).collect() };
        {
            let connection = database_at(&path, 10);
            connection
                .execute_batch(
                    "INSERT INTO memories (id, content, scope, status, created_at, updated_at) VALUES \
                     ('mem_one', 'Deploys go through the release script.', 'repo', 'active', 1000, 1000), \
                     ('mem_two', 'Use pnpm, not npm.', 'repo', 'active', 2000, 2000);",
                )
                .unwrap();
            for (id, seed, version) in [("mem_one", 0.5, 1000), ("mem_two", -0.5, 2000)] {
                connection
                    .execute(
                        "INSERT INTO embeddings (memory_rowid, model, version, vector) \
                         SELECT rowid, 'model', ?2, ?3 FROM memories WHERE id = ?1",
                        rusqlite::params![id, version, blob(&vector(seed))],
                    )
                    .unwrap();
            }
        }
        let store = crate::SqliteStore::open(&path).unwrap();
        let ids = ["mem_two".to_owned(), "mem_one".to_owned()];
        let read = store.load_embeddings_of("model", &ids).await.unwrap();
        assert_eq!(
            read,
            vec![("mem_two".to_owned(), vector(-0.5)), ("mem_one".to_owned(), vector(0.5))]
        );

        // Replaced in place, and gone with its memory.
        let pending = PendingEmbedding {
            position: 1,
            memory_id: "mem_one".to_owned(),
            content: String::new(),
            version: Timestamp::from_millis(1000),
        };
        store.store_embeddings("model", &[(pending, vector(0.25))]).await.unwrap();
        drop(store);
        let connection = Connection::open(&path).unwrap();
        connection.pragma_update(None, "foreign_keys", true).unwrap();
        connection.execute("DELETE FROM memories WHERE id = 'mem_two'", []).unwrap();
        let store = crate::SqliteStore::open(&path).unwrap();
        let read = store.load_embeddings("model").await.unwrap();
        assert_eq!(read, vec![("mem_one".to_owned(), vector(0.25))]);

        let (pages, overflow): (i64, i64) = connection
            .query_row(
                "SELECT count(*), sum(pagetype = 'overflow') FROM dbstat WHERE name = 'embeddings'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .unwrap();
        assert_eq!((pages, overflow), (1, 0), "one page holds both vectors");
    }

    /// Every statement erasing a memory finds its rows by an index, except the one pass over
    /// the per-task recall log that an erase makes for all its memories at once.
    #[test]
    fn erasing_a_memory_scans_no_table() {
        let mut connection = Connection::open_in_memory().unwrap();
        apply(&mut connection).unwrap();
        for statement in [
            "DELETE FROM memories WHERE id = ?1",
            "UPDATE connector_items SET memory_id = '', content_hash = '' WHERE memory_id = ?1",
            "DELETE FROM conflict_sets WHERE id IN \
             (SELECT conflict_id FROM conflict_members WHERE memory_id = ?1)",
            "UPDATE audit_log SET before = NULL, after = NULL WHERE memory_id = ?1",
        ] {
            let mut plan = connection.prepare(&format!("EXPLAIN QUERY PLAN {statement}")).unwrap();
            let steps: Vec<String> =
                plan.query_map(["mem_x"], |row| row.get(3)).unwrap().map(Result::unwrap).collect();
            assert!(steps.iter().all(|step| !step.starts_with("SCAN")), "{statement}: {steps:?}");
        }
    }
}
