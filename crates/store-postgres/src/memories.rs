//! [`cairn_store::MemoryStore`] on PostgreSQL: memories, their postings and counts, recalls,
//! outcomes and evidence.
//!
//! What SQLite's single writer serialised is held by row locks here: a change reads its
//! memory `FOR UPDATE`, guarded changes lock every memory they name in id order (one order
//! for every daemon, so no deadlock), and counts that depend on earlier rows (an outcome's
//! earlier failures) take an advisory lock on what they count.

use std::collections::HashMap;

use async_trait::async_trait;
use cairn_store::{
    Adjacent, Audit, AuditFilter, GuardedChange, Label, MemoryChange, MemoryFilter, MemoryPage,
    MemoryStore, Recall, Result, StoreError, TextMatch, Version,
};
use cairn_types::{AuditEntry, Memory, Outcome, PatchEvidence, Timestamp};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use crate::rows::{
    EVIDENCE_COLUMNS, MEMORY_COLUMNS, OUTCOME_COLUMNS, Owned, StoredMemory, evidence_from_row,
    execute, first_text, json_value, memory_from_row, outcome_from_row, query, query_opt,
    stored_from_row,
};
use crate::{PgStore, Transaction, audit, lock_key, notify, search};
use cairn_store::fulltext::Document;

/// What an erased memory takes with it besides its row (see `cairn_store::erasure_statements`).
static ERASURE: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| cairn_store::erasure_statements("$1", true));

/// How a write moves the corpus statistics: live memories and their tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) live: i64,
    pub(crate) tokens: i64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.live += other.live;
        self.tokens += other.tokens;
    }
}

/// Adds `counts` to this session's slot of `memory_counts` (16 slots, so writers on several
/// daemons rarely wait for each other; readers sum them).
pub(crate) async fn move_counts(tx: &(impl GenericClient + ?Sized), counts: Counts) -> Result<()> {
    if counts == Counts::default() {
        return Ok(());
    }
    execute(
        tx,
        "UPDATE memory_counts SET live = live + $1, tokens = tokens + $2 \
         WHERE slot = pg_backend_pid() % 16",
        &[&counts.live, &counts.tokens],
    )
    .await?;
    Ok(())
}

/// Live memories and their tokens, exact across daemons.
pub(crate) async fn corpus(client: &(impl GenericClient + ?Sized)) -> Result<(u64, u64)> {
    let row = query_opt(
        client,
        "SELECT coalesce(sum(live), 0)::bigint, coalesce(sum(tokens), 0)::bigint FROM memory_counts",
        &[],
    )
    .await?
    .ok_or_else(|| StoreError::Corrupt("memory_counts is empty".into()))?;
    let (live, tokens): (i64, i64) = (row.get(0), row.get(1));
    Ok((live.max(0) as u64, tokens.max(0) as u64))
}

/// Writes the postings of a live memory; its length in tokens.
async fn index(tx: &(impl GenericClient + ?Sized), pk: i64, memory: &Memory) -> Result<i32> {
    index_memory(tx, pk, &memory.content, &memory.tags).await
}

/// Writes the postings of the live memory `pk` with this text; its length in tokens.
pub(crate) async fn index_memory(
    tx: &(impl GenericClient + ?Sized),
    pk: i64,
    content: &str,
    tags: &[String],
) -> Result<i32> {
    let document = Document::of(content, tags);
    let mut terms = Vec::with_capacity(document.terms.len());
    let mut content = Vec::with_capacity(document.terms.len());
    let mut tags = Vec::with_capacity(document.terms.len());
    for (term, in_content, in_tags) in document.terms {
        terms.push(term);
        content.push(in_content);
        tags.push(in_tags);
    }
    if !terms.is_empty() {
        execute(
            tx,
            "INSERT INTO memory_terms (term, memory_pk, content_tf, tags_tf) \
             SELECT u.term, $1, u.content_tf, u.tags_tf \
             FROM unnest($2::text[], $3::int[], $4::int[]) AS u(term, content_tf, tags_tf)",
            &[&pk, &terms, &content, &tags],
        )
        .await?;
    }
    Ok(document.length)
}

async fn unindex(tx: &(impl GenericClient + ?Sized), pk: i64) -> Result<()> {
    execute(tx, "DELETE FROM memory_terms WHERE memory_pk = $1", &[&pk]).await?;
    Ok(())
}

