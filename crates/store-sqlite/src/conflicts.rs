//! Detected conflicts in SQLite: one row per conflict, one per memory in it.

use std::collections::HashSet;

use async_trait::async_trait;
use cairn_store::{
    Audit, ConflictPlan, ConflictRecord, ConflictStore, MemoryChange, Result, Settlement,
    new_conflict_members, plan_conflict, planned_conflict, side_index,
};
use cairn_types::{ConflictSide, ConflictStatus, Memory, Status, Timestamp};
use rusqlite::{Connection, Row, params};

use crate::memory_rows::{insert_memory_row, live_change, update_memory_row, write_changes};
use crate::rows::{MEMORY_COLUMNS, memory_from_row};
use crate::{SqliteStore, StoreError, sql};

const COLUMNS: &str = "id, subject, repo, reason, status, detected_at, resolution, resolved_at";

/// A conflict's row, without its memories.
fn from_row(row: &Row<'_>) -> rusqlite::Result<(ConflictRecord, String)> {
    let status: String = row.get(4)?;
    Ok((
        ConflictRecord {
            id: row.get(0)?,
            subject: row.get(1)?,
            repo: row.get(2)?,
            sides: Vec::new(),
            reason: row.get(3)?,
            status: ConflictStatus::Open,
            detected_at: Timestamp::from_millis(row.get(5)?),
            resolution: row.get(6)?,
            resolved_at: row.get::<_, Option<i64>>(7)?.map(Timestamp::from_millis),
        },
        status,
    ))
}

/// Reads conflicts matching `condition` (with `values`), newest first, with their memories.
fn select(
    connection: &Connection,
    condition: &str,
    values: impl rusqlite::Params,
) -> Result<Vec<ConflictRecord>> {
    let query =
        format!("SELECT {COLUMNS} FROM conflict_sets WHERE {condition} ORDER BY rowid DESC");
    let mut statement = connection.prepare_cached(&query).map_err(sql)?;
    let rows = statement.query_map(values, from_row).map_err(sql)?;
    let mut records = Vec::new();
    for row in rows {
        let (mut record, status) = row.map_err(sql)?;
        record.status = ConflictStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("conflict status `{status}`")))?;
        record.sides = sides(connection, &record.id)?;
        records.push(record);
    }
    Ok(records)
}

fn sides(connection: &Connection, id: &str) -> Result<Vec<ConflictSide>> {
    let mut statement = connection
        .prepare_cached(
            "SELECT side, label, memory_id FROM conflict_members WHERE conflict_id = ?1 \
             ORDER BY side, memory_id",
        )
        .map_err(sql)?;
    let rows = statement
        .query_map([id], |row| Ok((row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?)))
        .map_err(sql)?;
    let mut sides: Vec<(i64, ConflictSide)> = Vec::new();
    for row in rows {
        let (side, label, memory_id): (i64, String, String) = row.map_err(sql)?;
        match sides.last_mut() {
            Some((last, found)) if *last == side => found.memory_ids.push(memory_id),
            _ => sides.push((side, ConflictSide { label, memory_ids: vec![memory_id] })),
        }
    }
    Ok(sides.into_iter().map(|(_, side)| side).collect())
}

/// What recording `found` does (the decision is `cairn_store`'s; these are its queries).
fn plan(connection: &Connection, found: &ConflictRecord) -> Result<ConflictPlan> {
    let mut statement = connection
        .prepare_cached(
            "SELECT m.memory_id FROM conflict_members m \
             JOIN conflict_sets s ON s.id = m.conflict_id WHERE s.subject = ?1 AND s.repo IS ?2",
        )
        .map_err(sql)?;
    let known: HashSet<String> = statement
        .query_map(params![found.subject, found.repo], |row| row.get(0))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let new = new_conflict_members(found, &known);
    if new.is_empty() {
        return Ok(ConflictPlan::Skip);
    }
    let open = select(
        connection,
        "subject = ?1 AND repo IS ?2 AND status = 'open'",
        params![found.subject, found.repo],
    )?;
    Ok(plan_conflict(found, new, open.into_iter().next()))
}

/// Adds `members` (memory, side, label) to the conflict `conflict_id`, in one statement.
fn add_members(
    tx: &rusqlite::Transaction<'_>,
    conflict_id: &str,
    members: &[(&str, usize, &str)],
) -> Result<()> {
    let members = serde_json::to_string(members).map_err(StoreError::backend)?;
    tx.prepare_cached(
        "INSERT INTO conflict_members (conflict_id, memory_id, side, label) \
         SELECT ?1, value ->> 0, value ->> 1, value ->> 2 FROM json_each(?2) WHERE true \
         ON CONFLICT DO NOTHING",
    )
    .map_err(sql)?
    .execute(params![conflict_id, members])
    .map_err(sql)?;
    Ok(())
}

/// How many memories [`to_review`] writes with one statement.
const REVIEW_CHUNK: usize = 5_000;

