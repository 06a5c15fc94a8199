//! The `cairn` command: `cairn serve` runs the daemon; `cairn keys` manages API keys;
//! `cairn migrate` moves a solo daemon's data to PostgreSQL; the other subcommands are
//! clients of a running daemon (through `cairn-client`).

mod backup;
mod client;
mod connectors;
mod conversations;
mod hook;
mod install;
mod keys;
mod memories;
mod migrate;
mod model;
mod serve;
mod status;
mod voice;

use std::process::ExitCode;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cairn", version, about = "Memory service and conversation runtime for AI agents")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the daemon: the memory HTTP API and the conversation runtime.
    Serve(Box<serve::ServeArgs>),
    /// Creates, lists and revokes API keys (works while the daemon runs).
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Moves a solo daemon's SQLite data into a PostgreSQL database and verifies the copy.
    Migrate(migrate::MigrateArgs),
    /// Copies a SQLite daemon's database to a file, consistently, while it serves.
    Backup(backup::BackupArgs),
    /// Puts a copy `cairn backup` wrote into an empty data directory.
    Restore(backup::RestoreArgs),
    /// Installs the local models: embeddings, or with `--voice` speech recognition.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Adds, lists, syncs and removes connectors through the running daemon.
    #[command(subcommand)]
    Connectors(connectors::ConnectorsCommand),
    /// Stores, lists, shows, edits, archives and restores memories.
    #[command(subcommand)]
    Memories(memories::MemoriesCommand),
    /// Searches memories.
    Search(memories::SearchArgs),
    /// Prints the context pack for a task.
    Context(memories::ContextArgs),
    /// Prints the context for a task and the files it touches.
    CodingContext(memories::CodingContextArgs),
    /// Checks an action before running it: exit 0 when allowed, 2 when blocked.
    Guard(memories::GuardArgs),
    /// Records how a command went, so a failure warns the next time.
    Outcome(memories::OutcomeArgs),
    /// Records and reads patch evidence.
    #[command(subcommand)]
    Evidence(memories::EvidenceCommand),
    /// The review queue: memories awaiting a decision.
    #[command(subcommand)]
    Review(memories::ReviewCommand),
    /// Lists and resolves conflicting memories.
    #[command(subcommand)]
    Conflicts(memories::ConflictsCommand),
    /// Runs the dream cycle: merges near-duplicates, marks stale memories, finds conflicts.
    Dream(memories::DreamArgs),
    /// Lists, starts, shows and closes conversations.
    #[command(subcommand)]
    Conversations(conversations::ConversationsCommand),
    /// Talks with an agent in the terminal.
    Chat(conversations::ChatArgs),
    /// Agent hooks (Claude Code's format): guards before shell commands, outcomes after.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// The daemon this client reaches and its state, the credentials it sends, and the
    /// repository as seen from this folder.
    Status(status::StatusArgs),
    /// A Model Context Protocol server on stdio, with Cairn's memory tools.
    Mcp(McpArgs),
}

#[derive(Debug, clap::Args)]
struct McpArgs {
    #[command(flatten)]
    client: client::ClientArgs,
}

/// Where the database lives, shared by every subcommand that opens it.
#[derive(Debug, Clone, clap::Args)]
struct DataDirArg {
    /// The data directory [default: the user's data directory, e.g. ~/.local/share/cairn].
    #[arg(long, env = "SERVICE_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

impl DataDirArg {
    /// The data directory, created if missing, and the database path in it.
    fn database(&self) -> anyhow::Result<PathBuf> {
        let data_dir = match &self.data_dir {
            Some(dir) => dir.clone(),
            None => dirs::data_dir()
                .context("no data directory is known for this user; pass --data-dir")?
                .join("cairn"),
        };
        create_private_dir(&data_dir)?;
        Ok(data_dir.join("cairn.db"))
    }

    /// The data directory, created if missing.
    fn dir(&self) -> anyhow::Result<PathBuf> {
        let database = self.database()?;
        Ok(database.parent().map(std::path::Path::to_path_buf).unwrap_or(database))
    }
}

/// A PostgreSQL database shared by several daemons, instead of the SQLite file in the data
/// directory.
#[derive(Debug, Clone, clap::Args)]
struct DatabaseArgs {
    /// Keep everything in this PostgreSQL database instead of the data directory's SQLite
    /// file, e.g. `postgres://cairn:secret@db.internal:5432/cairn?sslmode=require`; several
    /// daemons may share it.
    #[arg(long, env = "SERVICE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The schema Cairn's tables live in (created when missing).
    #[arg(long, env = "SERVICE_DATABASE_SCHEMA", default_value = "public")]
    database_schema: String,
    /// Database connections for statements, per daemon.
    #[arg(long, env = "SERVICE_DATABASE_POOL_SIZE", default_value_t = 16)]
    database_pool_size: usize,
    /// Database connections for the session that holds shared locks (a conversation's
    /// step, a sync), per daemon: every lock is held through one session, so one is in use
    /// at a time; a second is taken only while a closed one is replaced.
    #[arg(long, env = "SERVICE_DATABASE_LOCK_CONNECTIONS", default_value_t = 2)]
    database_lock_connections: usize,
    /// PEM certificates to verify the database server's with [default: the system's].
    #[arg(long, env = "SERVICE_DATABASE_CA_FILE")]
    database_ca_file: Option<PathBuf>,
}

/// Where the data lives: the data directory (always: models, voice), and the database, a
/// SQLite file in it or a PostgreSQL server.
#[derive(Debug, Clone, clap::Args)]
struct StoreArgs {
    #[command(flatten)]
    data_dir: DataDirArg,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// An opened store and where it is.
struct OpenedStore {
    store: Arc<dyn cairn_store::Store>,
    /// Where the data is, for people: the SQLite file, or the URL without its password.
    label: String,
    /// The data directory (created if missing).
    data_dir: PathBuf,
    /// The options the daemon would give `cairn keys` to reach the same data.
    location_flags: String,
}

impl StoreArgs {
    /// Opens the PostgreSQL database when a URL is given (running its migrations, and
    /// listening to other daemons when `listen`), else the data directory's SQLite file.
    async fn open_store(&self, listen: bool) -> anyhow::Result<OpenedStore> {
        let data_dir = self.data_dir.dir()?;
        let Some(url) = &self.database.database_url else {
            let database = data_dir.join("cairn.db");
            let store = cairn_store_sqlite::SqliteStore::open(&database)
                .with_context(|| format!("cannot open the database {}", database.display()))?;
            return Ok(OpenedStore {
                store: Arc::new(store),
                label: database.display().to_string(),
                location_flags: format!("--data-dir {}", data_dir.display()),
                data_dir,
            });
        };
        let options = self.pg_options(url, listen);
        let label = cairn_store_postgres::redact_url(url);
        let store = cairn_store_postgres::PgStore::open(options)
            .await
            .with_context(|| format!("cannot open the database {label}"))?;
        let mut location_flags = "--database-url …".to_owned();
        if self.database.database_schema != "public" {
            location_flags
                .push_str(&format!(" --database-schema {}", self.database.database_schema));
        }
        Ok(OpenedStore { store: Arc::new(store), label, data_dir, location_flags })
    }

