//! The network core, on the runtime's own cores (NeBuLa): one io_uring for every connection
//! (multishot accept, multishot receive into one shared pool of provided buffers, sends of
//! whole reply batches) that every core polls on every scheduling pass
//! ([`tamer_runtime::Poller`]). The core that reaps a receive parses it, decides admission and
//! puts the connection's batch on the shared queue as one job; the core that runs the job
//! pushes its replies' send on the ring itself, and its next pass submits it: no thread hop
//! besides the shared queue. A core with nothing to do blocks in the ring (at most one; the
//! others park), so a packet wakes it.
//!
//! Bounds (per connection unless said): a request larger than [`MAX_QUERY_BYTES`] gets an
//! error and closes its connection (Redis's `client-query-buffer-limit`); parsing stops at
//! [`MAX_PENDING_REQUESTS`] parsed requests waiting for their job and receiving stops past
//! [`QUERY_HIGH_BYTES`] unparsed bytes while parsing waits (resumed once it goes on; one
//! large request alone never pauses it), so a client that
//! pipelines faster than it is served is slowed by TCP, not refused; one job in flight, of at
//! most [`BATCH_REQUESTS`] requests; unsent reply bytes [`MAX_REPLY_BYTES`]
//! (past it the connection is closed, as Redis's `client-output-buffer-limit`); connections
//! [`ServerOptions::max_clients`]; completions handled per poll [`MAX_COMPLETIONS_PER_POLL`].
//! The receive pool is shared: [`RECV_BUFFERS`] buffers of
//! [`RECV_BUFFER_BYTES`] (256 KiB in all, to stay in the L2 cache) in a registered
//! provided-buffer ring; a received buffer is copied into its connection's query bytes and
//! handed back at once by one ring entry and a tail store (no submission, no syscall). In the
//! steady state a poll that pushed entries (sends, re-arms) submits them with one
//! `io_uring_enter`, and a poll with nothing new makes no syscall.
//!
//! The files: `server` starts and stops the [`Server`] (its [`ServerOptions`] in `options`,
//! the bounds above in `limits`); `network` holds the state the others share (the poller,
//! the network behind its lock, a connection, a finished job); `poller` is what the runtime's
//! cores call; `ring` sets up the ring and its receive buffers and hands a poll's completions
//! on; `connections` accepts, receives, sends and closes; `requests` takes a connection's
//! requests from parsing and [`admission`] to their job's result; `jobs` is what a job runs
//! (with [`prefetch`]); `mail` sends pub/sub's messages.

pub mod admission;
mod connections;
mod jobs;
mod limits;
mod mail;
mod network;
mod options;
mod poller;
pub mod prefetch;
mod requests;
mod ring;
mod server;

pub use limits::{
    BATCH_REQUESTS, MAX_COMPLETIONS_PER_POLL, MAX_PENDING_BYTES, MAX_PENDING_REQUESTS,
    MAX_QUERY_BYTES, MAX_REPLY_BYTES, QUERY_HIGH_BYTES, RECV_BUFFERS, RECV_BUFFER_BYTES,
};
pub use options::{Dispatch, ServerOptions};
pub use server::Server;
