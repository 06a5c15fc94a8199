//! The [`MemoryStore`] in SQLite: memories and their audit log, recalls, outcomes and
//! patch evidence.

use std::collections::HashMap;

use async_trait::async_trait;
use cairn_store::{
    Adjacent, Audit, AuditFilter, GuardedChange, Label, MemoryChange, MemoryFilter, MemoryPage,
    MemoryStore, Recall, Result, StoreError, TextMatch, Version,
};
use cairn_types::{AuditEntry, Memory, Outcome, PatchEvidence, Timestamp};
use rusqlite::{OptionalExtension, params};

use crate::memory_rows::{live_change, read_memory, update_memory_row, write_changes};
use crate::rows::{
    MEMORY_COLUMN_COUNT, MEMORY_COLUMNS, evidence_from_row, json_text, memory_from_row,
    outcome_from_row,
};
use crate::{PendingInsert, SqliteStore, audit, migrations, run_blocking, search, sql};

/// What an erased memory takes with it besides its row (see `cairn_store::erasure_statements`).
static ERASURE: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| cairn_store::erasure_statements("?1", false));

#[async_trait]
impl MemoryStore for SqliteStore {
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()> {
        let (done, committed) = tokio::sync::oneshot::channel();
        let job = PendingInsert { memories: memories.to_vec(), actor: actor.to_owned(), done };
        self.writer
            .pending_inserts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(job);
        let writer = self.writer.clone();
        // The commit runs to its end on a blocking thread even when the caller stops waiting.
        run_blocking(move || {
            writer.commit_pending_inserts();
            Ok(())
        })
        .await?;
        committed.await.map_err(StoreError::backend)?
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        let id = id.to_owned();
        self.read(move |connection| read_memory(connection, &id)).await
    }

    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = serde_json::to_string(ids).map_err(StoreError::backend)?;
        self.read(move |connection| {
            // One statement for them all, the ids' JSON array walked in order (CROSS JOIN
            // keeps it), each found by the id index, instead of a statement run per id.
            let query = format!(
                "SELECT {MEMORY_COLUMNS} FROM json_each(?1) j CROSS JOIN memories m \
                 ON m.id = j.value ORDER BY j.key"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let rows = statement.query_map([ids], |row| Ok(memory_from_row(row))).map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<Adjacent>> {
        let ids = ids.to_vec();
        self.read(move |connection| {
            // The rowid is the order of insertion; archived rows are stepped over.
            let query = format!(
                "SELECT {MEMORY_COLUMNS}, m.rowid > asked.rowid FROM memories asked
                 JOIN memories m ON m.rowid IN (
                     (SELECT max(rowid) FROM memories WHERE archived_at IS NULL
                         AND rowid < asked.rowid),
                     (SELECT min(rowid) FROM memories WHERE archived_at IS NULL
                         AND rowid > asked.rowid)
                 ) WHERE asked.id = ?1 ORDER BY m.rowid"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let mut adjacent = Vec::with_capacity(ids.len() * 2);
            for id in &ids {
                let rows = statement
                    .query_map([id], |row| {
                        Ok((memory_from_row(row), row.get::<_, bool>(MEMORY_COLUMN_COUNT)?))
                    })
                    .map_err(sql)?;
                for row in rows {
                    let (memory, after) = row.map_err(sql)?;
                    adjacent.push(Adjacent { of: id.clone(), after, memory: memory? });
                }
            }
            Ok(adjacent)
        })
        .await
    }

    async fn live_memories_after(&self, after: i64, limit: u32) -> Result<Vec<(i64, Memory)>> {
        self.read(move |connection| {
            let query = format!(
                "SELECT {MEMORY_COLUMNS}, m.rowid FROM memories m \
                 WHERE m.archived_at IS NULL AND m.rowid > ?1 ORDER BY m.rowid LIMIT ?2"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let rows = statement
                .query_map(rusqlite::params![after, limit], |row| {
                    Ok((row.get::<_, i64>(MEMORY_COLUMN_COUNT)?, memory_from_row(row)))
                })
                .map_err(sql)?;
            rows.map(|row| {
                let (position, memory) = row.map_err(sql)?;
                Ok((position, memory?))
            })
            .collect()
        })
        .await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        let filter = filter.clone();
        self.read(move |connection| audit::list(connection, &filter, limit, offset)).await
    }

    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>> {
        let groups = groups.to_vec();
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        self.write_counted(move |tx| {
            let audit = Audit { actor: &actor, action: &action };
            let mut applied = Vec::with_capacity(groups.len());
            let mut live = 0;
            // The changes are written together at the end: a group sees an earlier group's
            // changes here (the last change of each memory, by its place in `changes`), as it
            // would in the table.
            let mut changes: Vec<(Memory, Memory)> = Vec::new();
            let mut last_change: HashMap<String, usize> = HashMap::new();
            for group in &groups {
                // Each member as it is now, while it is the version the change was made for.
                let mut current = Vec::with_capacity(group.len());
                for guarded in group {
                    let memory = match last_change.get(&guarded.id) {
                        Some(&at) => Some(changes[at].1.clone()),
                        None => read_memory(tx, &guarded.id)?,
                    };
                    match memory {
                        Some(memory) if Version::of(&memory) == guarded.expected => {
                            current.push(memory)
                        }
                        _ => break,
                    }
                }
                let expected = current.len() == group.len();
                if expected {
                    for (guarded, before) in group.iter().zip(current) {
                        let after = guarded.change.applied_to(&before, at);
                        live += live_change(&before, &after);
                        last_change.insert(after.id.clone(), changes.len());
                        changes.push((before, after));
                    }
                }
                applied.push(expected);
            }
            write_changes(tx, &changes, &audit)?;
            Ok((applied, live))
        })
        .await
    }

    async fn update_memory(
        &self,
        id: &str,
        change: &MemoryChange,
        updated_at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Option<Memory>> {
        let (id, change) = (id.to_owned(), change.clone());
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        self.write_counted(move |tx| {
            let audit = Audit { actor: &actor, action: &action };
            Ok(match update_memory_row(tx, &id, &change, updated_at, &audit)? {
                Some((before, after)) => {
                    let live_change = live_change(&before, &after);
                    (Some(after), live_change)
                }
                None => (None, 0),
            })
        })
        .await
    }

    async fn list_memories(
        &self,
        filter: &MemoryFilter,
        limit: u32,
        offset: u64,
    ) -> Result<MemoryPage> {
        let (clause, values) = filter.conditions(|label, n| match label {
            Label::Scope => format!("m.scope = ?{n}"),
            Label::Status => format!("m.status = ?{n}"),
            Label::Repo => format!("m.repo = ?{n} COLLATE NOCASE"),
        });
        // Every live memory: the count the writer keeps; live ones by label: the text
        // index's counts; the table's count only when neither can say.
        let live = match filter.is_every_live_memory() {
            true => Some(self.live_memories()),
            false => self.text_index.cell.count(filter),
        };
        self.read(move |connection| {
            let total = match live {
                Some(live) => live,
                None => {
                    let count_query = format!("SELECT count(*) FROM memories m WHERE {clause}");
                    let mut statement = connection.prepare_cached(&count_query).map_err(sql)?;
                    let count: i64 = statement
                        .query_row(rusqlite::params_from_iter(&values), |row| row.get(0))
                        .map_err(sql)?;
                    count as u64
                }
            };
            let (at_limit, at_offset) = (values.len() + 1, values.len() + 2);
            // With no label the page is the newest rows by age: said outright, since without
            // the statistics of ANALYZE SQLite 3.53 took a label index whose condition is the
            // same (`archived_at IS NULL`) and sorted every live row, 312 ms at a million.
            let by_age = match values.is_empty() {
                true => "INDEXED BY memories_by_created",
                false => "",
            };
            let page_query = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m {by_age} WHERE {clause} \
                 ORDER BY m.created_at DESC, m.rowid DESC LIMIT ?{at_limit} OFFSET ?{at_offset}"
            );
            let mut statement = connection.prepare_cached(&page_query).map_err(sql)?;
            let offset = i64::try_from(offset).unwrap_or(i64::MAX);
            let mut parameters: Vec<rusqlite::types::Value> =
                values.into_iter().map(rusqlite::types::Value::Text).collect();
            parameters.extend([i64::from(limit).into(), offset.into()]);
            let rows = statement
                .query_map(rusqlite::params_from_iter(parameters), |row| Ok(memory_from_row(row)))
                .map_err(sql)?;
            let memories = rows.map(|row| row.map_err(sql)?).collect::<Result<Vec<_>>>()?;
            Ok(MemoryPage { memories, total })
        })
        .await
    }

    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let (terms, filter) = (terms.to_vec(), filter.clone());
        let frequencies = self.word_frequencies.clone();
        let corpus = self.live_memories();
        let index = self.text_index.clone();
        self.read(move |connection| match index.cell.search(&terms, &filter, limit) {
            Some(hits) => search::read_hits(connection, &hits, &filter),
            None => search::search(connection, &frequencies, corpus, &terms, &filter, limit),
        })
        .await
    }

    async fn count_memories(&self) -> Result<u64> {
        Ok(self.live_memories())
    }

    async fn schema_version(&self) -> Result<cairn_store::SchemaVersion> {
        let applied = self
            .read(|connection| {
                connection
                    .pragma_query_value(None, "user_version", |row| row.get::<_, u32>(0))
                    .map_err(sql)
            })
            .await?;
        Ok(cairn_store::SchemaVersion { applied, known: migrations::MIGRATIONS.len() as u32 })
    }

    fn count_memories_now(&self) -> Option<u64> {
        Some(self.live_memories())
    }

    fn fulltext_index(&self) -> cairn_store::fulltext::IndexState {
        self.text_index.cell.state()
    }

    async fn record_recalls(&self, recalls: &[Recall]) -> Result<()> {
        if recalls.iter().all(|recall| recall.memory_ids.is_empty()) {
            return Ok(());
        }
        let recalls = recalls.to_vec();
        self.write_relaxed(move |tx| {
            // Each memory's row in `memory_recalls` is written once however many of the
            // recalls name it; a memory erased meanwhile has no row in `memories` and is
            // passed over.
            let mut mark = tx
                .prepare_cached(
                    "INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at) \
                     SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?1) \
                     ON CONFLICT (memory_id) DO UPDATE SET \
                     recall_count = recall_count + excluded.recall_count, \
                     last_recalled_at = max(coalesce(last_recalled_at, excluded.last_recalled_at), \
                     excluded.last_recalled_at)",
                )
                .map_err(sql)?;
            for (id, times, at) in Recall::tally(&recalls) {
                mark.execute(params![id, times as i64, at.as_millis()]).map_err(sql)?;
            }
            let mut log = tx
                .prepare_cached(
                    "INSERT INTO task_recalls (task_key, memory_id, first_recalled_at) \
                     SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM memories WHERE id = ?2) \
                     ON CONFLICT (task_key, memory_id) DO NOTHING",
                )
                .map_err(sql)?;
            for recall in &recalls {
                for id in &recall.memory_ids {
                    log.execute(params![recall.task_key, id, recall.at.as_millis()])
                        .map_err(sql)?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT memory_id FROM task_recalls WHERE task_key = ?1 ORDER BY seq",
                )
                .map_err(sql)?;
            let rows = statement.query_map([task_key], |row| row.get(0)).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<String>>>().map_err(sql)
        })
        .await
    }

    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome> {
        let mut outcome = outcome.clone();
        let task_key = task_key.map(str::to_owned);
        self.write(move |tx| {
            let failures: i64 = tx
                .prepare_cached("SELECT count(*) FROM outcomes WHERE command = ?1 AND exit_code <> 0")
                .map_err(sql)?
                .query_row([&outcome.command], |row| row.get(0))
                .map_err(sql)?;
            outcome.previous_failures = failures as u64;
            tx.prepare_cached(
                "INSERT INTO outcomes (id, command, exit_code, task, repo, recorded_at, previous_failures, task_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(sql)?
            .execute(params![
                outcome.outcome_id,
                outcome.command,
                outcome.exit_code,
                outcome.task,
                outcome.repo,
                outcome.recorded_at.as_millis(),
                failures,
                task_key,
            ])
            .map_err(sql)?;
            Ok(outcome)
        })
        .await
    }

    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>> {
        let command = command.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, command, exit_code, task, repo, recorded_at, previous_failures FROM outcomes \
                     WHERE command = ?1 ORDER BY recorded_at DESC, rowid DESC LIMIT ?2",
                )
                .map_err(sql)?;
            let rows = statement.query_map(params![command, limit], outcome_from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, command, exit_code, task, repo, recorded_at, previous_failures FROM outcomes \
                     WHERE task_key = ?1 ORDER BY rowid",
                )
                .map_err(sql)?;
            let rows = statement.query_map([task_key], outcome_from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>> {
        let task_key = task_key.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, task, files, commands, memories_used, created_at FROM evidence \
                     WHERE task_key = ?1 ORDER BY rowid",
                )
                .map_err(sql)?;
            let rows =
                statement.query_map([task_key], |row| Ok(evidence_from_row(row))).map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()> {
        let evidence = evidence.clone();
        let task_key = task_key.to_owned();
        self.write(move |tx| {
            tx.prepare_cached(
                "INSERT INTO evidence (id, task, files, commands, memories_used, created_at, task_key) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql)?
            .execute(params![
                evidence.evidence_id,
                evidence.task,
                json_text(&evidence.files),
                json_text(&evidence.commands),
                json_text(&evidence.memories_used),
                evidence.created_at.as_millis(),
                task_key,
            ])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>> {
        let id = id.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id, task, files, commands, memories_used, created_at FROM evidence WHERE id = ?1",
                )
                .map_err(sql)?;
            let row = statement.query_row([id], |row| Ok(evidence_from_row(row))).optional().map_err(sql)?;
            row.transpose()
        })
        .await
    }

    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>> {
        let ids = ids.to_vec();
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        let erased = self
            .write_counted(move |tx| {
                let audit = Audit { actor: &actor, action: &action };
                let mut erased = Vec::new();
                let mut live = 0;
                // A live memory's words leave the full-text index's segments with it.
                fts_secure_delete(tx, true)?;
                // Earlier versions of a memory (the text before an edit, a memory archived)
                // left the index as delete markers over the segments that hold their words.
                let mut markers = false;
                for id in &ids {
                    let Some(memory) = read_memory(tx, id)? else { continue };
                    live -= i64::from(memory.archived_at.is_none());
                    markers |=
                        memory.archived_at.is_some() || memory.updated_at > memory.created_at;
                    // The FTS trigger removes a live memory's entry; vectors cascade.
                    tx.prepare_cached("DELETE FROM memories WHERE id = ?1")
                        .map_err(sql)?
                        .execute([id])
                        .map_err(sql)?;
                    for statement in ERASURE.iter() {
                        tx.prepare_cached(statement).map_err(sql)?.execute([id]).map_err(sql)?;
                    }
                    audit::append(tx, &audit, at, id, None, None)?;
                    erased.push(id.clone());
                }
                fts_secure_delete(tx, false)?;
                if markers {
                    // Rewrites the index without what the markers delete: no word of an
                    // erased memory's earlier versions stays in the file.
                    tx.prepare_cached(
                        "INSERT INTO memories_fts (memories_fts) VALUES ('optimize')",
                    )
                    .map_err(sql)?
                    .execute([])
                    .map_err(sql)?;
                }
                // The per-task recall log has no index by memory (each pack would pay for it, and
                // the steady pack's p99 rose by 2 ms with one): one pass over it for them all.
                if !erased.is_empty() {
                    let erased = serde_json::to_string(&erased).map_err(StoreError::backend)?;
                    tx.prepare_cached(
                    "DELETE FROM task_recalls WHERE memory_id IN (SELECT value FROM json_each(?1))",
                )
                .map_err(sql)?
                .execute([erased])
                .map_err(sql)?;
                }
                Ok((erased, live))
            })
            .await;
        if erased.as_ref().is_ok_and(|erased| !erased.is_empty()) {
            self.scrub_log().await;
        }
        erased
    }

    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>> {
        let repo = repo.to_owned();
        self.read(move |connection| {
            let query = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m INDEXED BY memories_repo_rules_nocase \
                 WHERE m.repo = ?1 COLLATE NOCASE AND m.scope = 'repo' AND m.status = 'active' \
                 AND m.archived_at IS NULL ORDER BY m.created_at DESC LIMIT ?2"
            );
            let mut statement = connection.prepare_cached(&query).map_err(sql)?;
            let rows = statement
                .query_map(params![repo, limit], |row| Ok(memory_from_row(row)))
                .map_err(sql)?;
            rows.map(|row| row.map_err(sql)?).collect()
        })
        .await
    }

    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>> {
        let tag = tag.to_owned();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id FROM memories \
                     WHERE EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?1)",
                )
                .map_err(sql)?;
            let rows = statement.query_map([tag], |row| row.get(0)).map_err(sql)?;
            rows.map(|row| row.map_err(sql)).collect()
        })
        .await
    }

    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>> {
        let text = text.to_lowercase();
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached("SELECT id FROM memories WHERE instr(cairn_fold(content), ?1) > 0")
                .map_err(sql)?;
            let rows = statement.query_map([text], |row| row.get(0)).map_err(sql)?;
            rows.map(|row| row.map_err(sql)).collect()
        })
        .await
    }
}

/// FTS5's secure-delete on or off for the rest of the transaction (see migration 18).
fn fts_secure_delete(tx: &rusqlite::Transaction<'_>, on: bool) -> Result<()> {
    tx.prepare_cached("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', ?1)")
        .map_err(sql)?
        .execute([i64::from(on)])
        .map_err(sql)?;
    Ok(())
}
