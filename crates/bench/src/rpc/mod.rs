//! `tamer bench rpc`: issue 10's server figures (seed 004).

pub mod servers;