/// Reads one memory with its row key and length, locking its row when `lock`.
pub(crate) async fn read_stored(
    client: &(impl GenericClient + ?Sized),
    id: &str,
    lock: bool,
) -> Result<Option<StoredMemory>> {
    let sql = if lock {
        format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1 FOR UPDATE")
    } else {
        format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = $1")
    };
    query_opt(client, &sql, &[&id]).await?.map(|row| stored_from_row(&row)).transpose()
}

/// Inserts one memory (with its postings when live) and its audit entry; how it moves the
/// counts.
pub(crate) async fn insert_memory_row(
    tx: &(impl GenericClient + ?Sized),
    memory: &Memory,
    audit: &Audit<'_>,
) -> Result<Counts> {
    let live = memory.archived_at.is_none();
    let row = query_opt(
        tx,
        "INSERT INTO memories (id, content, scope, status, repo, tags, source, metadata, \
         created_at, updated_at, archived_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING pk",
        &[
            &memory.id,
            &memory.content,
            &memory.scope.as_str(),
            &memory.status.as_str(),
            &memory.repo,
            &json_value(&memory.tags),
            &memory.source,
            &json_value(&memory.metadata),
            &memory.created_at.as_millis(),
            &memory.updated_at.as_millis(),
            &memory.archived_at.map(Timestamp::as_millis),
        ],
    )
    .await?
    .ok_or_else(|| StoreError::Corrupt("an insert returned no row".into()))?;
    insert_recall_rows(tx, std::slice::from_ref(memory)).await?;
    let pk: i64 = row.get(0);
    let mut counts = Counts::default();
    if live {
        let tokens = index(tx, pk, memory).await?;
        execute(tx, "UPDATE memories SET doc_tokens = $2 WHERE pk = $1", &[&pk, &tokens]).await?;
        counts = Counts { live: 1, tokens: i64::from(tokens) };
    }
    audit::append(tx, audit, memory.created_at, &memory.id, None, Some(memory)).await?;
    Ok(counts)
}

/// The recall bookkeeping that memories come with (an import, a restored copy) in
/// `memory_recalls`; a new memory has none, and no statement is run for it.
async fn insert_recall_rows(tx: &(impl GenericClient + ?Sized), memories: &[Memory]) -> Result<()> {
    let recalled: Vec<&Memory> = memories
        .iter()
        .filter(|memory| memory.recall_count != 0 || memory.last_recalled_at.is_some())
        .collect();
    if recalled.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = recalled.iter().map(|memory| memory.id.as_str()).collect();
    let counts: Vec<i64> = recalled.iter().map(|memory| memory.recall_count as i64).collect();
    let times: Vec<Option<i64>> =
        recalled.iter().map(|memory| memory.last_recalled_at.map(Timestamp::as_millis)).collect();
    execute(
        tx,
        "INSERT INTO memory_recalls (memory_id, recall_count, last_recalled_at) \
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])",
        &[&ids, &counts, &times],
    )
    .await?;
    Ok(())
}

