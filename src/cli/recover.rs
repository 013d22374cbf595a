//! `tamer recover`: opens a store (recovering it), checkpoints and closes it.

use std::process::ExitCode;

use super::store::{missing_file, store_options, StoreArgs};

/// `tamer recover PATH...`.
pub fn run(store: &StoreArgs) -> ExitCode {
    let paths = &store.paths;
    if let Some(missing) = missing_file(paths) {
        eprintln!("error: {}: no such store file", missing.display());
        return ExitCode::from(2);
    }
    let path = &paths[0];
    // A file holding no store yet would be made one by a read-write open: refuse it first.
    let probe = store_options(store).read_only(true);
    match tamer_store::Db::open(path, probe) {
        Ok(db) => drop(db.close()),
        Err(err) => {
            eprintln!("error: {}: {err}", path.display());
            return ExitCode::from(2);
        }
    }
    let bar = std::sync::Arc::new(tamer_bench::progress::RecoveryBar::default());
    let on_progress = bar.clone();
    let options = store_options(store).on_recovery_progress(move |p| on_progress.on_progress(p));
    let opened = tamer_store::Db::open(path, options);
    bar.finish();
    let db = match opened {
        Ok(db) => db,
        Err(err) => {
            eprintln!("error: recovering {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    let stats = db.recovery_stats();
    println!(
        "{}: recovery redid {} of {} commit records ({} deltas, {} staging queue pages read) \
         in {} ms; {} keys",
        path.display(),
        stats.records_redone,
        stats.records_found,
        stats.deltas_redone,
        stats.queue_pages_read,
        stats.ns / 1_000_000,
        db.len()
    );
    if let Err(err) = db.close() {
        eprintln!("error: closing {}: {err}", path.display());
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}
