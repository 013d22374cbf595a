//! The store `tamer check` and `tamer recover` open: its flags and the options they give.

use std::path::PathBuf;

use clap::Args;

/// The store `tamer check` and `tamer recover` open.
#[derive(Args)]
pub struct StoreArgs {
    /// The store file; several for a store striped over them, in the order it was created
    /// with.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Pages per stripe unit of a striped store.
    #[arg(long, default_value_t = tamer_device::STRIPE_UNIT_BLOCKS)]
    pub stripe_unit: u64,
    /// MiB of cache to open it with (at least the directory's size).
    #[arg(long, default_value_t = 64)]
    pub cache_mib: u64,
}

/// The options `tamer check` and `tamer recover` open `paths` with (one file, or a stripe).
pub fn store_options(store: &StoreArgs) -> tamer_store::DbOptions {
    let StoreArgs {
        paths,
        stripe_unit,
        cache_mib,
    } = store;
    let mut options = tamer_store::DbOptions::new((*cache_mib).max(1) << 20)
        .cleaner(false)
        .warm_index(false)
        .cores(1);
    if paths.len() > 1 {
        options = options.device(tamer_store::DeviceKind::Striped {
            parts: paths
                .iter()
                .map(|p| tamer_store::StripePart {
                    path: p.clone(),
                    device: tamer_store::DeviceKind::Uring,
                })
                .collect(),
            unit_blocks: *stripe_unit,
        });
    }
    options
}

/// The first of `paths` that is not a file, if any.
pub fn missing_file(paths: &[PathBuf]) -> Option<&PathBuf> {
    paths.iter().find(|p| !p.is_file())
}