/// Inserts memories with their postings and `create` audit entries in a few statements
/// (one per table, whatever the batch's size); how they move the counts.
async fn insert_memory_rows(
    tx: &(impl GenericClient + ?Sized),
    memories: &[Memory],
    actor: &str,
) -> Result<Counts> {
    let documents: Vec<Option<Document>> = memories
        .iter()
        .map(|memory| {
            memory.archived_at.is_none().then(|| Document::of(&memory.content, &memory.tags))
        })
        .collect();
    let column = |get: fn(&Memory) -> String| memories.iter().map(get).collect::<Vec<_>>();
    let ids = column(|memory| memory.id.clone());
    let contents = column(|memory| memory.content.clone());
    let scopes = column(|memory| memory.scope.as_str().to_owned());
    let statuses = column(|memory| memory.status.as_str().to_owned());
    let repos: Vec<Option<String>> = memories.iter().map(|memory| memory.repo.clone()).collect();
    let tags: Vec<serde_json::Value> =
        memories.iter().map(|memory| json_value(&memory.tags)).collect();
    let sources: Vec<Option<String>> =
        memories.iter().map(|memory| memory.source.clone()).collect();
    let metadata: Vec<serde_json::Value> =
        memories.iter().map(|memory| json_value(&memory.metadata)).collect();
    let millis = |get: fn(&Memory) -> Option<Timestamp>| {
        memories.iter().map(|memory| get(memory).map(Timestamp::as_millis)).collect::<Vec<_>>()
    };
    let created = millis(|memory| Some(memory.created_at));
    let updated = millis(|memory| Some(memory.updated_at));
    let archived = millis(|memory| memory.archived_at);
    let lengths: Vec<i32> = documents
        .iter()
        .map(|document| document.as_ref().map_or(0, |document| document.length))
        .collect();
    let rows = query(
        tx,
        "INSERT INTO memories (id, content, scope, status, repo, tags, source, metadata, \
         created_at, updated_at, archived_at, doc_tokens) \
         SELECT u.id, u.content, u.scope, u.status, u.repo, u.tags, u.source, u.metadata, \
         u.created_at, u.updated_at, u.archived_at, u.doc_tokens \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
         $6::jsonb[], $7::text[], $8::jsonb[], $9::bigint[], $10::bigint[], $11::bigint[], \
         $12::int[]) WITH ORDINALITY AS u(id, content, scope, status, repo, tags, source, \
         metadata, created_at, updated_at, archived_at, doc_tokens, n) \
         ORDER BY u.n RETURNING pk, id",
        &[
            &ids, &contents, &scopes, &statuses, &repos, &tags, &sources, &metadata, &created,
            &updated, &archived, &lengths,
        ],
    )
    .await?;
    insert_recall_rows(tx, memories).await?;
    let pks: HashMap<String, i64> = rows.iter().map(|row| (row.get(1), row.get(0))).collect();
    let mut counts = Counts::default();
    let (mut terms, mut postings, mut in_content, mut in_tags) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (memory, document) in memories.iter().zip(documents) {
        let Some(document) = document else { continue };
        let pk = *pks
            .get(&memory.id)
            .ok_or_else(|| StoreError::Corrupt(format!("{} was not inserted", memory.id)))?;
        counts += Counts { live: 1, tokens: i64::from(document.length) };
        for (term, content, tags) in document.terms {
            terms.push(term);
            postings.push(pk);
            in_content.push(content);
            in_tags.push(tags);
        }
    }
    if !terms.is_empty() {
        execute(
            tx,
            "INSERT INTO memory_terms (term, memory_pk, content_tf, tags_tf) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[])",
            &[&terms, &postings, &in_content, &in_tags],
        )
        .await?;
    }
    let audit_ids: Vec<String> =
        memories.iter().map(|_| cairn_types::new_id(cairn_types::IdPrefix::Audit)).collect();
    let afters: Vec<String> = memories.iter().map(crate::rows::json_text).collect();
    execute(
        tx,
        "INSERT INTO audit_log (id, at, actor, action, memory_id, before, after) \
         SELECT u.id, u.at, $3, 'create', u.memory_id, NULL, u.after \
         FROM unnest($1::text[], $2::bigint[], $4::text[], $5::text[]) \
         WITH ORDINALITY AS u(id, at, memory_id, after, n) ORDER BY u.n",
        &[&audit_ids, &created, &actor, &ids, &afters],
    )
    .await?;
    Ok(counts)
}

