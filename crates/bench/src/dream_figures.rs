//! The report's figures of the dream cycle, and of reads alongside it and a connector sync.

use std::sync::Arc;
use std::time::Duration;

use crate::corpus::{Corpus, Rng};
use crate::options::Options;
use crate::report::Report;
use crate::stats::{count, duration, megabytes, seconds};
use crate::{BUSY_READS, DREAM_MEMORY_CAP, DREAM_TIMEOUT, IDLE_READS, SYNC_FILES};
use crate::{daemon, dream};

/// The dream cycle on corpora where half the memories contradict each other: its time and
/// the daemon's peak memory, as a dry run and for real, and the latency of two reads with
/// nothing else running, alongside a dream cycle and (on the largest corpus) alongside a
/// connector sync. Each size has two copies of its database, so both real cycles start from
/// the same memories.
pub(crate) async fn dream_figures(
    options: &Options,
    report: &mut Report,
    corpus: &Corpus,
) -> anyhow::Result<()> {
    let (binary, _) = daemon::binary(false)?;
    let scale = |value: Duration, quick: u32| if options.quick { value / quick } else { value };
    let plan = dream::Plan {
        sizes: options.dream_sizes.clone(),
        timeout: scale(DREAM_TIMEOUT, 10),
        memory_cap: DREAM_MEMORY_CAP,
        idle_reads: scale(IDLE_READS, 3),
        busy_reads: scale(BUSY_READS, 3),
        sync_files: if options.quick { SYNC_FILES / 10 } else { SYNC_FILES },
    };
    let largest = *plan.sizes.last().expect("at least one size");
    for &size in &plan.sizes {
        let n = count(size as f64);
        let dir = tempfile::Builder::new().prefix("cairn-bench-dream-").tempdir()?;
        let copy = tempfile::Builder::new().prefix("cairn-bench-dream-").tempdir()?;
        eprintln!("[dream {n}] seeding…");
        let mut rng = Rng::new(options.seed ^ 0xD4EA ^ size as u64);
        let seeded = dream::seed(&dir.path().join("cairn.db"), corpus, &mut rng, size).await?;
        dream::copy_database(dir.path(), copy.path())?;
        report.info(
            format!("dream corpus, {n}"),
            format!(
                "{} contradicting, {} near-duplicates",
                count(seeded.contradicting as f64),
                count(seeded.duplicates as f64)
            ),
        );
        let ids = Arc::new(seeded.ids);

        let log = dir.path().join("daemon.log");
        let mut daemon = daemon::Daemon::start(&binary, dir.path(), &log).await?;
        eprintln!("[dream {n}] reads, nothing else running…");
        let idle = dream::idle_reads(daemon.address, &ids, plan.idle_reads).await?;
        eprintln!("[dream {n}] dream cycle, dry run…");
        let dry = dream::dream_cycle(&mut daemon, true, plan.timeout, plan.memory_cap).await?;
        cycle_rows(report, "dream cycle (dry run)", &n, &dry);
        if matches!(dry.outcome, dream::Outcome::Answered(_)) {
            eprintln!("[dream {n}] dream cycle…");
            let real =
                dream::dream_cycle(&mut daemon, false, plan.timeout, plan.memory_cap).await?;
            cycle_rows(report, "dream cycle", &n, &real);
        } else {
            report.info(format!("dream cycle, {n}"), "not run: the dry run did not end".into());
        }
        daemon.stop()?;

        let log = copy.path().join("daemon.log");
        let mut daemon = daemon::Daemon::start(&binary, copy.path(), &log).await?;
        eprintln!("[dream {n}] reads alongside a dream cycle…");
        let (cycle, during_dream) =
            dream::dream_with_reads(&mut daemon, &ids, plan.busy_reads, plan.memory_cap).await?;
        cycle_rows(report, "dream cycle with reads alongside", &n, &cycle);
        let mut during_sync = None;
        if size == largest {
            let folder = tempfile::Builder::new().prefix("cairn-bench-folder-").tempdir()?;
            dream::write_folder(folder.path(), plan.sync_files, corpus, &mut rng)?;
            eprintln!("[dream {n}] reads alongside a sync of {} files…", plan.sync_files);
            let (sync, reads) =
                dream::sync_with_reads(&mut daemon, &ids, folder.path(), plan.sync_files, &plan)
                    .await?;
            let files = count(plan.sync_files as f64);
            let measured = match &sync.outcome {
                dream::Outcome::Answered(synced) => format!(
                    "{} ({} memories from {} files)",
                    seconds(sync.elapsed),
                    count(synced.imported as f64),
                    count(synced.files as f64)
                ),
                other => stopped(other, sync.elapsed),
            };
            report.info(format!("connector sync, {files} files, into {n}"), measured);
            during_sync = Some(reads);
        }
        daemon.stop()?;

        let reads = |reads: &dream::Reads, list: bool| {
            let lat = if list { &reads.list } else { &reads.by_id };
            format!("{} / {} ({} reads)", duration(lat.p50()), duration(lat.p99()), lat.len())
        };
        for (name, list) in
            [("GET /api/memories/{id}", false), ("GET /api/memories?limit=20", true)]
        {
            report.info(format!("{name} p50 / p99, idle, {n}"), reads(&idle, list));
            report.info(format!("  during a dream cycle, {n}"), reads(&during_dream, list));
            if let Some(during_sync) = &during_sync {
                report.info(format!("  during a connector sync, {n}"), reads(during_sync, list));
            }
        }
        let failures = idle.failures
            + during_dream.failures
            + during_sync.as_ref().map_or(0, |reads| reads.failures);
        if failures > 0 {
            report.note(format!("{failures} reads failed at {n} memories"));
        }
    }
    report.notes.push(format!(
        "Dream cycle: `POST /api/dream-cycle` on a corpus where {} % of the memories are \"Use \
         pnpm in this repo.\" or \"Use npm in this repo.\" (half each, four repositories, each \
         made unique by a path and a ticket number), 5 % repeat an ordinary memory with two \
         words added, the rest are the ordinary corpus. Peak RSS is the daemon's VmHWM over the \
         request (reset before it). A cycle running over {} s, or past {} of RSS, is stopped and \
         the daemon killed. Reads: `GET /api/memories/{{id}}` and `GET /api/memories?limit=20` \
         in turn on one connection, 2 ms apart; alongside a dream cycle (not a dry run, on a \
         copy of the same database) for at most {} s, and alongside the sync of a folder of \
         Markdown files of three sections each.",
        50,
        plan.timeout.as_secs(),
        megabytes(plan.memory_cap),
        plan.busy_reads.as_secs(),
    ));
    Ok(())
}

