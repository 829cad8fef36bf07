//! Prompt prefixes the engine has already read, with their caches, so a request that starts the
//! same way (an agent's next turn resends the whole conversation) prefills only what is new.
//!
//! An entry holds the tokens a cache has read and the cache itself. A cache of full KV layers
//! serves any prefix of its tokens (it is cut back); one with a rotating window or a recurrent
//! (DeltaNet) state serves only its whole length, so sequences of such models also leave a copy
//! taken where their prompt's prefill ended. Entries are dropped least recently used first once
//! their bytes pass the budget (`RMX_PREFIX_CACHE_MB`). The engine thread owns the cache, like
//! every other array.

use rmx_mlx::distributed::Group;
use rmx_mlx::Array;
use rmx_models::LayerCache;

use crate::error::Result;

/// The budget when `RMX_PREFIX_CACHE_MB` is not set.
pub(crate) const DEFAULT_BUDGET_MB: usize = 2048;

struct Entry {
    tokens: Vec<u32>,
    cache: Vec<LayerCache>,
    /// Every layer can be cut back to an earlier position.
    trimmable: bool,
    bytes: usize,
    last_used: u64,
}

/// What a stored entry offers a prompt, for [`best_match`].
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub tokens: &'a [u32],
    pub trimmable: bool,
    pub last_used: u64,
}

/// The entry to reuse for `prompt` and how many of its tokens: the longest usable prefix,
/// the most recently used among equals. At least the prompt's last token is always left to
/// run, since its logits give the first new token. A trimmable entry offers its common prefix
/// with the prompt; any other entry all of its tokens or nothing.
pub fn best_match(candidates: &[Candidate], prompt: &[u32]) -> Option<(usize, usize)> {
    let limit = prompt.len().saturating_sub(1);
    let mut best: Option<(usize, usize, u64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let common = c
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let usable = if c.trimmable {
            common.min(limit)
        } else if common == c.tokens.len() && c.tokens.len() <= limit {
            common
        } else {
            0
        };
        if usable == 0 {
            continue;
        }
        if best.is_none_or(|(_, n, t)| usable > n || (usable == n && c.last_used > t)) {
            best = Some((i, usable, c.last_used));
        }
    }
    best.map(|(i, n, _)| (i, n))
}

pub struct PrefixCache {
    entries: Vec<Entry>,
    budget: usize,
    used: usize,
    clock: u64,
    /// The entry the last lookup used, until the next insert.
    last_hit: Option<usize>,
    /// In a group of ranks: the group, and the whole model's layer count
    /// ([`PrefixCache::in_group`]).
    group: Option<(Group, usize)>,
    /// Whether the whole model's caches cut back, as the ranks agreed
    /// ([`PrefixCache::in_group`]); `None`: read off each entry's caches.
    trimmable: Option<bool>,
}

impl PrefixCache {
    pub fn new(budget: usize) -> PrefixCache {
        PrefixCache {
            entries: Vec::new(),
            budget,
            used: 0,
            clock: 0,
            last_hit: None,
            group: None,
            trimmable: None,
        }
    }

    /// Every rank of a group decides hits and evictions on its own, and they must agree, or
    /// they run different steps (a hang, or a shape error). Tensor-parallel ranks hold every
    /// layer, split alike, so their own bytes agree; a pipeline stage holds only its range of
    /// the model's `layers`, and two stages' bytes differ when the layers do not divide evenly
    /// or some hold sliding windows. A stage's entries are costed by the sum of every stage's
    /// bytes (one small `all_sum` per insert, which every rank makes at the same point of the
    /// same turn): the same number on every rank, and the whole model's KV bytes. Whether
    /// entries cut back is the whole model's `trimmable` too (a hybrid model's stage may hold
    /// only attention layers, another its recurrent ones).
    pub fn in_group(mut self, group: Group, layers: usize, trimmable: bool) -> PrefixCache {
        self.group = Some((group, layers));
        self.trimmable = Some(trimmable);
        self
    }