/// Applies a change to one memory (locked for the rest of the transaction) with its audit
/// entry and postings; the memory before and after and how the counts move, or `None` when
/// there is no such memory.
pub(crate) async fn update_memory_row(
    tx: &(impl GenericClient + ?Sized),
    id: &str,
    change: &MemoryChange,
    updated_at: Timestamp,
    audit: &Audit<'_>,
) -> Result<Option<(Memory, Memory, Counts)>> {
    let Some(stored) = read_stored(tx, id, true).await? else { return Ok(None) };
    let before = stored.memory;
    let after = change.applied_to(&before, updated_at);

    let (was_live, is_live) = (before.archived_at.is_none(), after.archived_at.is_none());
    let text_changed = before.content != after.content || before.tags != after.tags;
    let mut doc_tokens = if is_live { stored.doc_tokens } else { 0 };
    if was_live && (!is_live || text_changed) {
        unindex(tx, stored.pk).await?;
    }
    if is_live && (!was_live || text_changed) {
        doc_tokens = index(tx, stored.pk, &after).await?;
    }
    let counts = Counts {
        live: i64::from(is_live) - i64::from(was_live),
        tokens: i64::from(doc_tokens) - if was_live { i64::from(stored.doc_tokens) } else { 0 },
    };
    execute(
        tx,
        "UPDATE memories SET content = $2, scope = $3, status = $4, tags = $5, metadata = $6, \
         archived_at = $7, updated_at = $8, doc_tokens = $9 WHERE pk = $1",
        &[
            &stored.pk,
            &after.content,
            &after.scope.as_str(),
            &after.status.as_str(),
            &json_value(&after.tags),
            &json_value(&after.metadata),
            &after.archived_at.map(Timestamp::as_millis),
            &after.updated_at.as_millis(),
            &doc_tokens,
        ],
    )
    .await?;
    audit::append(tx, audit, after.updated_at, id, Some(&before), Some(&after)).await?;
    Ok(Some((before, after, counts)))
}

/// Locks the rows of `ids` in id order (one order for every daemon, so two transactions
/// locking overlapping sets never deadlock).
pub(crate) async fn lock_memories(
    tx: &(impl GenericClient + ?Sized),
    ids: &[String],
) -> Result<()> {
    let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    query(tx, "SELECT pk FROM memories WHERE id = ANY($1) ORDER BY id FOR UPDATE", &[&sorted])
        .await?;
    Ok(())
}

/// Owned copy of an [`Audit`], to carry into a transaction.
#[derive(Debug, Clone)]
pub(crate) struct OwnedAudit {
    pub(crate) actor: String,
    pub(crate) action: String,
}

impl OwnedAudit {
    pub(crate) fn of(audit: &Audit<'_>) -> OwnedAudit {
        OwnedAudit { actor: audit.actor.to_owned(), action: audit.action.to_owned() }
    }

    pub(crate) fn get(&self) -> Audit<'_> {
        Audit { actor: &self.actor, action: &self.action }
    }
}

