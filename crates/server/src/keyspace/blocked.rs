//! The table of blocked clients (`BLPOP` and the other blocking pops waiting for data).
//!
//! A blocked client holds no thread: its connection waits in this table (one entry per
//! connection, so the table is bounded by `maxclients`), queued behind the clients blocked
//! before it on each of its keys. A write to a key (`Watches::touch`, made under the key's
//! lock before the writer commits) makes the first client in that key's line *ready*; the
//! network then runs its command again (the attempt waits for the writer's commit through the
//! key's lock). Served, it leaves every line and the next client of each of its keys becomes
//! ready in turn (the key may hold more); found nothing, it waits again at the head of its
//! lines. So blocked clients of a key are served in the order they blocked, as Redis serves
//! them (a client that does not block may still take an element first: it is not queued).
//! A write while the first client is trying again marks it, so its empty attempt tries once
//! more instead of missing that write.
//!
//! The rules are pure functions of the table's state, tested one by one below; the network
//! calls [`BlockTable::take_ready`] and [`BlockTable::take_expired`] at every poll.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A blocked client: its connection's index and generation.
pub type ClientKey = (usize, u32);

/// Where a blocked client is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// In its lines, waiting for a write.
    Waiting,
    /// First in a line whose key was written: to run again.
    Ready,
    /// Running again; `dirty` when its key was written meanwhile.
    Retrying { dirty: bool },
}

#[derive(Debug)]
struct Waiter {
    keys: Vec<Vec<u8>>,
    /// Held back by `CLIENT PAUSE` (no keys): only the pause's end or `CLIENT UNPAUSE`
    /// releases it, never `CLIENT UNBLOCK`.
    postponed: bool,
    /// On the `now_ns` clock; `None`: for ever.
    deadline_ns: Option<u64>,
    state: State,
}

#[derive(Debug, Default)]
struct Inner {
    lines: HashMap<Vec<u8>, VecDeque<ClientKey>>,
    waiters: HashMap<ClientKey, Waiter>,
    deadlines: BTreeSet<(u64, ClientKey)>,
    ready: Vec<ClientKey>,
    /// Clients `CLIENT UNBLOCK` took out: with the error (`true`) or their timeout reply.
    unblocked: Vec<(ClientKey, bool)>,
}

/// What tells the network a client became ready (a core may be waiting in its ring).
pub type Waker = Box<dyn Fn() + Send + Sync>;

/// The blocked clients (see the module docs).
#[derive(Default)]
pub struct BlockTable {
    inner: Mutex<Inner>,
    /// Blocked clients, readable without the lock (a write checks it first).
    blocked: AtomicUsize,
    /// Some client became ready since the network last looked.
    has_ready: AtomicBool,
    /// `CLIENT UNBLOCK` took some client out since the network last looked.
    has_unblocked: AtomicBool,
    /// Set by the network once it runs.
    waker: std::sync::OnceLock<Waker>,
}

impl std::fmt::Debug for BlockTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockTable")
            .field("blocked", &self.len())
            .finish()
    }
}

