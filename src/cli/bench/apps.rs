//! `tamer bench apps`: issue 24's application figures, tamer serve vs redis-server.

use std::process::ExitCode;

use clap::Args;

use super::Common;

/// `tamer bench apps`'s flags.
#[derive(Args)]
pub struct AppsArgs {
    #[command(flatten)]
    common: Common,
    /// Interleaved rounds (default 5; quick 3).
    #[arg(long)]
    rounds: Option<usize>,
    /// Run only these figures (evalsha, publish_fanout, tracking_get, acl; default all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// Runs the bench with these flags.
pub fn run(args: AppsArgs) -> ExitCode {
    let AppsArgs {
        common,
        rounds,
        only,
    } = args;
    let options = common.options();
    let mut plan = tamer_bench::apps::Plan::new(options.quick);
    if let Some(rounds) = rounds {
        plan.rounds = rounds.max(1);
    }
    plan.only = only;
    let result = tamer_bench::apps::run(&options, plan);
    super::finish(&options, result)
}