/// Moves the memories `ids` of a conflict to `review`, those not archived or there already:
/// read in one statement, written a chunk a statement, each with its audit entry.
fn to_review(
    tx: &rusqlite::Transaction<'_>,
    ids: &[&str],
    at: Timestamp,
    audit: &Audit<'_>,
) -> Result<()> {
    let ids = serde_json::to_string(ids).map_err(StoreError::backend)?;
    let waiting: Vec<Memory> = tx
        .prepare_cached(&format!(
            "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN (SELECT value FROM json_each(?1)) \
             AND m.archived_at IS NULL AND m.status != 'review'"
        ))
        .map_err(sql)?
        .query_map([ids], |row| Ok(memory_from_row(row)))
        .map_err(sql)?
        .map(|row| row.map_err(sql)?)
        .collect::<Result<_>>()?;
    let change = MemoryChange { status: Some(Status::Review), ..MemoryChange::default() };
    // A few thousand at a time: a conflict can name hundreds of thousands of memories.
    let mut waiting = waiting.into_iter().peekable();
    while waiting.peek().is_some() {
        let changes: Vec<(Memory, Memory)> = waiting
            .by_ref()
            .take(REVIEW_CHUNK)
            .map(|before| {
                let after = change.applied_to(&before, at);
                (before, after)
            })
            .collect();
        write_changes(tx, &changes, audit)?;
    }
    Ok(())
}

#[async_trait]
impl ConflictStore for SqliteStore {
    async fn record_conflicts(
        &self,
        found: &[ConflictRecord],
        actor: &str,
        dry_run: bool,
    ) -> Result<Vec<ConflictRecord>> {
        let found = found.to_vec();
        if dry_run {
            return self
                .read(move |connection| {
                    let mut recorded = Vec::new();
                    for conflict in found {
                        let plan = plan(connection, &conflict)?;
                        recorded.extend(planned_conflict(&conflict, plan));
                    }
                    Ok(recorded)
                })
                .await;
        }
        let actor = actor.to_owned();
        self.write(move |tx| {
            let audit = Audit { actor: &actor, action: "review" };
            let mut recorded = Vec::new();
            for conflict in found {
                let at = conflict.detected_at;
                let (id, members) = match plan(tx, &conflict)? {
                    ConflictPlan::Skip => continue,
                    ConflictPlan::Open { members } => {
                        tx.prepare_cached(&format!(
                            "INSERT INTO conflict_sets ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, 'open', ?5, NULL, NULL)"
                        ))
                        .map_err(sql)?
                        .execute(params![
                            conflict.id,
                            conflict.subject,
                            conflict.repo,
                            conflict.reason,
                            at.as_millis()
                        ])
                        .map_err(sql)?;
                        (conflict.id.clone(), members)
                    }
                    ConflictPlan::Grow { open, new } => {
                        tx.prepare_cached("UPDATE conflict_sets SET reason = ?2 WHERE id = ?1")
                            .map_err(sql)?
                            .execute(params![open.id, conflict.reason])
                            .map_err(sql)?;
                        (open.id, new)
                    }
                };
                let mut labels: Vec<String> = sides(tx, &id)?.into_iter().map(|s| s.label).collect();
                let rows: Vec<(&str, usize, &str)> = members
                    .iter()
                    .map(|(memory_id, label)| {
                        (memory_id.as_str(), side_index(&mut labels, label), label.as_str())
                    })
                    .collect();
                add_members(tx, &id, &rows)?;
                let ids: Vec<&str> = rows.iter().map(|(memory_id, _, _)| *memory_id).collect();
                to_review(tx, &ids, at, &audit)?;
                recorded.extend(select(tx, "id = ?1", [&id])?);
            }
            Ok(recorded)
        })
        .await
    }

    async fn list_conflicts(&self, status: Option<ConflictStatus>) -> Result<Vec<ConflictRecord>> {
        let status = status.map(ConflictStatus::as_str);
        self.read(move |connection| select(connection, "?1 IS NULL OR status = ?1", [status])).await
    }

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>> {
        let id = id.to_owned();
        self.read(move |connection| Ok(select(connection, "id = ?1", [id])?.into_iter().next()))
            .await
    }

    async fn settle_conflict(
        &self,
        id: &str,
        settlement: &Settlement,
        audit: &Audit<'_>,
    ) -> Result<bool> {
        let (id, settlement) = (id.to_owned(), settlement.clone());
        let (actor, action) = (audit.actor.to_owned(), audit.action.to_owned());
        self.write_counted(move |tx| {
            let closed = tx
                .prepare_cached(
                    "UPDATE conflict_sets SET status = 'resolved', resolution = ?2, resolved_at = ?3 \
                     WHERE id = ?1 AND status = 'open'",
                )
                .map_err(sql)?
                .execute(params![id, settlement.resolution, settlement.at.as_millis()])
                .map_err(sql)?;
            if closed == 0 {
                return Ok((false, 0));
            }
            let mut live = 0;
            if let Some(memory) = &settlement.insert {
                insert_memory_row(tx, memory, &Audit { actor: &actor, action: "create" })?;
                live += i64::from(memory.archived_at.is_none());
            }
            let audit = Audit { actor: &actor, action: &action };
            for (memory_id, change) in &settlement.changes {
                if let Some((before, after)) =
                    update_memory_row(tx, memory_id, change, settlement.at, &audit)?
                {
                    live += live_change(&before, &after);
                }
            }
            Ok((true, live))
        })
        .await
    }
}
