//! The audit log: written in the same transaction as the change it records.

use cairn_store::{Audit, AuditFilter, Result};
use cairn_types::{AuditEntry, IdPrefix, Memory, Timestamp, new_id};
use rusqlite::{Connection, Transaction, params};

use crate::rows::json_text;
use crate::sql;

/// Appends one entry for a change to `memory_id`.
pub(crate) fn append(
    tx: &Transaction<'_>,
    audit: &Audit<'_>,
    at: Timestamp,
    memory_id: &str,
    before: Option<&Memory>,
    after: Option<&Memory>,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO audit_log (id, at, actor, action, memory_id, before, after) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .map_err(sql)?
    .execute(params![
        new_id(IdPrefix::Audit),
        at.as_millis(),
        audit.actor,
        audit.action,
        memory_id,
        before.map(json_text),
        after.map(json_text),
    ])
    .map_err(sql)?;
    Ok(())
}

pub(crate) fn list(
    connection: &Connection,
    filter: &AuditFilter,
    limit: u32,
    offset: u64,
) -> Result<(Vec<AuditEntry>, u64)> {
    const WHERE: &str = "(?1 IS NULL OR memory_id = ?1) AND (?2 IS NULL OR actor = ?2)";
    let total: i64 = connection
        .prepare_cached(&format!("SELECT count(*) FROM audit_log WHERE {WHERE}"))
        .map_err(sql)?
        .query_row(params![filter.memory_id, filter.actor], |row| row.get(0))
        .map_err(sql)?;
    let mut statement = connection
        .prepare_cached(&format!(
            "SELECT id, at, actor, action, memory_id, before, after FROM audit_log WHERE {WHERE} \
             ORDER BY rowid DESC LIMIT ?3 OFFSET ?4"
        ))
        .map_err(sql)?;
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let rows = statement
        .query_map(params![filter.memory_id, filter.actor, limit, offset], |row| {
            let json = |index: usize| -> rusqlite::Result<Option<serde_json::Value>> {
                let text: Option<String> = row.get(index)?;
                Ok(text.and_then(|text| serde_json::from_str(&text).ok()))
            };
            Ok(AuditEntry {
                id: row.get(0)?,
                at: Timestamp::from_millis(row.get(1)?),
                actor: row.get(2)?,
                action: row.get(3)?,
                memory_id: row.get(4)?,
                before: json(5)?,
                after: json(6)?,
            })
        })
        .map_err(sql)?;
    let entries = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)?;
    Ok((entries, total as u64))
}