    /// What an entry counts against the budget.
    fn cost(&self, cache: &[LayerCache]) -> Result<usize> {
        let own: usize = cache.iter().map(LayerCache::nbytes).sum();
        match &self.group {
            Some((group, whole)) if cache.len() < *whole => {
                // In KiB, so an int32 holds up to 2 TiB.
                let kib = i32::try_from(own.div_ceil(1024)).unwrap_or(i32::MAX);
                let all = group.all_sum(&Array::from_slice(&[kib], &[1])?)?;
                Ok(all.item::<i32>()?.max(0) as usize * 1024)
            }
            _ => Ok(own),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.budget > 0
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// How many of `prompt`'s tokens a lookup would serve, without copying anything.
    pub fn usable(&self, prompt: &[u32]) -> usize {
        let candidates: Vec<Candidate> = self.candidates();
        best_match(&candidates, prompt).map_or(0, |(_, n)| n)
    }

    fn candidates(&self) -> Vec<Candidate<'_>> {
        self.entries
            .iter()
            .map(|e| Candidate {
                tokens: &e.tokens,
                trimmable: e.trimmable,
                last_used: e.last_used,
            })
            .collect()
    }

    /// The entry that has read exactly `tokens`, else the latest used one that has read
    /// `tokens` and more and can be cut back to them (an extension, which took the place of
    /// the entry it extended); its tokens and cache.
    pub fn entry_holding(&self, tokens: &[u32]) -> Option<(&[u32], &[LayerCache])> {
        let exact = self.entries.iter().find(|e| e.tokens == tokens);
        exact
            .or_else(|| {
                self.entries
                    .iter()
                    .filter(|e| e.trimmable && e.tokens.starts_with(tokens))
                    .max_by_key(|e| e.last_used)
            })
            .map(|e| (e.tokens.as_slice(), e.cache.as_slice()))
    }

    /// The whole entry the last lookup served from: its tokens and cache.
    pub fn last_hit(&self) -> Option<(&[u32], &[LayerCache])> {
        let e = self.entries.get(self.last_hit?)?;
        Some((&e.tokens, &e.cache))
    }

    /// A cache of the longest stored prefix of `prompt` (buffers of its own) and its length.
    pub fn lookup(&mut self, prompt: &[u32]) -> Result<Option<(usize, Vec<LayerCache>)>> {
        self.last_hit = None;
        let candidates: Vec<Candidate> = self
            .entries
            .iter()
            .map(|e| Candidate {
                tokens: &e.tokens,
                trimmable: e.trimmable,
                last_used: e.last_used,
            })
            .collect();
        let Some((i, n)) = best_match(&candidates, prompt) else {
            return Ok(None);
        };
        let now = self.tick();
        self.last_hit = Some(i);
        let entry = &mut self.entries[i];
        entry.last_used = now;
        let mut cache = Vec::with_capacity(entry.cache.len());
        for layer in &entry.cache {
            match layer.truncated(n as i32)? {
                Some(c) => cache.push(c),
                None => return Ok(None),
            }
        }
        Ok(Some((n, cache)))
    }

    /// Stores `cache`, which has read exactly `tokens`. An entry it makes redundant (the same
    /// tokens, or a trimmable one whose tokens it extends) goes; then the least recently used
    /// ones while over the budget. A cache larger than the whole budget is not kept.
    pub fn insert(&mut self, tokens: Vec<u32>, cache: Vec<LayerCache>) {
        let bytes = match self.cost(&cache) {
            Ok(b) => b,
            // The group's collective failed: the group is lost and its next step says so.
            Err(e) => {
                eprintln!("rmx: a prefix was not kept: {e}");
                return;
            }
        };
        if bytes > self.budget || tokens.is_empty() {
            return;
        }
        let trimmable = self
            .trimmable
            .unwrap_or_else(|| cache.iter().all(LayerCache::is_trimmable));
        self.last_hit = None;
        let mut freed = 0;
        self.entries.retain(|e| {
            let redundant =
                e.tokens == tokens || (trimmable && e.trimmable && tokens.starts_with(&e.tokens));
            if redundant {
                freed += e.bytes;
            }
            !redundant
        });
        self.used -= freed;
        let last_used = self.tick();
        self.used += bytes;
        self.entries.push(Entry {
            tokens,
            cache,
            trimmable,
            bytes,
            last_used,
        });
        while self.used > self.budget {
            let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i)
            else {
                break;
            };
            let e = self.entries.swap_remove(oldest);
            self.used -= e.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_mlx::Array;
    use rmx_models::cache::KvCache;

    /// One full-attention layer that has read `n` positions of 4 KiB each.
    fn cache_of(n: i32) -> Vec<LayerCache> {
        let kv = Array::from_slice(&vec![1.0f32; (n * 512) as usize], &[1, 2, n, 256]).unwrap();
        let mut c = LayerCache::Full(KvCache::default());
        c.update_and_fetch(&kv, &kv).unwrap();
        vec![c]
    }

    #[test]
    fn entries_go_least_recently_used_first_and_extensions_replace_their_prefixes() {
        // Each entry: 256 positions of capacity (one step) x 2 x 256 x 4 bytes, twice (k, v).
        let entry = 2 * 256 * 2 * 256 * 4;
        let mut pc = PrefixCache::new(2 * entry);
        pc.insert(vec![1, 2, 3], cache_of(3));
        pc.insert(vec![7, 8, 9], cache_of(3));
        assert_eq!(pc.entries.len(), 2);
        // Using [1, 2, 3] makes [7, 8, 9] the oldest: a third entry pushes it out.
        let (n, got) = pc.lookup(&[1, 2, 3, 4]).unwrap().unwrap();
        assert_eq!((n, got[0].offset()), (3, 3));
        pc.insert(vec![5, 5, 5], cache_of(3));
        assert!(pc.lookup(&[7, 8, 9, 10]).unwrap().is_none());
        assert!(pc.lookup(&[1, 2, 3, 4]).unwrap().is_some());
        // An extension of a stored prefix replaces it.
        pc.insert(vec![1, 2, 3, 4, 6], cache_of(5));
        assert_eq!(pc.entries.iter().filter(|e| e.tokens[0] == 1).count(), 1);
        assert_eq!(pc.used, pc.entries.iter().map(|e| e.bytes).sum::<usize>());
        assert!(pc.used <= pc.budget);
        // Larger than the whole budget: not kept.
        pc.insert(vec![9; 600], cache_of(600));
        assert!(pc.entries.iter().all(|e| e.tokens.len() < 600));
    }

    fn c(tokens: &[u32], trimmable: bool, last_used: u64) -> Candidate<'_> {
        Candidate {
            tokens,
            trimmable,
            last_used,
        }
    }

    #[test]
    fn a_trimmable_entry_gives_its_common_prefix_and_leaves_the_last_token() {
        let stored = [1, 2, 3, 4, 5];
        assert_eq!(
            best_match(&[c(&stored, true, 1)], &[1, 2, 3, 9]),
            Some((0, 3))
        );
        // The whole prompt is stored: its last token still runs.
        assert_eq!(best_match(&[c(&stored, true, 1)], &[1, 2, 3]), Some((0, 2)));
        assert_eq!(best_match(&[c(&stored, true, 1)], &[7, 2, 3]), None);
        assert_eq!(best_match(&[c(&stored, true, 1)], &[1]), None);
    }

    #[test]
    fn an_untrimmable_entry_serves_only_whole() {
        let stored = [1, 2, 3];
        assert_eq!(
            best_match(&[c(&stored, false, 1)], &[1, 2, 3, 4]),
            Some((0, 3))
        );
        assert_eq!(best_match(&[c(&stored, false, 1)], &[1, 2, 3]), None);
        assert_eq!(best_match(&[c(&stored, false, 1)], &[1, 2, 9, 4]), None);
    }

    #[test]
    fn the_longest_wins_then_the_most_recent() {
        let (a, b) = ([1, 2, 3, 4], [1, 2, 3, 4, 5, 6]);
        let prompt = [1, 2, 3, 4, 5, 6, 7];
        assert_eq!(
            best_match(&[c(&a, true, 9), c(&b, false, 1)], &prompt),
            Some((1, 6))
        );
        assert_eq!(
            best_match(&[c(&a, true, 1), c(&a, true, 2)], &prompt),
            Some((1, 4))
        );
    }
}