/// Tells the other daemons that `ids` changed (sent at commit).
pub(crate) async fn notify(store: &PgStore, tx: &Transaction<'_>, ids: &[String]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    if let Some(index) = store.text_index() {
        // This daemon's index takes them after the commit (see `text_index`).
        index.note(tx as *const Transaction<'_> as usize, ids);
    }
    notify::notify_memories(store, tx, ids).await
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn insert_memories(&self, memories: &[Memory], actor: &str) -> Result<()> {
        if memories.is_empty() {
            return Ok(());
        }
        self.tx_with_retry((memories.to_vec(), actor.to_owned()), |store, tx, (memories, actor)| {
            Box::pin(async move {
                let counts = insert_memory_rows(tx, memories, actor).await?;
                move_counts(tx, counts).await?;
                let ids: Vec<String> = memories.iter().map(|memory| memory.id.clone()).collect();
                notify(store, tx, &ids).await
            })
        })
        .await
    }

    async fn get_memory(&self, id: &str) -> Result<Option<Memory>> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                Ok(read_stored(client, id, false).await?.map(|stored| stored.memory))
            })
        })
        .await
    }

    async fn apply_guarded(
        &self,
        groups: &[Vec<GuardedChange>],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<bool>> {
        let data = (groups.to_vec(), OwnedAudit::of(audit));
        self.tx_with_retry(data, move |store, tx, (groups, audit)| {
            Box::pin(async move {
                let audit = audit.get();
                let ids: Vec<String> =
                    groups.iter().flatten().map(|guarded| guarded.id.clone()).collect();
                lock_memories(tx, &ids).await?;
                let mut applied = Vec::with_capacity(groups.len());
                let mut counts = Counts::default();
                let mut changed = Vec::new();
                for group in groups {
                    let mut expected = true;
                    for guarded in group {
                        let memory = read_stored(tx, &guarded.id, false).await?;
                        expected &= memory
                            .is_some_and(|stored| Version::of(&stored.memory) == guarded.expected);
                    }
                    if expected {
                        for guarded in group {
                            if let Some((_, _, moved)) =
                                update_memory_row(tx, &guarded.id, &guarded.change, at, &audit)
                                    .await?
                            {
                                counts += moved;
                                changed.push(guarded.id.clone());
                            }
                        }
                    }
                    applied.push(expected);
                }
                move_counts(tx, counts).await?;
                notify(store, tx, &changed).await?;
                Ok(applied)
            })
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
        let data = (id.to_owned(), change.clone(), OwnedAudit::of(audit));
        self.tx_with_retry(data, move |store, tx, (id, change, audit)| {
            Box::pin(async move {
                let Some((_, after, counts)) =
                    update_memory_row(tx, id, change, updated_at, &audit.get()).await?
                else {
                    return Ok(None);
                };
                move_counts(tx, counts).await?;
                notify(store, tx, std::slice::from_ref(id)).await?;
                Ok(Some(after))
            })
        })
        .await
    }

    async fn list_audit(
        &self,
        filter: &AuditFilter,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AuditEntry>, u64)> {
        self.tx_with_retry(filter.clone(), move |_, tx, filter| {
            Box::pin(async move {
                tx.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
                    .map_err(crate::pg)?;
                audit::list(tx, filter, limit, offset).await
            })
        })
        .await
    }

    async fn get_memories(&self, ids: &[String]) -> Result<Vec<Memory>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read(ids.to_vec(), |_, client, ids| {
            Box::pin(async move {
                let rows = query(
                    client,
                    &format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY($1)"),
                    &[ids],
                )
                .await?;
                let mut found = HashMap::with_capacity(rows.len());
                for row in &rows {
                    let memory = memory_from_row(row)?;
                    found.insert(memory.id.clone(), memory);
                }
                Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect())
            })
        })
        .await
    }

    async fn live_memories_after(&self, after: i64, limit: u32) -> Result<Vec<(i64, Memory)>> {
        self.read((after, i64::from(limit)), |_, client, (after, limit)| {
            Box::pin(async move {
                // pk is the order of insertion; the index of live rows serves the range.
                let rows = query(
                    client,
                    &format!(
                        "SELECT {MEMORY_COLUMNS}, m.pk AS position FROM memories m \
                         WHERE m.archived_at IS NULL AND m.pk > $1 ORDER BY m.pk LIMIT $2"
                    ),
                    &[after, limit],
                )
                .await?;
                rows.iter().map(|row| Ok((row.get("position"), memory_from_row(row)?))).collect()
            })
        })
        .await
    }

    async fn adjacent_memories(&self, ids: &[String]) -> Result<Vec<Adjacent>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read(ids.to_vec(), |_, client, ids| {
            Box::pin(async move {
                // pk is the order of insertion (SQLite's rowid); archived rows are stepped
                // over, through the index of live rows.
                let rows = query(
                    client,
                    &format!(
                        "SELECT {MEMORY_COLUMNS}, asked.id AS asked, m.pk > asked.pk AS after
                         FROM memories asked
                         CROSS JOIN LATERAL (
                             (SELECT pk FROM memories WHERE archived_at IS NULL AND pk < asked.pk
                              ORDER BY pk DESC LIMIT 1)
                             UNION ALL
                             (SELECT pk FROM memories WHERE archived_at IS NULL AND pk > asked.pk
                              ORDER BY pk LIMIT 1)
                         ) AS near JOIN memories m ON m.pk = near.pk
                         WHERE asked.id = ANY($1) ORDER BY asked.id, m.pk"
                    ),
                    &[ids],
                )
                .await?;
                let mut adjacent: HashMap<String, Vec<(bool, Memory)>> = HashMap::new();
                for row in &rows {
                    let asked: String = row.get("asked");
                    adjacent
                        .entry(asked)
                        .or_default()
                        .push((row.get("after"), memory_from_row(row)?));
                }
                Ok(ids
                    .iter()
                    .flat_map(|id| {
                        let near = adjacent.remove(id).unwrap_or_default();
                        near.into_iter().map(move |(after, memory)| Adjacent {
                            of: id.clone(),
                            after,
                            memory,
                        })
                    })
                    .collect())
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
        self.tx_with_retry(filter.clone(), move |_, tx, filter| {
            Box::pin(async move {
                tx.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
                    .map_err(crate::pg)?;
                let (clause, values) = filter.conditions(|label, n| match label {
                    Label::Scope => format!("m.scope = ${n}"),
                    Label::Status => format!("m.status = ${n}"),
                    Label::Repo => format!("lower(m.repo) = lower(${n})"),
                });
                let mut parameters: Vec<&(dyn ToSql + Sync)> =
                    values.iter().map(|value| value as &(dyn ToSql + Sync)).collect();
                // Every live memory: the count kept in `memory_counts`; else the count of
                // the rows the filter's labels select through their indexes.
                let total = if filter.is_every_live_memory() {
                    corpus(tx).await?.0
                } else {
                    let count_query = format!("SELECT count(*) FROM memories m WHERE {clause}");
                    let count: i64 = query(tx, &count_query, &parameters).await?[0].get(0);
                    count as u64
                };
                let (limit, offset) = (i64::from(limit), i64::try_from(offset).unwrap_or(i64::MAX));
                let (at_limit, at_offset) = (values.len() + 1, values.len() + 2);
                parameters.extend([&limit as &(dyn ToSql + Sync), &offset]);
                let rows = query(
                    tx,
                    &format!(
                        "SELECT {MEMORY_COLUMNS} FROM memories m WHERE {clause} \
                         ORDER BY m.created_at DESC, m.pk DESC LIMIT ${at_limit} OFFSET ${at_offset}"
                    ),
                    &parameters,
                )
                .await?;
                let memories = rows.iter().map(memory_from_row).collect::<Result<Vec<_>>>()?;
                Ok(MemoryPage { memories, total })
            })
        })
        .await
    }

    async fn search_memories(
        &self,
        terms: &[String],
        filter: &MemoryFilter,
        limit: u32,
    ) -> Result<Vec<TextMatch>> {
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let index = match self.text_index() {
            // Every write acknowledged before this search, on any daemon, is in the index.
            Some(index) if index.caught_up().await => Some(index),
            _ => None,
        };
        if let Some(hits) = index.and_then(|index| index.cell.search(terms, filter, limit)) {
            return self
                .read((hits, filter.clone()), |_, client, (hits, filter)| {
                    Box::pin(async move { search::read_hits(client, hits, filter).await })
                })
                .await;
        }
        let frequencies = search::frequencies_of(self);
        self.read((terms.to_vec(), filter.clone()), move |_, client, (terms, filter)| {
            let frequencies = frequencies.clone();
            Box::pin(
                async move { search::search(client, &frequencies, terms, filter, limit).await },
            )
        })
        .await
    }

    fn fulltext_index(&self) -> cairn_store::fulltext::IndexState {
        self.text_index()
            .map_or(cairn_store::fulltext::IndexState::Fallback, |index| index.cell.state())
    }

    async fn count_memories(&self) -> Result<u64> {
        self.read((), |_, client, ()| {
            Box::pin(async move { corpus(client).await.map(|(live, _)| live) })
        })
        .await
    }

    async fn schema_version(&self) -> Result<cairn_store::SchemaVersion> {
        let applied = self
            .read((), |_, client, ()| {
                Box::pin(async move {
                    // Unqualified: the session's search path is the store's schema.
                    let row =
                        query_opt(client, "SELECT max(version) FROM cairn_migrations", &[]).await?;
                    Ok(row.and_then(|row| row.get::<_, Option<i32>>(0)).unwrap_or(0))
                })
            })
            .await?;
        let known = crate::migrations::MIGRATIONS.last().map_or(0, |(version, _, _)| *version);
        Ok(cairn_store::SchemaVersion { applied: applied as u32, known: known as u32 })
    }

    async fn record_recalls(&self, recalls: &[Recall]) -> Result<()> {
        let tally = Recall::tally(recalls);
        if tally.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = tally.iter().map(|(id, _, _)| (*id).to_owned()).collect();
        let times: Vec<i64> = tally.iter().map(|(_, times, _)| *times as i64).collect();
        let latest: Vec<i64> = tally.iter().map(|(_, _, at)| at.as_millis()).collect();
        let (mut task_keys, mut served, mut served_at) = (Vec::new(), Vec::new(), Vec::new());
        for recall in recalls {
            for id in &recall.memory_ids {
                task_keys.push(recall.task_key.clone());
                served.push(id.clone());
                served_at.push(recall.at.as_millis());
            }
        }
        let data = (ids, times, latest, task_keys, served, served_at);
        self.tx_with_retry(
            data,
            move |_, tx, (ids, times, latest, task_keys, served, served_at)| {
                Box::pin(async move {
                    // Bookkeeping, not a user's write: survives a daemon crash, made durable by
                    // the next synced commit (SQLite's relaxed writer), for this transaction only.
                    tx.batch_execute("SET LOCAL synchronous_commit = off")
                        .await
                        .map_err(crate::pg)?;
                    // One row a memory in the narrow `memory_recalls`, taken in one order (the
                    // id's) so two daemons recording overlapping recalls at once queue instead
                    // of deadlocking; a memory erased meanwhile is passed over.
                    execute(
                    tx,
                    "INSERT INTO memory_recalls AS r (memory_id, recall_count, last_recalled_at) \
                     SELECT u.id, u.times, u.at \
                     FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(id, times, at) \
                     WHERE EXISTS (SELECT 1 FROM memories m WHERE m.id = u.id) \
                     ORDER BY u.id COLLATE \"C\" \
                     ON CONFLICT (memory_id) DO UPDATE SET \
                     recall_count = r.recall_count + excluded.recall_count, \
                     last_recalled_at = GREATEST(r.last_recalled_at, excluded.last_recalled_at)",
                    &[ids, times, latest],
                )
                .await?;
                    execute(
                        tx,
                        "INSERT INTO task_recalls (task_key, memory_id, first_recalled_at) \
                     SELECT u.task_key, u.id, u.at \
                     FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY \
                     AS u(task_key, id, at, n) \
                     WHERE EXISTS (SELECT 1 FROM memories m WHERE m.id = u.id) \
                     ORDER BY u.n ON CONFLICT (task_key, memory_id) DO NOTHING",
                        &[task_keys, served, served_at],
                    )
                    .await?;
                    Ok(())
                })
            },
        )
        .await
    }

    async fn recalled_for_task(&self, task_key: &str) -> Result<Vec<String>> {
        let sql = "SELECT memory_id FROM task_recalls WHERE task_key = $1 ORDER BY seq";
        self.select(sql.to_owned(), vec![Box::new(task_key.to_owned())], first_text).await
    }

    async fn insert_outcome(&self, outcome: &Outcome, task_key: Option<&str>) -> Result<Outcome> {
        let data = (outcome.clone(), task_key.map(str::to_owned));
        self.tx_with_retry(data, |store, tx, (outcome, task_key)| {
            Box::pin(async move {
                // Two daemons recording the same command at once: each counts the other's.
                let key = lock_key(store.schema(), &format!("outcome:{}", outcome.command));
                execute(tx, "SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
                let failures: i64 = query(
                    tx,
                    "SELECT count(*) FROM outcomes WHERE command = $1 AND exit_code <> 0",
                    &[&outcome.command],
                )
                .await?[0]
                    .get(0);
                let mut outcome = outcome.clone();
                outcome.previous_failures = failures as u64;
                execute(
                    tx,
                    "INSERT INTO outcomes (id, command, exit_code, task, repo, recorded_at, \
                     previous_failures, task_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        &outcome.outcome_id,
                        &outcome.command,
                        &outcome.exit_code,
                        &outcome.task,
                        &outcome.repo,
                        &outcome.recorded_at.as_millis(),
                        &failures,
                        task_key,
                    ],
                )
                .await?;
                Ok(outcome)
            })
        })
        .await
    }

    async fn outcomes_for_task(&self, task_key: &str) -> Result<Vec<Outcome>> {
        let sql = format!("SELECT {OUTCOME_COLUMNS} FROM outcomes WHERE task_key = $1 ORDER BY pk");
        self.select(sql, vec![Box::new(task_key.to_owned())], outcome_from_row).await
    }

    async fn outcomes_for_command(&self, command: &str, limit: u32) -> Result<Vec<Outcome>> {
        let sql = format!(
            "SELECT {OUTCOME_COLUMNS} FROM outcomes WHERE command = $1 \
             ORDER BY recorded_at DESC, pk DESC LIMIT $2"
        );
        let params: Owned = vec![Box::new(command.to_owned()), Box::new(i64::from(limit))];
        self.select(sql, params, outcome_from_row).await
    }

    async fn insert_evidence(&self, evidence: &PatchEvidence, task_key: &str) -> Result<()> {
        let data = (evidence.clone(), task_key.to_owned());
        self.tx_with_retry(data, |_, tx, (evidence, task_key)| {
            Box::pin(async move {
                execute(
                    tx,
                    "INSERT INTO evidence (id, task, files, commands, memories_used, created_at, \
                     task_key) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &evidence.evidence_id,
                        &evidence.task,
                        &json_value(&evidence.files),
                        &json_value(&evidence.commands),
                        &json_value(&evidence.memories_used),
                        &evidence.created_at.as_millis(),
                        task_key,
                    ],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn evidence_for_task(&self, task_key: &str) -> Result<Vec<PatchEvidence>> {
        let sql =
            format!("SELECT {EVIDENCE_COLUMNS} FROM evidence WHERE task_key = $1 ORDER BY pk");
        self.select(sql, vec![Box::new(task_key.to_owned())], evidence_from_row).await
    }

    async fn get_evidence(&self, id: &str) -> Result<Option<PatchEvidence>> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let row = query_opt(
                    client,
                    &format!("SELECT {EVIDENCE_COLUMNS} FROM evidence WHERE id = $1"),
                    &[id],
                )
                .await?;
                row.as_ref().map(evidence_from_row).transpose()
            })
        })
        .await
    }

    async fn erase_memories(
        &self,
        ids: &[String],
        at: Timestamp,
        audit: &Audit<'_>,
    ) -> Result<Vec<String>> {
        let data = (ids.to_vec(), OwnedAudit::of(audit));
        self.tx_with_retry(data, move |store, tx, (ids, audit)| {
            Box::pin(async move {
                let audit = audit.get();
                lock_memories(tx, ids).await?;
                let mut erased = Vec::new();
                let mut counts = Counts::default();
                for id in ids {
                    if erased.contains(id) {
                        continue;
                    }
                    let Some(stored) = read_stored(tx, id, false).await? else { continue };
                    if stored.memory.archived_at.is_none() {
                        counts += Counts { live: -1, tokens: -i64::from(stored.doc_tokens) };
                    }
                    // Postings and vectors cascade.
                    execute(tx, "DELETE FROM memories WHERE pk = $1", &[&stored.pk]).await?;
                    for statement in ERASURE.iter() {
                        execute(tx, statement, &[id]).await?;
                    }
                    audit::append(tx, &audit, at, id, None, None).await?;
                    erased.push(id.clone());
                }
                move_counts(tx, counts).await?;
                notify(store, tx, &erased).await?;
                Ok(erased)
            })
        })
        .await
    }

    async fn newest_repo_memories(&self, repo: &str, limit: u32) -> Result<Vec<Memory>> {
        let sql = format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m \
             WHERE lower(m.repo) = lower($1) AND m.scope = 'repo' AND m.status = 'active' \
             AND m.archived_at IS NULL ORDER BY m.created_at DESC, m.pk DESC LIMIT $2"
        );
        let params: Owned = vec![Box::new(repo.to_owned()), Box::new(i64::from(limit))];
        self.select(sql, params, memory_from_row).await
    }

    async fn memory_ids_tagged(&self, tag: &str) -> Result<Vec<String>> {
        // `?` on a top-level array of strings: one of its elements equals the tag.
        let sql = "SELECT id FROM memories WHERE tags ? $1 ORDER BY pk";
        self.select(sql.to_owned(), vec![Box::new(tag.to_owned())], first_text).await
    }

    async fn memory_ids_containing(&self, text: &str) -> Result<Vec<String>> {
        let sql = "SELECT id FROM memories WHERE strpos(lower(content), $1) > 0 ORDER BY pk";
        self.select(sql.to_owned(), vec![Box::new(text.to_lowercase())], first_text).await
    }
}

#[cfg(test)]
mod tests {
    use cairn_test_support::postgres::TestCluster;

    use crate::tests::fresh_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_store_passes_the_conformance_suite() {
        let (_cluster, url) = TestCluster::with_database();
        cairn_store::conformance::run(fresh_stores(&url, "mem")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_connectors_pass_the_conformance_checks() {
        let (_cluster, url) = TestCluster::with_database();
        cairn_store::conformance::run_connectors(fresh_stores(&url, "conn")).await;
    }
}