impl BlockTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocked clients now.
    pub fn len(&self) -> usize {
        self.blocked.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Blocks `client` on `keys` (store keys as `Watches` names them) until `deadline_ns`.
    pub fn block(&self, client: ClientKey, keys: Vec<Vec<u8>>, deadline_ns: Option<u64>) {
        self.insert(client, keys, deadline_ns, false);
    }

    /// Holds `client` back for `CLIENT PAUSE` until `deadline_ns` (the pause's end) or
    /// [`Self::release_postponed`].
    pub fn postpone(&self, client: ClientKey, deadline_ns: u64) {
        self.insert(client, Vec::new(), Some(deadline_ns), true);
    }

    fn insert(
        &self,
        client: ClientKey,
        keys: Vec<Vec<u8>>,
        deadline_ns: Option<u64>,
        postponed: bool,
    ) {
        let mut t = self.lock();
        assert!(
            !t.waiters.contains_key(&client),
            "a client blocks once at a time"
        );
        for k in &keys {
            t.lines.entry(k.clone()).or_default().push_back(client);
        }
        if let Some(d) = deadline_ns {
            t.deadlines.insert((d, client));
        }
        t.waiters.insert(
            client,
            Waiter {
                keys,
                postponed,
                deadline_ns,
                state: State::Waiting,
            },
        );
        self.blocked.store(t.waiters.len(), Ordering::Release);
    }

    /// `CLIENT UNBLOCK`: takes out the waiting client whose connection id is `id` (its
    /// generation), to get Redis's error (`error`) or its timeout reply; whether it was
    /// waiting. A client already made ready by a write is served by its retry instead.
    pub fn unblock(&self, id: u32, error: bool) -> bool {
        let mut t = self.lock();
        let found = t
            .waiters
            .iter()
            .find(|(k, w)| k.1 == id && w.state == State::Waiting && !w.postponed)
            .map(|(k, _)| *k);
        let Some(client) = found else {
            return false;
        };
        Self::remove_locked(&mut t, client);
        t.unblocked.push((client, error));
        self.blocked.store(t.waiters.len(), Ordering::Release);
        self.has_unblocked.store(true, Ordering::Release);
        drop(t);
        if let Some(wake) = self.waker.get() {
            wake();
        }
        true
    }

    /// `CLIENT UNPAUSE`: every postponed client leaves the table, to run its requests again
    /// (as after its timeout: no reply of its own); how many.
    pub fn release_postponed(&self) -> usize {
        let mut t = self.lock();
        let postponed: Vec<ClientKey> = t
            .waiters
            .iter()
            .filter(|(_, w)| w.postponed)
            .map(|(k, _)| *k)
            .collect();
        for &client in &postponed {
            Self::remove_locked(&mut t, client);
            t.unblocked.push((client, false));
        }
        self.blocked.store(t.waiters.len(), Ordering::Release);
        if postponed.is_empty() {
            return 0;
        }
        self.has_unblocked.store(true, Ordering::Release);
        drop(t);
        if let Some(wake) = self.waker.get() {
            wake();
        }
        postponed.len()
    }

    /// Some client was unblocked by `CLIENT UNBLOCK` since the last [`Self::take_unblocked`].
    pub fn has_unblocked(&self) -> bool {
        self.has_unblocked.load(Ordering::Acquire)
    }

    /// The clients `CLIENT UNBLOCK` took out, with whether they get the error.
    pub fn take_unblocked(&self) -> Vec<(ClientKey, bool)> {
        if !self.has_unblocked.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.lock().unblocked)
    }

    /// Sets what tells the network that a client became ready (once).
    pub fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }

    /// A write to `key` (see the module docs). One atomic load while nobody is blocked.
    pub fn touched(&self, key: &[u8]) {
        if self.blocked.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut t = self.lock();
        let Some(&head) = t.lines.get(key).and_then(VecDeque::front) else {
            return;
        };
        if Self::wake(&mut t, head) {
            self.has_ready.store(true, Ordering::Release);
            drop(t);
            if let Some(wake) = self.waker.get() {
                wake();
            }
        }
    }

    /// Makes `client` ready, or marks its retry dirty; true when it became ready.
    fn wake(t: &mut Inner, client: ClientKey) -> bool {
        let Some(w) = t.waiters.get_mut(&client) else {
            return false;
        };
        match w.state {
            State::Waiting => {
                w.state = State::Ready;
                t.ready.push(client);
                true
            }
            State::Retrying { .. } => {
                w.state = State::Retrying { dirty: true };
                false
            }
            State::Ready => false,
        }
    }

    /// The clients to run again (each now retrying).
    pub fn take_ready(&self) -> Vec<ClientKey> {
        if !self.has_ready.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        let mut t = self.lock();
        let ready = std::mem::take(&mut t.ready);
        for c in &ready {
            if let Some(w) = t.waiters.get_mut(c) {
                w.state = State::Retrying { dirty: false };
            }
        }
        ready
    }

    /// A retry ended: served (it leaves the table, and the next client in each of its lines
    /// becomes ready), or not (it waits again; at once ready if its key was written while it
    /// ran).
    pub fn retried(&self, client: ClientKey, served: bool) {
        let mut t = self.lock();
        let Some(w) = t.waiters.get_mut(&client) else {
            return;
        };
        let dirty = matches!(w.state, State::Retrying { dirty: true });
        if !served {
            w.state = State::Waiting;
            if dirty && Self::wake(&mut t, client) {
                self.has_ready.store(true, Ordering::Release);
            }
            return;
        }
        let keys = Self::remove_locked(&mut t, client);
        for k in keys {
            if let Some(&next) = t.lines.get(&k).and_then(VecDeque::front) {
                if Self::wake(&mut t, next) {
                    self.has_ready.store(true, Ordering::Release);
                }
            }
        }
        self.blocked.store(t.waiters.len(), Ordering::Release);
    }

    /// The waiting clients whose deadline passed at `now_ns` (they leave the table).
    pub fn take_expired(&self, now_ns: u64) -> Vec<ClientKey> {
        let mut t = self.lock();
        let due: Vec<ClientKey> = t
            .deadlines
            .range(..(now_ns, (usize::MAX, u32::MAX)))
            .map(|&(_, c)| c)
            .filter(|c| t.waiters.get(c).is_some_and(|w| w.state == State::Waiting))
            .collect();
        for &c in &due {
            Self::remove_locked(&mut t, c);
        }
        self.blocked.store(t.waiters.len(), Ordering::Release);
        due
    }

    /// The earliest deadline of a waiting client.
    pub fn next_deadline_ns(&self) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        self.lock().deadlines.first().map(|&(d, _)| d)
    }

    /// Takes `client` out (its connection closed); false when it was not blocked.
    pub fn remove(&self, client: ClientKey) -> bool {
        let mut t = self.lock();
        let was = t.waiters.contains_key(&client);
        Self::remove_locked(&mut t, client);
        self.blocked.store(t.waiters.len(), Ordering::Release);
        was
    }

    /// `client`'s state, if blocked.
    #[cfg(test)]
    pub fn state(&self, client: ClientKey) -> Option<State> {
        self.lock().waiters.get(&client).map(|w| w.state)
    }

    fn remove_locked(t: &mut Inner, client: ClientKey) -> Vec<Vec<u8>> {
        let Some(w) = t.waiters.remove(&client) else {
            return Vec::new();
        };
        if let Some(d) = w.deadline_ns {
            t.deadlines.remove(&(d, client));
        }
        t.ready.retain(|&c| c != client);
        for k in &w.keys {
            if let Some(line) = t.lines.get_mut(k) {
                line.retain(|&c| c != client);
                if line.is_empty() {
                    t.lines.remove(k);
                }
            }
        }
        w.keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ClientKey = (1, 1);
    const B: ClientKey = (2, 1);
    const C: ClientKey = (3, 1);

    /// `CLIENT UNPAUSE` releases the postponed clients only, `CLIENT UNBLOCK` never touches
    /// them, and the pause's end releases them as a timeout. Mutations caught: an unpause
    /// that wakes a blocking pop (it would reply its timeout), a postponed client that
    /// `CLIENT UNBLOCK` takes out (Redis answers 0), one not counted as blocked.
    #[test]
    fn postponed_clients_leave_at_unpause_or_at_the_pause_end() {
        let t = BlockTable::default();
        const D: ClientKey = (4, 7);
        t.postpone(D, 100);
        t.block(B, vec![b"k".to_vec()], None);
        t.postpone(C, 50);
        assert_eq!(t.len(), 3);
        assert!(!t.unblock(D.1, false));
        assert_eq!(t.take_expired(60), vec![C]);
        assert_eq!(t.release_postponed(), 1);
        assert_eq!(t.take_unblocked(), vec![(D, false)]);
        assert_eq!(t.state(B), Some(State::Waiting));
        assert_eq!(t.len(), 1);
        assert_eq!(t.release_postponed(), 0);
    }

    /// A write makes only the first client of its key's line ready. Catches waking every
    /// client of the key (they would race: not Redis's order), waking a client of another key.
    #[test]
    fn a_write_readies_the_first_in_line_only() {
        let t = BlockTable::default();
        t.block(A, vec![b"k".to_vec()], None);
        t.block(B, vec![b"k".to_vec()], None);
        t.block(C, vec![b"other".to_vec()], None);
        t.touched(b"k");
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![A]);
        assert_eq!(t.state(B), Some(State::Waiting));
        assert_eq!(t.state(C), Some(State::Waiting));
    }

    /// Served, a client leaves and the next in each of its lines becomes ready; not served,
    /// it stays first. Catches a served client left in a line, the next one never woken (a
    /// push of several elements serving one client), an unserved one losing its place.
    #[test]
    fn the_next_in_line_follows_a_served_client() {
        let t = BlockTable::default();
        t.block(A, vec![b"k".to_vec(), b"j".to_vec()], None);
        t.block(B, vec![b"k".to_vec()], None);
        t.block(C, vec![b"j".to_vec()], None);
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![A]);
        t.retried(A, false);
        assert_eq!(t.state(A), Some(State::Waiting));
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![A]);
        t.retried(A, true);
        assert_eq!(t.state(A), None);
        let mut ready = t.take_ready();
        ready.sort();
        assert_eq!(ready, vec![B, C]);
        assert_eq!(t.len(), 2);
    }

    /// A write while the first client runs again makes its empty attempt try once more.
    /// Catches the lost wake-up (the write lands after the attempt read and before it waits).
    #[test]
    fn a_write_during_a_retry_is_not_lost() {
        let t = BlockTable::default();
        t.block(A, vec![b"k".to_vec()], None);
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![A]);
        t.touched(b"k");
        assert!(t.take_ready().is_empty());
        t.retried(A, false);
        assert_eq!(t.take_ready(), vec![A]);
    }

    /// Deadlines expire waiting clients only, in time; `None` never expires; a closed
    /// connection leaves every line. Catches an expiry of a client being retried (its reply
    /// would be written twice), a deadline compared the wrong way, a removed client still
    /// first in a line.
    #[test]
    fn deadlines_and_removal() {
        let t = BlockTable::default();
        t.block(A, vec![b"k".to_vec()], Some(100));
        t.block(B, vec![b"k".to_vec()], Some(50));
        t.block(C, vec![b"k".to_vec()], None);
        assert_eq!(t.next_deadline_ns(), Some(50));
        assert!(t.take_expired(49).is_empty());
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![A]);
        assert_eq!(t.take_expired(1_000), vec![B]);
        assert_eq!(t.state(A), Some(State::Retrying { dirty: false }));
        assert!(t.remove(A));
        t.touched(b"k");
        assert_eq!(t.take_ready(), vec![C]);
        assert!(t.take_expired(u64::MAX).is_empty());
    }
}
