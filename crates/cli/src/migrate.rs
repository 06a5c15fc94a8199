//! `cairn migrate --from sqlite:PATH --to postgres://…`: moves a solo daemon's data into a
//! PostgreSQL database, then proves the copy — per table, the row count and a SHA-256 over
//! every row read back from both sides; the live memory count; each conversation's next
//! offset against its events; and the top hits of sample searches.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use cairn_store::transfer::{Export, TABLES, Transfer, copy_table};
use cairn_store::{MemoryFilter, Store};
use serde_json::Value;

/// Rows copied per chunk (one transaction on the target each).
const CHUNK: u32 = 5_000;
/// How many searches the verification compares.
const SAMPLE_SEARCHES: usize = 100;
/// How many hits of each sample search must agree.
const SAMPLE_HITS: u32 = 5;

#[derive(Debug, clap::Args)]
pub(crate) struct MigrateArgs {
    /// The solo daemon's database, `sqlite:PATH` (the `cairn.db` in its data directory).
    /// Stop that daemon first: what it writes after the copy starts is not copied.
    #[arg(long, value_name = "sqlite:PATH")]
    from: String,
    /// The PostgreSQL database to move it into, `postgres://…`; it must hold no Cairn data
    /// in the schema yet.
    #[arg(long, value_name = "postgres://…", hide_env_values = true)]
    to: String,
    /// The schema Cairn's tables go in (created when missing).
    #[arg(long, env = "SERVICE_DATABASE_SCHEMA", default_value = "public")]
    database_schema: String,
    /// PEM certificates to verify the database server's with [default: the system's].
    #[arg(long, env = "SERVICE_DATABASE_CA_FILE")]
    database_ca_file: Option<PathBuf>,
}

/// One side of a move: the same store seen as a store and as something to copy.
pub(crate) struct Side<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) transfer: &'a dyn Transfer,
}

/// A table's row count and checksum, as read back from one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableSum {
    pub(crate) name: &'static str,
    pub(crate) rows: u64,
    pub(crate) sha256: String,
}

pub(crate) async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let Some(path) = args.from.strip_prefix("sqlite:") else {
        bail!("--from takes `sqlite:PATH` (the solo daemon's cairn.db), not `{}`", args.from);
    };
    if !(args.to.starts_with("postgres://") || args.to.starts_with("postgresql://")) {
        bail!("--to takes a PostgreSQL URL, `postgres://user:password@host:port/database`");
    }
    let path = PathBuf::from(path);
    if !path.is_file() {
        bail!("{} is not a file; give the solo daemon's cairn.db", path.display());
    }
    // Held for the whole move: a daemon serving the file would write what is not copied.
    let _alone = cairn_store_sqlite::exclusive_lock(&path).context("nothing was moved")?;
    let source = cairn_store_sqlite::SqliteStore::open(&path)
        .with_context(|| format!("cannot open the database {}", path.display()))?;
    let options = cairn_store_postgres::PgOptions {
        schema: args.database_schema.clone(),
        ca_file: args.database_ca_file.clone(),
        listen: false,
        application_name: "cairn-migrate".to_owned(),
        ..cairn_store_postgres::PgOptions::new(&args.to)
    };
    let label = cairn_store_postgres::redact_url(&args.to);
    let target = cairn_store_postgres::PgStore::open(options)
        .await
        .with_context(|| format!("cannot open the database {label}"))?;
    let (source, target) = (Arc::new(source), Arc::new(target));
    eprintln!("moving {} to {label} (schema {})", path.display(), args.database_schema);
    let from = Side { store: source.as_ref(), transfer: source.as_ref() };
    let to = Side { store: target.as_ref(), transfer: target.as_ref() };
    let sums = migrate(&from, &to, true).await?;
    println!("{:<22} {:>10}  sha256", "table", "rows");
    for sum in &sums {
        println!("{:<22} {:>10}  {}  ok", sum.name, sum.rows, &sum.sha256[..12]);
    }
    println!("moved and verified; point the daemons at it with --database-url");
    Ok(())
}

/// Copies everything from `from` into `to` (which must be empty) and verifies the copy;
/// the per-table sums of the verified copy.
pub(crate) async fn migrate(
    from: &Side<'_>,
    to: &Side<'_>,
    show_progress: bool,
) -> anyhow::Result<Vec<TableSum>> {
    if !to.transfer.is_empty().await? {
        bail!(
            "the target already holds Cairn data; migrate into an empty database or schema \
             (nothing was changed)"
        );
    }
    let mut export = from.transfer.export().await?;
    for table in TABLES {
        let bar = progress_bar(show_progress, table.name);
        copy_table(export.as_mut(), to.transfer, table, CHUNK, &mut |rows| bar.inc(rows as u64))
            .await
            .with_context(|| format!("copying {}", table.name))?;
        bar.finish_and_clear();
    }
    drop(export);
    to.transfer.finish_import().await?;
    verify(from, to).await
}

