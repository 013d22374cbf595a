//! The server's scripts: each body by its SHA1 (what `EVAL` and `SCRIPT LOAD` compiled once),
//! bounded in count and bytes, and the random generator scripts share.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sha1::{Digest, Sha1};

use super::state::{Cache, Scripts};
pub use super::state::{Origin, Script, Sha, SCRIPTS_MAX, SCRIPT_BYTES_MAX};

/// The SHA1 of `body` in lowercase hex.
pub fn sha1_hex(body: &[u8]) -> Sha {
    let digest = Sha1::digest(body);
    let mut out = [0u8; 40];
    for (i, byte) in digest.iter().enumerate() {
        out[2 * i] = b"0123456789abcdef"[usize::from(byte >> 4)];
        out[2 * i + 1] = b"0123456789abcdef"[usize::from(byte & 15)];
    }
    out
}

/// `sha` with its ASCII letters lowercased, if it is 40 bytes long.
pub fn normalize(sha: &[u8]) -> Option<Sha> {
    let mut out: Sha = sha.try_into().ok()?;
    out.make_ascii_lowercase();
    Some(out)
}

impl Scripts {
    /// The cached script `sha` (any case).
    pub fn get(&self, sha: &[u8]) -> Option<Arc<Script>> {
        let sha = normalize(sha)?;
        let cache = self.cache.lock().expect("script cache poisoned");
        cache.scripts.get(&sha).map(|(s, _)| Arc::clone(s))
    }

    /// Whether `sha` is cached.
    pub fn contains(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    /// Adds `script` (compiled already). A `SCRIPT LOAD` of an `EVAL`ed script keeps it.
    /// `Err` when it does not fit even after evicting every `EVAL`ed script.
    pub fn insert(&self, script: Arc<Script>, origin: Origin) -> Result<(), String> {
        let mut cache = self.cache.lock().expect("script cache poisoned");
        if let Some(entry) = cache.scripts.get_mut(&script.sha) {
            if origin == Origin::Load && entry.1 == Origin::Eval {
                entry.1 = Origin::Load;
                cache.evictable.retain(|s| *s != script.sha);
            }
            return Ok(());
        }
        let bytes = script.body.len();
        // Bounded: each pass removes one script or stops.
        while cache.scripts.len() >= SCRIPTS_MAX || cache.bytes + bytes > SCRIPT_BYTES_MAX {
            let Some(oldest) = cache.evictable.pop_front() else {
                return Err(format!(
                    "ERR script cache is full ({} scripts, {} bytes)",
                    cache.scripts.len(),
                    cache.bytes
                ));
            };
            if let Some((gone, _)) = cache.scripts.remove(&oldest) {
                cache.bytes -= gone.body.len();
            }
        }
        cache.bytes += bytes;
        if origin == Origin::Eval {
            cache.evictable.push_back(script.sha);
        }
        cache.scripts.insert(script.sha, (script, origin));
        Ok(())
    }

    /// `SCRIPT FLUSH`: every script forgotten.
    pub fn flush(&self) {
        let mut cache = self.cache.lock().expect("script cache poisoned");
        *cache = Cache::default();
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// How many `SCRIPT FLUSH`es there were (a Lua state's compiled functions are of one).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Scripts and bytes cached (`INFO`'s `number_of_cached_scripts`, `used_memory_scripts`).
    pub fn usage(&self) -> (usize, usize) {
        let cache = self.cache.lock().expect("script cache poisoned");
        (cache.scripts.len(), cache.bytes)
    }

    /// The next value of Redis's `lrand48` (31 bits).
    pub fn lrand48(&self) -> u32 {
        let mut x = self.rand48.lock().expect("rand48 poisoned");
        *x = (x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & ((1 << 48) - 1);
        (*x >> 17) as u32
    }

    /// `math.randomseed(seed)`: Redis's `srand48`.
    pub fn srand48(&self, seed: i32) {
        *self.rand48.lock().expect("rand48 poisoned") = (u64::from(seed as u32) << 16) | 0x330E;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(body: &str) -> Arc<Script> {
        Arc::new(Script {
            sha: sha1_hex(body.as_bytes()),
            body: body.as_bytes().into(),
            code_at: 0,
            flags: None,
        })
    }

    /// Catches a wrong digest or hex (the values are Redis's test vectors for `sha1hex`).
    #[test]
    fn sha1_hex_matches_redis() {
        assert_eq!(&sha1_hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            &sha1_hex(b"Pizza & Mandolino"),
            b"74822d82031af7493c20eefa13bd07ec4fada82f"
        );
    }

    /// Catches eviction of a `SCRIPT LOAD`ed script, a byte count that drifts, or a lookup
    /// that cares for case.
    #[test]
    fn a_full_cache_evicts_the_oldest_evaled_script_only() {
        let scripts = Scripts::default();
        let loaded = script("return 'loaded'");
        scripts.insert(loaded.clone(), Origin::Load).unwrap();
        for i in 0..SCRIPTS_MAX + 10 {
            scripts
                .insert(script(&format!("return {i}")), Origin::Eval)
                .unwrap();
        }
        let (count, bytes) = scripts.usage();
        assert_eq!(count, SCRIPTS_MAX);
        assert!(bytes <= SCRIPT_BYTES_MAX);
        assert!(scripts.contains(&loaded.sha.to_ascii_uppercase()));
        assert!(!scripts.contains(&sha1_hex(b"return 0")));
        assert!(scripts.contains(&sha1_hex(format!("return {}", SCRIPTS_MAX + 9).as_bytes())));
        scripts.flush();
        assert_eq!(scripts.usage(), (0, 0));
    }

    /// Catches a generator that is not Redis's: the first values after `srand48(0)` of
    /// the POSIX `lrand48` (as glibc computes them).
    #[test]
    fn lrand48_is_posix() {
        let scripts = Scripts::default();
        scripts.srand48(0);
        let values: Vec<u32> = (0..3).map(|_| scripts.lrand48()).collect();
        assert_eq!(values, [366_850_414, 1_610_402_240, 206_956_554]);
    }
}
