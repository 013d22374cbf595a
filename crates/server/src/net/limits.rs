//! The network's bounds, per connection unless said (the front door's docs walk them).

/// Buffers in the shared receive pool.
pub const RECV_BUFFERS: u16 = 64;
/// Bytes of one receive buffer.
pub const RECV_BUFFER_BYTES: usize = 4096;
/// Query bytes received and not yet parsed, per connection (a request larger than this
/// cannot arrive: values are bounded by the store far below it).
pub const MAX_QUERY_BYTES: usize = 64 << 20;
/// Parsed requests waiting for their connection's job (parsing pauses there).
pub const MAX_PENDING_REQUESTS: usize = 4096;
/// Argument bytes of the parsed requests waiting per connection past which parsing waits
/// (one request alone may be larger: it is bounded by [`MAX_QUERY_BYTES`]).
pub const MAX_PENDING_BYTES: usize = 4 << 20;
/// Unparsed bytes past which a connection's receiving pauses while its parsing waits for
/// pending requests to drain.
pub const QUERY_HIGH_BYTES: usize = 4 << 20;
/// Requests one job runs.
pub const BATCH_REQUESTS: usize = 64;
/// Reply bytes not yet sent, per connection.
pub const MAX_REPLY_BYTES: usize = 256 << 20;
/// Completions one poll handles (the rest wait for the next pass).
pub const MAX_COMPLETIONS_PER_POLL: usize = 256;