fn progress_bar(show: bool, table: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg:<22} {pos} rows") {
        bar.set_style(style);
    }
    bar.set_message(table.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// The key columns of `row` of `table`, to continue after it.
fn key_of(table: &str, row: &[Value]) -> anyhow::Result<Vec<Value>> {
    let spec = cairn_store::transfer::table(table).context("an unknown table")?;
    spec.key_of(row).with_context(|| format!("table {table}: a row without its key"))
}

/// Every table of `export`: its row count and a SHA-256 chain over its rows (each as
/// compact JSON, in key order, one a line): per chunk, the hex SHA-256 of the previous
/// chunk's sum followed by the chunk's lines.
pub(crate) async fn sums(export: &mut dyn Export) -> anyhow::Result<Vec<TableSum>> {
    let mut sums = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let mut sum = String::new();
        let mut rows = 0;
        let mut after: Option<Vec<Value>> = None;
        loop {
            let page = export.rows(table.name, after.as_deref(), CHUNK).await?;
            let mut text = std::mem::take(&mut sum);
            for row in &page {
                text.push('\n');
                text.push_str(&serde_json::to_string(row)?);
            }
            sum = cairn_api::hash_key(&text);
            rows += page.len() as u64;
            match page.last() {
                Some(last) if page.len() == CHUNK as usize => {
                    after = Some(key_of(table.name, last)?)
                }
                _ => break,
            }
        }
        sums.push(TableSum { name: table.name, rows, sha256: sum });
    }
    Ok(sums)
}

/// Compares both sides: every table's rows (count and checksum), the live memory count,
/// each conversation's next offset against its events on the target, and the top hits of
/// sample searches.
async fn verify(from: &Side<'_>, to: &Side<'_>) -> anyhow::Result<Vec<TableSum>> {
    let source = sums(from.transfer.export().await?.as_mut()).await?;
    let target = sums(to.transfer.export().await?.as_mut()).await?;
    let mut wrong = Vec::new();
    for (a, b) in source.iter().zip(&target) {
        if a != b {
            wrong.push(format!(
                "{}: {} rows ({}) here, {} rows ({}) there",
                a.name,
                a.rows,
                &a.sha256[..12],
                b.rows,
                &b.sha256[..12]
            ));
        }
    }
    let (here, there) = (from.store.count_memories().await?, to.store.count_memories().await?);
    if here != there {
        wrong.push(format!("live memories: {here} here, {there} there"));
    }
    wrong.extend(offsets_match_events(to.transfer).await?);
    wrong.extend(searches_agree(from.store, to.store).await?);
    if !wrong.is_empty() {
        bail!(
            "the copy does not match (the target is left as it is; empty the schema before \
             trying again):\n  {}",
            wrong.join("\n  ")
        );
    }
    Ok(target)
}

/// Conversations whose stored next offset is not their number of events.
async fn offsets_match_events(store: &dyn Transfer) -> anyhow::Result<Vec<String>> {
    let mut export = store.export().await?;
    let mut events: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    let mut after: Option<Vec<Value>> = None;
    loop {
        let page = export.rows("runtime_events", after.as_deref(), CHUNK).await?;
        for row in &page {
            let id = row.first().and_then(Value::as_str).unwrap_or_default();
            *events.entry(id.to_owned()).or_default() += 1;
        }
        match page.last() {
            Some(last) if page.len() == CHUNK as usize => {
                after = Some(key_of("runtime_events", last)?)
            }
            _ => break,
        }
    }
    let spec = cairn_store::transfer::table("conversations").context("conversations")?;
    let at = spec.columns.iter().position(|column| *column == "next_offset");
    let at = at.context("conversations has a next_offset column")?;
    let mut wrong = Vec::new();
    let mut after: Option<Vec<Value>> = None;
    loop {
        let page = export.rows("conversations", after.as_deref(), CHUNK).await?;
        for row in &page {
            let id = row.first().and_then(Value::as_str).unwrap_or_default();
            let next = row.get(at).and_then(Value::as_u64).unwrap_or(u64::MAX);
            let count = events.get(id).copied().unwrap_or(0);
            if next != count {
                wrong.push(format!("conversation {id}: next offset {next}, {count} events"));
            }
        }
        match page.last() {
            Some(last) if page.len() == CHUNK as usize => {
                after = Some(key_of("conversations", last)?)
            }
            _ => break,
        }
    }
    Ok(wrong)
}

