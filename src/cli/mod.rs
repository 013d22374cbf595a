//! The subcommands, one module each: its flags (clap's `Args`) and its `run`.

pub mod bench;
pub mod check;
pub mod crash;
pub mod load;
pub mod recover;
pub mod serve;
pub mod store;