    fn pg_options(&self, url: &str, listen: bool) -> cairn_store_postgres::PgOptions {
        cairn_store_postgres::PgOptions {
            schema: self.database.database_schema.clone(),
            pool_size: self.database.database_pool_size.max(1),
            lock_connections: self.database.database_lock_connections.max(1),
            ca_file: self.database.database_ca_file.clone(),
            listen,
            ..cairn_store_postgres::PgOptions::new(url)
        }
    }
}

/// Creates `dir` (and its parents) readable by its owner alone (0700), whatever the umask,
/// and narrows it to that if it exists already.
pub(crate) fn create_private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        builder.mode(0o700);
        builder
            .create(dir)
            .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict the data directory {}", dir.display()))?;
    }
    #[cfg(not(unix))]
    builder
        .create(dir)
        .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve(_)) {
        return_large_blocks();
    }
    if !matches!(cli.command, Command::Serve(_)) {
        // `cairn conflicts list | head -1`: a closed pipe ends a client quietly, as it ends
        // any Unix tool, instead of a panic on the next print. (Sockets are written with
        // MSG_NOSIGNAL, so this reaches pipes only; the daemon keeps ignoring SIGPIPE.)
        sigpipe::reset();
    }
    // The daemon says what it does; a client command speaks only when something is wrong.
    let quiet = !matches!(
        cli.command,
        Command::Serve(_)
            | Command::Keys(_)
            | Command::Model(_)
            | Command::Migrate(_)
            | Command::Backup(_)
            | Command::Restore(_)
    );
    let level = if quiet { "warn" } else { "info" };
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    // Never statements' parameters, whatever RUST_LOG asks: tokio-postgres logs them (memory
    // text included) at debug, where `/api/erase` could never reach them.
    let filter = filter.add_directive("tokio_postgres=info".parse().expect("a valid directive"));
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if matches!(&cli.command, Command::Serve(args) if args.log_json()) {
        subscriber.json().with_current_span(true).with_span_list(false).init();
    } else {
        subscriber.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return client::report(&error.into()),
    };
    let done = |result: anyhow::Result<()>| result.map(|()| ExitCode::SUCCESS);
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => done(serve::run(*args).await),
            Command::Keys(command) => done(keys::run(command).await),
            Command::Migrate(args) => done(migrate::run(args).await),
            Command::Backup(args) => done(backup::backup(&args)),
            Command::Restore(args) => done(backup::restore(&args)),
            Command::Connectors(command) => done(connectors::run(command).await),
            Command::Model(command) => done(model::run(command).await),
            Command::Memories(command) => memories::memories(command).await,
            Command::Search(args) => memories::search(args).await,
            Command::Context(args) => memories::context(args).await,
            Command::CodingContext(args) => memories::coding_context(args).await,
            Command::Guard(args) => memories::guard(args).await,
            Command::Outcome(args) => memories::outcome(args).await,
            Command::Evidence(command) => memories::evidence(command).await,
            Command::Review(command) => memories::review(command).await,
            Command::Conflicts(command) => memories::conflicts(command).await,
            Command::Dream(args) => memories::dream(args).await,
            Command::Conversations(command) => conversations::conversations(command).await,
            Command::Chat(args) => conversations::chat(args).await,
            Command::Hook(command) => hook::run(command).await,
            Command::Status(args) => status::status(args).await,
            Command::Mcp(args) => {
                let client = args.client.connect_with(std::time::Duration::from_secs(600))?;
                cairn_mcp::serve_stdio(client).await.map_err(|error| anyhow::anyhow!(error))?;
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    outcome.unwrap_or_else(|error| client::report(&error))
}

/// Keeps glibc from holding on to large freed blocks. It raises its mmap threshold (up to
/// 32 MiB) each time a mapped block is freed, after which a 16 MiB request body or answer
/// comes from the heap and stays in the process once freed: 16 concurrent 16 MiB batches
/// peaked at 356–400 MB (debug build), against 270–300 MB with the threshold held at
/// 256 KiB, where such blocks are mapped and given back when freed. Called before any
/// thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn return_large_blocks() {
    // SAFETY: `mallopt` only sets an allocator parameter; nothing else is running yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_blocks() {}