/// Searches for words of the newest memories on both sides; the top hits must be the same
/// memories (in any order: equal scores may be ordered differently).
async fn searches_agree(from: &dyn Store, to: &dyn Store) -> anyhow::Result<Vec<String>> {
    let page = from.list_memories(&MemoryFilter::default(), SAMPLE_SEARCHES as u32, 0).await?;
    let mut words: Vec<String> = Vec::new();
    for memory in &page.memories {
        let word = memory
            .content
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 4)
            .max_by_key(|word| word.len())
            .map(str::to_lowercase);
        if let Some(word) = word
            && !words.contains(&word)
        {
            words.push(word);
        }
    }
    let mut wrong = Vec::new();
    for word in words {
        let terms = [word.clone()];
        let filter = MemoryFilter::default();
        let ids = |hits: Vec<cairn_store::TextMatch>| -> Vec<String> {
            let mut ids: Vec<String> = hits.into_iter().map(|hit| hit.memory.id).collect();
            ids.sort();
            ids
        };
        let here = ids(from.search_memories(&terms, &filter, SAMPLE_HITS).await?);
        let there = ids(to.search_memories(&terms, &filter, SAMPLE_HITS).await?);
        if here != there {
            wrong.push(format!("search `{word}`: {here:?} here, {there:?} there"));
        }
    }
    Ok(wrong)
}

#[cfg(test)]
mod tests {
    use cairn_memory::Engine;
    use cairn_runtime::{CreateConversationInput, CustomEventInput, Runtime};
    use cairn_store::{ConversationStore, MemoryStore};
    use cairn_test_support::postgres::TestCluster;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_solo_daemons_data_moves_to_postgres_and_the_copy_is_verified() {
        let (cluster, url) = TestCluster::with_database();
        let dir = tempfile::tempdir().unwrap();
        let sqlite =
            Arc::new(cairn_store_sqlite::SqliteStore::open(&dir.path().join("cairn.db")).unwrap());
        let engine = Engine::new(sqlite.clone());
        let contents = ["deploys run from the release branch", "the staging cluster restarts"];
        let memories = contents.iter().map(|content| cairn_types::NewMemory {
            content: (*content).to_owned(),
            scope: cairn_types::Scope::User,
            repo: None,
            tags: vec!["ops".to_owned()],
            source: None,
            metadata: Default::default(),
        });
        let created = engine.create_memories(memories.collect(), "tester").await.unwrap();
        engine.archive_memory(&created[1].id, "tester").await.unwrap();
        let runtime = cairn_agents::DefaultRuntime::new(
            sqlite.clone(),
            Some(engine.clone()),
            cairn_agents::RuntimeConfig::default(),
        );
        let conversation =
            runtime.create_conversation(CreateConversationInput::default()).await.unwrap();
        for n in 0..3 {
            let event = CustomEventInput {
                conversation_id: conversation.id.clone(),
                event: "ping".to_owned(),
                payload: serde_json::json!({ "n": n }),
            };
            runtime.emit_custom_event(event).await.unwrap();
        }

        let args = |from: String| MigrateArgs {
            from,
            to: url.clone(),
            database_schema: "public".to_owned(),
            database_ca_file: None,
        };
        let file = dir.path().join("cairn.db").display().to_string();
        let refused = run(args(file.clone())).await.unwrap_err().to_string();
        assert!(refused.contains("sqlite:PATH"), "{refused}");
        run(args(format!("sqlite:{file}"))).await.unwrap();

        let options = cairn_store_postgres::PgOptions {
            listen: false,
            ..cairn_store_postgres::PgOptions::new(&url)
        };
        let postgres = Arc::new(cairn_store_postgres::PgStore::open(options).await.unwrap());
        let from = Side { store: sqlite.as_ref(), transfer: sqlite.as_ref() };
        let to = Side { store: postgres.as_ref(), transfer: postgres.as_ref() };
        let sums = verify(&from, &to).await.unwrap();
        let rows = |name: &str| sums.iter().find(|sum| sum.name == name).unwrap().rows;
        assert_eq!(rows("memories"), 2);
        assert_eq!(rows("runtime_events"), 4);
        assert_eq!(rows("conversations"), 1);
        assert_eq!(rows("audit_log"), 3, "two creations and an archive");
        assert_eq!(postgres.count_memories().await.unwrap(), 1, "the archived one stays archived");
        let events = postgres.list_events(&conversation.id, None, 10).await.unwrap();
        let offsets: Vec<u64> = events.iter().map(|event| event.offset).collect();
        assert_eq!(offsets, [0, 1, 2, 3]);
        let found = postgres
            .search_memories(&["release".to_owned()], &MemoryFilter::default(), 5)
            .await
            .unwrap();
        assert_eq!(found[0].memory.id, created[0].id);

        let again = migrate(&from, &to, false).await.unwrap_err().to_string();
        assert!(again.contains("already holds Cairn data"), "{again}");

        // A copy that differs is caught, and says where.
        let database = url.rsplit('/').next().unwrap();
        let id = &created[0].id;
        cluster
            .psql(database, &format!("UPDATE audit_log SET actor = 'x' WHERE memory_id = '{id}'"));
        let wrong = verify(&from, &to).await.unwrap_err().to_string();
        assert!(wrong.contains("audit_log:"), "{wrong}");
        assert!(!wrong.contains("memories:"), "{wrong}");
    }
}
