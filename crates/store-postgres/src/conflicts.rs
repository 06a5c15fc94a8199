//! [`cairn_store::ConflictStore`] on PostgreSQL: conflict sets and their members.
//!
//! Recording runs under one advisory lock per schema, so two daemons' dream cycles never
//! open two conflicts for one subject; settling relies on the conflict's row lock (a second
//! settle waits, re-checks `status = 'open'` and changes nothing).

use std::collections::HashSet;

use async_trait::async_trait;
use cairn_store::{
    Audit, ConflictPlan, ConflictRecord, ConflictStore, MemoryChange, Result, Settlement,
    StoreError, new_conflict_members, plan_conflict, planned_conflict, side_index,
};
use cairn_types::{ConflictSide, ConflictStatus, Status, Timestamp};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::memories::{
    Counts, OwnedAudit, insert_memory_row, move_counts, notify, update_memory_row,
};
use crate::rows::{Params, execute, query, query_opt};
use crate::{PgStore, lock_key};

const COLUMNS: &str = "id, subject, repo, reason, status, detected_at, resolution, resolved_at";

/// A conflict's row, without its memories.
fn from_row(row: &Row) -> Result<ConflictRecord> {
    let status: &str = row.get(4);
    Ok(ConflictRecord {
        id: row.get(0),
        subject: row.get(1),
        repo: row.get(2),
        sides: Vec::new(),
        reason: row.get(3),
        status: ConflictStatus::parse(status)
            .ok_or_else(|| StoreError::Corrupt(format!("conflict status `{status}`")))?,
        detected_at: Timestamp::from_millis(row.get(5)),
        resolution: row.get(6),
        resolved_at: row.get::<_, Option<i64>>(7).map(Timestamp::from_millis),
    })
}

/// Reads conflicts matching `condition` (with `values`), newest first, with their memories.
async fn select(
    client: &(impl GenericClient + ?Sized),
    condition: &str,
    values: &Params<'_>,
) -> Result<Vec<ConflictRecord>> {
    let sql = format!("SELECT {COLUMNS} FROM conflict_sets WHERE {condition} ORDER BY pk DESC");
    let mut records = Vec::new();
    for row in query(client, &sql, values).await? {
        let mut record = from_row(&row)?;
        record.sides = sides(client, &record.id).await?;
        records.push(record);
    }
    Ok(records)
}

async fn sides(client: &(impl GenericClient + ?Sized), id: &str) -> Result<Vec<ConflictSide>> {
    let rows = query(
        client,
        "SELECT side, label, memory_id FROM conflict_members WHERE conflict_id = $1 \
         ORDER BY side, memory_id COLLATE \"C\"",
        &[&id],
    )
    .await?;
    let mut sides: Vec<(i32, ConflictSide)> = Vec::new();
    for row in rows {
        let (side, label, memory_id): (i32, String, String) = (row.get(0), row.get(1), row.get(2));
        match sides.last_mut() {
            Some((last, found)) if *last == side => found.memory_ids.push(memory_id),
            _ => sides.push((side, ConflictSide { label, memory_ids: vec![memory_id] })),
        }
    }
    Ok(sides.into_iter().map(|(_, side)| side).collect())
}

/// What recording `found` does (the decision is `cairn_store`'s; these are its queries).
async fn plan(
    client: &(impl GenericClient + ?Sized),
    found: &ConflictRecord,
) -> Result<ConflictPlan> {
    let known: HashSet<String> = query(
        client,
        "SELECT m.memory_id FROM conflict_members m JOIN conflict_sets s ON s.id = m.conflict_id \
         WHERE s.subject = $1 AND s.repo IS NOT DISTINCT FROM $2",
        &[&found.subject, &found.repo],
    )
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect();
    let new = new_conflict_members(found, &known);
    if new.is_empty() {
        return Ok(ConflictPlan::Skip);
    }
    let open = select(
        client,
        "subject = $1 AND repo IS NOT DISTINCT FROM $2 AND status = 'open'",
        &[&found.subject, &found.repo],
    )
    .await?;
    Ok(plan_conflict(found, new, open.into_iter().next()))
}

/// Moves a memory of a conflict to `review` unless it is archived or there already.
async fn to_review(
    tx: &(impl GenericClient + ?Sized),
    memory_id: &str,
    at: Timestamp,
    audit: &Audit<'_>,
) -> Result<Counts> {
    let waiting = query_opt(
        tx,
        "SELECT archived_at IS NULL AND status <> 'review' FROM memories WHERE id = $1",
        &[&memory_id],
    )
    .await?
    .map(|row| row.get::<_, bool>(0));
    if waiting == Some(true) {
        let change = MemoryChange { status: Some(Status::Review), ..MemoryChange::default() };
        if let Some((_, _, counts)) = update_memory_row(tx, memory_id, &change, at, audit).await? {
            return Ok(counts);
        }
    }
    Ok(Counts::default())
}

