//! Conversions between PostgreSQL rows and Cairn's memory types, and the statement helpers
//! the memory side uses (statements prepared once per connection).

use cairn_store::{MemoryFilter, Result, StoreError};
use cairn_types::{Memory, Outcome, PatchEvidence, Timestamp};
use deadpool_postgres::GenericClient;
use serde::de::DeserializeOwned;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::pg;

/// The memory columns, in the order [`memory_from_row`] reads them, for a table aliased `m`.
/// Recall bookkeeping comes from `memory_recalls` (a memory never recalled has no row there;
/// the memories' own two columns are left as migration 2 found them).
pub(crate) const MEMORY_COLUMNS: &str = "m.id, m.content, m.scope, m.status, m.repo, m.tags, \
     m.source, m.metadata, m.created_at, m.updated_at, \
     (SELECT r.last_recalled_at FROM memory_recalls r WHERE r.memory_id = m.id), \
     coalesce((SELECT r.recall_count FROM memory_recalls r WHERE r.memory_id = m.id), 0), \
     m.archived_at, m.pk, m.doc_tokens";

/// The WHERE clause shared by lists and searches, with its parameters $1..$4.
pub(crate) const FILTER_SQL: &str = "($1::text IS NULL OR m.scope = $1) \
     AND ($2::text IS NULL OR m.status = $2) AND ($3::text IS NULL OR lower(m.repo) = lower($3)) \
     AND ($4 OR m.archived_at IS NULL)";

/// The filter's parameters $1..$3 of [`FILTER_SQL`] ($4 is whether archived ones count).
pub(crate) fn filter_params(
    filter: &MemoryFilter,
) -> (Option<&'static str>, Option<&'static str>, Option<String>) {
    (
        filter.scope.map(|scope| scope.as_str()),
        filter.status.map(|status| status.as_str()),
        filter.repo.clone(),
    )
}

pub(crate) type Params<'a> = [&'a (dyn ToSql + Sync)];

/// A statement's parameters, owned, to carry into [`crate::PgStore::select`].
pub(crate) type Owned = Vec<Box<dyn ToSql + Send + Sync>>;

impl crate::PgStore {
    /// The rows of one read-only statement, each made into a `T` by `map`, read as
    /// [`crate::PgStore::read`] reads (again on another connection while one is found lost).
    pub(crate) async fn select<T: Send + 'static>(
        &self,
        sql: String,
        params: Owned,
        map: fn(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.read((sql, params), move |_, client, (sql, params)| {
            Box::pin(async move {
                let params: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|param| &**param as &(dyn ToSql + Sync)).collect();
                query(client, sql, &params).await?.iter().map(map).collect()
            })
        })
        .await
    }
}

/// The first column, a text.
pub(crate) fn first_text(row: &Row) -> Result<String> {
    row.try_get(0).map_err(pg)
}

/// Runs a statement prepared once per connection; its rows.
pub(crate) async fn query(
    client: &(impl GenericClient + ?Sized),
    sql: &str,
    params: &Params<'_>,
) -> Result<Vec<Row>> {
    let statement = client.prepare_cached(sql).await.map_err(pg)?;
    client.query(&statement, params).await.map_err(pg)
}

/// Runs a statement prepared once per connection; its row, if any.
pub(crate) async fn query_opt(
    client: &(impl GenericClient + ?Sized),
    sql: &str,
    params: &Params<'_>,
) -> Result<Option<Row>> {
    let statement = client.prepare_cached(sql).await.map_err(pg)?;
    client.query_opt(&statement, params).await.map_err(pg)
}

/// Runs a statement prepared once per connection; the rows it changed.
pub(crate) async fn execute(
    client: &(impl GenericClient + ?Sized),
    sql: &str,
    params: &Params<'_>,
) -> Result<u64> {
    let statement = client.prepare_cached(sql).await.map_err(pg)?;
    client.execute(&statement, params).await.map_err(pg)
}

pub(crate) fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

pub(crate) fn json_value(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).expect("JSON values always serialize")
}

pub(crate) fn from_json<T: DeserializeOwned>(value: serde_json::Value, column: &str) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|error| StoreError::Corrupt(format!("column {column}: {error}")))
}

fn parse_enum<T: std::str::FromStr<Err = String>>(text: &str) -> Result<T> {
    text.parse().map_err(StoreError::Corrupt)
}

/// A memory as stored, with what only the store keeps: its row key and indexed length.
#[derive(Debug, Clone)]
pub(crate) struct StoredMemory {
    pub(crate) memory: Memory,
    pub(crate) pk: i64,
    pub(crate) doc_tokens: i32,
}

pub(crate) fn stored_from_row(row: &Row) -> Result<StoredMemory> {
    let get = |error| StoreError::backend(error);
    let millis = |index: usize| row.try_get::<_, Option<i64>>(index).map_err(get);
    let scope: String = row.try_get(2).map_err(get)?;
    let status: String = row.try_get(3).map_err(get)?;
    let memory = Memory {
        id: row.try_get(0).map_err(get)?,
        content: row.try_get(1).map_err(get)?,
        scope: parse_enum(&scope)?,
        status: parse_enum(&status)?,
        repo: row.try_get(4).map_err(get)?,
        tags: from_json(row.try_get(5).map_err(get)?, "tags")?,
        source: row.try_get(6).map_err(get)?,
        metadata: from_json(row.try_get(7).map_err(get)?, "metadata")?,
        created_at: Timestamp::from_millis(row.try_get(8).map_err(get)?),
        updated_at: Timestamp::from_millis(row.try_get(9).map_err(get)?),
        last_recalled_at: millis(10)?.map(Timestamp::from_millis),
        recall_count: row.try_get::<_, i64>(11).map_err(get)? as u64,
        archived_at: millis(12)?.map(Timestamp::from_millis),
    };
    Ok(StoredMemory {
        memory,
        pk: row.try_get(13).map_err(get)?,
        doc_tokens: row.try_get(14).map_err(get)?,
    })
}

pub(crate) fn memory_from_row(row: &Row) -> Result<Memory> {
    stored_from_row(row).map(|stored| stored.memory)
}

pub(crate) const OUTCOME_COLUMNS: &str =
    "id, command, exit_code, task, repo, recorded_at, previous_failures";

pub(crate) fn outcome_from_row(row: &Row) -> Result<Outcome> {
    let get = |error| StoreError::backend(error);
    let exit_code: i32 = row.try_get(2).map_err(get)?;
    Ok(Outcome {
        outcome_id: row.try_get(0).map_err(get)?,
        command: row.try_get(1).map_err(get)?,
        exit_code,
        succeeded: exit_code == 0,
        task: row.try_get(3).map_err(get)?,
        repo: row.try_get(4).map_err(get)?,
        recorded_at: Timestamp::from_millis(row.try_get(5).map_err(get)?),
        previous_failures: row.try_get::<_, i64>(6).map_err(get)? as u64,
    })
}

pub(crate) const EVIDENCE_COLUMNS: &str = "id, task, files, commands, memories_used, created_at";

pub(crate) fn evidence_from_row(row: &Row) -> Result<PatchEvidence> {
    let get = |error| StoreError::backend(error);
    Ok(PatchEvidence {
        evidence_id: row.try_get(0).map_err(get)?,
        task: row.try_get(1).map_err(get)?,
        files: from_json(row.try_get(2).map_err(get)?, "files")?,
        commands: from_json(row.try_get(3).map_err(get)?, "commands")?,
        memories_used: from_json(row.try_get(4).map_err(get)?, "memories_used")?,
        created_at: Timestamp::from_millis(row.try_get(5).map_err(get)?),
    })
}
