//! `tamer check`: verifies a store's every checksum and structure, read-only.

use std::process::ExitCode;

use super::store::{missing_file, store_options, StoreArgs};

/// `tamer check PATH...`.
pub fn run(store: &StoreArgs) -> ExitCode {
    let paths = &store.paths;
    if let Some(missing) = missing_file(paths) {
        eprintln!("error: {}: no such store file", missing.display());
        return ExitCode::from(2);
    }
    let path = &paths[0];
    let options = store_options(store).read_only(true);
    let db = match tamer_store::Db::open(path, options) {
        Ok(db) => db,
        Err(err) => {
            eprintln!("error: opening {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    let report = match db.check() {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: checking {}: {err}", path.display());
            return ExitCode::from(2);
        }
    };
    println!(
        "{}: {} keys, {} records verified, {} buckets, {} data pages, {} extent pages, {} \
         directory segment pages, {} free pages, {} leaked pages",
        path.display(),
        report.keys,
        report.records,
        report.buckets,
        report.data_pages,
        report.extent_pages,
        report.directory_pages,
        report.free_pages,
        report.leaked_pages
    );
    if report.is_clean() {
        println!("ok: no problems");
        return ExitCode::SUCCESS;
    }
    for problem in &report.problems {
        println!("page {}: {}", problem.page, problem.what);
    }
    if report.problems_total > report.problems.len() as u64 {
        println!(
            "... and {} more",
            report.problems_total - report.problems.len() as u64
        );
    }
    println!("DAMAGED: {} problems", report.problems_total);
    ExitCode::from(1)
}