/// The rows of one timed dream cycle: its time (or why it was stopped), its peak memory, and
/// what it found.
pub(crate) fn cycle_rows(
    report: &mut Report,
    name: &str,
    n: &str,
    timed: &dream::Timed<dream::DreamCounts>,
) {
    let measured = match &timed.outcome {
        dream::Outcome::Answered(_) => seconds(timed.elapsed),
        other => stopped(other, timed.elapsed),
    };
    report.info(format!("{name}, {n}"), measured);
    if let Some(peak) = timed.peak {
        let over = if timed.peak_reset { "" } else { " (over the daemon's life)" };
        report.info(format!("  {name} peak RSS{over}, {n}"), megabytes(peak));
    }
    if let dream::Outcome::Answered(found) = &timed.outcome {
        report.info(
            format!("  {name} found, {n}"),
            format!(
                "{} examined, {} merged in {} groups, {} conflicts naming {} memories, {} stale, \
                 {} answer",
                count(found.examined as f64),
                count(found.merged as f64),
                count(found.merge_groups as f64),
                count(found.conflicts as f64),
                count(found.in_conflict as f64),
                count(found.staled as f64),
                megabytes(found.response_bytes as u64)
            ),
        );
    }
}

/// Why a timed request was stopped.
pub(crate) fn stopped<T>(outcome: &dream::Outcome<T>, elapsed: Duration) -> String {
    match outcome {
        dream::Outcome::TimedOut(after) => format!("timed out after {:.0} s", after.as_secs_f64()),
        dream::Outcome::OverMemory(rss) => {
            format!("stopped at {} RSS after {:.0} s", megabytes(*rss), elapsed.as_secs_f64())
        }
        dream::Outcome::Answered(_) => seconds(elapsed),
    }
}
