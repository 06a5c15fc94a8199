//! The audit log: entries appended in the transaction of the change they record.

use cairn_store::{Audit, AuditFilter, Result};
use cairn_types::{AuditEntry, IdPrefix, Memory, Timestamp, new_id};
use deadpool_postgres::GenericClient;

use crate::rows::{execute, json_text, query};

/// Appends one entry for a change to `memory_id`.
pub(crate) async fn append(
    tx: &(impl GenericClient + ?Sized),
    audit: &Audit<'_>,
    at: Timestamp,
    memory_id: &str,
    before: Option<&Memory>,
    after: Option<&Memory>,
) -> Result<()> {
    execute(
        tx,
        "INSERT INTO audit_log (id, at, actor, action, memory_id, before, after) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &new_id(IdPrefix::Audit),
            &at.as_millis(),
            &audit.actor,
            &audit.action,
            &memory_id,
            &before.map(json_text),
            &after.map(json_text),
        ],
    )
    .await?;
    Ok(())
}

/// A page of the log, newest first, and the count of all entries the filter matches; in
/// one transaction so both see one snapshot.
pub(crate) async fn list(
    tx: &(impl GenericClient + ?Sized),
    filter: &AuditFilter,
    limit: u32,
    offset: u64,
) -> Result<(Vec<AuditEntry>, u64)> {
    const WHERE: &str = "($1::text IS NULL OR memory_id = $1) AND ($2::text IS NULL OR actor = $2)";
    let total: i64 = query(
        tx,
        &format!("SELECT count(*) FROM audit_log WHERE {WHERE}"),
        &[&filter.memory_id, &filter.actor],
    )
    .await?[0]
        .get(0);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let rows = query(
        tx,
        &format!(
            "SELECT id, at, actor, action, memory_id, before, after FROM audit_log WHERE {WHERE} \
             ORDER BY pk DESC LIMIT $3 OFFSET $4"
        ),
        &[&filter.memory_id, &filter.actor, &i64::from(limit), &offset],
    )
    .await?;
    let json = |text: Option<String>| text.and_then(|text| serde_json::from_str(&text).ok());
    let entries = rows
        .iter()
        .map(|row| AuditEntry {
            id: row.get(0),
            at: Timestamp::from_millis(row.get(1)),
            actor: row.get(2),
            action: row.get(3),
            memory_id: row.get(4),
            before: json(row.get(5)),
            after: json(row.get(6)),
        })
        .collect();
    Ok((entries, total as u64))
}
