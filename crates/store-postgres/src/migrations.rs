//! The schema's versioned migrations, applied at open under an advisory lock so several
//! daemons starting at once migrate once; each applied file's checksum is kept and checked.

use cairn_store::{Result, StoreError};
use sha2::Digest;

use crate::{lock_key, pg};

/// Every migration this binary knows: version, name, SQL. A shipped file is never edited.
pub(crate) const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "initial", include_str!("../migrations/0001_initial.sql")),
    (2, "memory_recalls", include_str!("../migrations/0002_memory_recalls.sql")),
    (3, "repo_without_case", include_str!("../migrations/0003_repo_without_case.sql")),
    (
        4,
        "idempotency_and_key_expiry",
        include_str!("../migrations/0004_idempotency_and_key_expiry.sql"),
    ),
    (5, "listing_by_label", include_str!("../migrations/0005_listing_by_label.sql")),
];

fn checksum(sql: &str) -> String {
    hex::encode(sha2::Sha256::digest(sql.as_bytes()))
}

/// Applies the migrations of `migrations` missing from `schema` (created when missing), on
/// `client`, a connection of its own. Holds the schema's migration lock throughout, so
/// concurrent callers wait and then find nothing to do. Refuses a schema where a migration
/// it knows was applied with other contents.
pub(crate) async fn apply(
    client: &mut tokio_postgres::Client,
    schema: &str,
    migrations: &[(i32, &str, &str)],
) -> Result<()> {
    let key = lock_key(schema, "migrations");
    client.execute("SELECT pg_advisory_lock($1)", &[&key]).await.map_err(pg)?;
    let result = apply_locked(client, schema, migrations).await;
    // Closing the session releases the lock too, should this fail.
    let unlocked = client.execute("SELECT pg_advisory_unlock($1)", &[&key]).await.map_err(pg);
    result.and(unlocked.map(|_| ()))
}

async fn apply_locked(
    client: &mut tokio_postgres::Client,
    schema: &str,
    migrations: &[(i32, &str, &str)],
) -> Result<()> {
    let exists = client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await
        .map_err(pg)?
        .is_some();
    if !exists {
        client.batch_execute(&format!("CREATE SCHEMA \"{schema}\"")).await.map_err(pg)?;
    }
    client
        .batch_execute(&format!(
            "SET search_path TO \"{schema}\"; \
             CREATE TABLE IF NOT EXISTS cairn_migrations (version integer PRIMARY KEY, \
             name text NOT NULL, checksum text NOT NULL, \
             applied_at timestamptz NOT NULL DEFAULT now())"
        ))
        .await
        .map_err(pg)?;
    let applied: Vec<(i32, String)> = client
        .query("SELECT version, checksum FROM cairn_migrations ORDER BY version", &[])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    for (version, stored) in &applied {
        match migrations.iter().find(|(known, _, _)| known == version) {
            Some((_, name, sql)) if checksum(sql) != *stored => {
                return Err(StoreError::Backend(
                    format!(
                        "storage migration {version} ({name}) in schema `{schema}` was applied \
                         with other contents than this binary's: it was changed after it \
                         shipped; refusing to start"
                    )
                    .into(),
                ));
            }
            Some(_) => {}
            None => tracing::warn!(
                version,
                schema,
                "the database has a storage migration this binary does not know (a newer \
                 daemon applied it); carrying on, as migrations only add"
            ),
        }
    }
    for (version, name, sql) in migrations {
        if applied.iter().any(|(done, _)| done == version) {
            continue;
        }
        let tx = client.transaction().await.map_err(pg)?;
        tx.batch_execute(sql).await.map_err(pg)?;
        tx.execute(
            "INSERT INTO cairn_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[version, name, &checksum(sql)],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        tracing::info!(version, name, schema, "applied storage migration");
    }
    Ok(())
}