#[async_trait]
impl ConflictStore for PgStore {
    async fn record_conflicts(
        &self,
        found: &[ConflictRecord],
        actor: &str,
        dry_run: bool,
    ) -> Result<Vec<ConflictRecord>> {
        if dry_run {
            return self
                .read(found.to_vec(), |_, client, found| {
                    Box::pin(async move {
                        let mut recorded = Vec::new();
                        for conflict in found {
                            let plan = plan(client, conflict).await?;
                            recorded.extend(planned_conflict(conflict, plan));
                        }
                        Ok(recorded)
                    })
                })
                .await;
        }
        self.tx_with_retry((found.to_vec(), actor.to_owned()), |store, tx, (found, actor)| {
            Box::pin(async move {
                let key = lock_key(store.schema(), "conflicts");
                execute(tx, "SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
                let audit = Audit { actor, action: "review" };
                let mut recorded = Vec::new();
                let mut counts = Counts::default();
                let mut changed = Vec::new();
                for conflict in found {
                    let at = conflict.detected_at;
                    let (id, members) = match plan(tx, conflict).await? {
                        ConflictPlan::Skip => continue,
                        ConflictPlan::Open { members } => {
                            execute(
                                tx,
                                &format!(
                                    "INSERT INTO conflict_sets ({COLUMNS}) \
                                     VALUES ($1, $2, $3, $4, 'open', $5, NULL, NULL)"
                                ),
                                &[
                                    &conflict.id,
                                    &conflict.subject,
                                    &conflict.repo,
                                    &conflict.reason,
                                    &at.as_millis(),
                                ],
                            )
                            .await?;
                            (conflict.id.clone(), members)
                        }
                        ConflictPlan::Grow { open, new } => {
                            execute(
                                tx,
                                "UPDATE conflict_sets SET reason = $2 WHERE id = $1",
                                &[&open.id, &conflict.reason],
                            )
                            .await?;
                            (open.id, new)
                        }
                    };
                    let mut labels: Vec<String> =
                        sides(tx, &id).await?.into_iter().map(|side| side.label).collect();
                    for (memory_id, label) in &members {
                        let side = side_index(&mut labels, label);
                        execute(
                            tx,
                            "INSERT INTO conflict_members (conflict_id, memory_id, side, label) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                            &[&id, memory_id, &(side as i32), label],
                        )
                        .await?;
                        counts += to_review(tx, memory_id, at, &audit).await?;
                        changed.push(memory_id.clone());
                    }
                    recorded.extend(select(tx, "id = $1", &[&id]).await?);
                }
                move_counts(tx, counts).await?;
                notify(store, tx, &changed).await?;
                Ok(recorded)
            })
        })
        .await
    }

    async fn list_conflicts(&self, status: Option<ConflictStatus>) -> Result<Vec<ConflictRecord>> {
        let status = status.map(|status| status.as_str().to_owned());
        // Conflicts and their members from one snapshot.
        self.tx_with_retry(status, |_, tx, status| {
            Box::pin(async move {
                tx.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
                    .map_err(crate::pg)?;
                select(tx, "$1::text IS NULL OR status = $1", &[status]).await
            })
        })
        .await
    }

    async fn get_conflict(&self, id: &str) -> Result<Option<ConflictRecord>> {
        self.tx_with_retry(id.to_owned(), |_, tx, id| {
            Box::pin(async move {
                tx.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    .await
                    .map_err(crate::pg)?;
                Ok(select(tx, "id = $1", &[id]).await?.into_iter().next())
            })
        })
        .await
    }

    async fn settle_conflict(
        &self,
        id: &str,
        settlement: &Settlement,
        audit: &Audit<'_>,
    ) -> Result<bool> {
        let data = (id.to_owned(), settlement.clone(), OwnedAudit::of(audit));
        self.tx_with_retry(data, |store, tx, (id, settlement, audit)| {
            Box::pin(async move {
                let closed = execute(
                    tx,
                    "UPDATE conflict_sets SET status = 'resolved', resolution = $2, \
                     resolved_at = $3 WHERE id = $1 AND status = 'open'",
                    &[id, &settlement.resolution, &settlement.at.as_millis()],
                )
                .await?;
                if closed == 0 {
                    return Ok(false);
                }
                let mut counts = Counts::default();
                let mut changed = Vec::new();
                if let Some(memory) = &settlement.insert {
                    let create = Audit { actor: &audit.actor, action: "create" };
                    counts += insert_memory_row(tx, memory, &create).await?;
                    changed.push(memory.id.clone());
                }
                let audit = audit.get();
                for (memory_id, change) in &settlement.changes {
                    if let Some((_, _, moved)) =
                        update_memory_row(tx, memory_id, change, settlement.at, &audit).await?
                    {
                        counts += moved;
                        changed.push(memory_id.clone());
                    }
                }
                move_counts(tx, counts).await?;
                notify(store, tx, &changed).await?;
                Ok(true)
            })
        })
        .await
    }
}
