//! Tool-call ids.
//!
//! Clients echo the id back with the tool's result, so ids must not repeat within a
//! conversation; agents keep long conversations, hence random ids by default. Tests inject
//! [`sequential_ids`] to get the same ids on every run.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes the id of each new call.
pub type IdGenerator = Box<dyn FnMut() -> String + Send>;

/// `call_` and 24 random letters and digits, like OpenAI's ids.
pub fn random_call_id() -> String {
    // RandomState is seeded from the OS once per process and then varied per instance; the
    // counter keeps two ids from one instance apart. No cryptographic strength is needed.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let state = RandomState::new();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut id = String::from("call_");
    for part in 0..3u64 {
        let mut bits = state.hash_one((n, part));
        for _ in 0..8 {
            id.push(char::from(
                ALPHABET[(bits % ALPHABET.len() as u64) as usize],
            ));
            bits /= ALPHABET.len() as u64;
        }
    }
    id
}

/// The default generator: [`random_call_id`].
pub fn random_ids() -> IdGenerator {
    Box::new(random_call_id)
}

/// `call_0`, `call_1`, ...: deterministic ids for tests and reproducible output.
pub fn sequential_ids() -> IdGenerator {
    let mut next = 0u64;
    Box::new(move || {
        let id = format!("call_{next}");
        next += 1;
        id
    })
}
