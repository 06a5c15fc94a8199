//! `cairn backup --to FILE` and `cairn restore --from FILE`: a running SQLite daemon's
//! database copied consistently while it serves writes, and a copy put into an empty data
//! directory. (A PostgreSQL database is backed up with PostgreSQL's own tools: deploy.md.)

use std::path::PathBuf;

use anyhow::Context as _;

use crate::DataDirArg;

#[derive(Debug, clap::Args)]
pub(crate) struct BackupArgs {
    /// The file to write the copy to (replaced when it exists; written beside it first, so
    /// it is never half a copy).
    #[arg(long, value_name = "FILE")]
    to: PathBuf,
    #[command(flatten)]
    data_dir: DataDirArg,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RestoreArgs {
    /// A copy `cairn backup` wrote.
    #[arg(long, value_name = "FILE")]
    from: PathBuf,
    #[command(flatten)]
    data_dir: DataDirArg,
}

pub(crate) fn backup(args: &BackupArgs) -> anyhow::Result<()> {
    let database = args.data_dir.database()?;
    let started = std::time::Instant::now();
    cairn_store_sqlite::backup_database(&database, &args.to)
        .with_context(|| format!("cannot back up {}", database.display()))?;
    let bytes = std::fs::metadata(&args.to).map(|meta| meta.len()).unwrap_or(0);
    println!(
        "backed up {} to {} ({bytes} bytes, {:.1} s)",
        database.display(),
        args.to.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub(crate) fn restore(args: &RestoreArgs) -> anyhow::Result<()> {
    let database = args.data_dir.database()?;
    cairn_store_sqlite::restore_database(&args.from, &database)
        .with_context(|| format!("cannot restore {}", args.from.display()))?;
    println!(
        "restored {} into {}; start the daemon with --data-dir {}",
        args.from.display(),
        database.display(),
        database.parent().unwrap_or(&database).display()
    );
    Ok(())
}
