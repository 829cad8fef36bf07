//! The vocabulary as a prefix trie, flattened in depth-first order, so the constraint walks
//! every token's bytes with one automaton step per shared prefix and skips a whole subtree at
//! the first byte the automaton refuses (after `{`, the 60K tokens that start with a space
//! and go on with a letter cost one step each for their second byte, not a walk each).

/// Node 0 is the root (the empty prefix); node i's subtree is `i..end[i]`.
#[derive(Debug)]
pub(crate) struct Trie {
    byte: Vec<u8>,
    depth: Vec<u16>,
    end: Vec<u32>,
    /// Node i's tokens (the ids whose bytes end there) are `ids[first_id[i]..first_id[i + 1]]`.
    first_id: Vec<u32>,
    ids: Vec<u32>,
    max_depth: usize,
}

impl Trie {
    pub(crate) fn new(pieces: &[Option<Box<[u8]>>]) -> Trie {
        let mut entries: Vec<(&[u8], u32)> = pieces
            .iter()
            .enumerate()
            .filter_map(|(id, b)| b.as_deref().map(|b| (b, id as u32)))
            .collect();
        entries.sort_unstable();
        let mut t = Trie {
            byte: vec![0],
            depth: vec![0],
            end: vec![0],
            first_id: vec![0],
            ids: Vec::new(),
            max_depth: entries.iter().map(|e| e.0.len()).max().unwrap_or(0),
        };
        t.fill(0, &entries, 0);
        t.first_id.push(t.ids.len() as u32);
        t
    }

    /// Adds the subtree of node `node`, whose prefix all `entries` share (`depth` bytes).
    fn fill(&mut self, node: usize, entries: &[(&[u8], u32)], depth: usize) {
        let here = entries.iter().take_while(|e| e.0.len() == depth).count();
        self.ids.extend(entries[..here].iter().map(|e| e.1));
        let mut rest = &entries[here..];
        while let Some(first) = rest.first() {
            let b = first.0[depth];
            let n = rest.iter().take_while(|e| e.0[depth] == b).count();
            let child = self.byte.len();
            self.byte.push(b);
            self.depth.push(depth as u16 + 1);
            self.end.push(0);
            self.first_id.push(self.ids.len() as u32);
            self.fill(child, &rest[..n], depth + 1);
            rest = &rest[n..];
        }
        self.end[node] = self.byte.len() as u32;
    }

    /// Walks every token from state `start`: `step` advances a state by a byte (None: the
    /// byte is refused), `found` hears each token id whose every byte was accepted, with the
    /// state after it.
    pub(crate) fn walk<S: Copy>(
        &self,
        start: S,
        step: impl Fn(S, u8) -> Option<S>,
        mut found: impl FnMut(u32, S),
    ) {
        let mut states = Vec::with_capacity(self.max_depth + 1);
        states.push(start);
        let mut i = 1;
        let n = self.byte.len();
        while i < n {
            let d = self.depth[i] as usize;
            states.truncate(d);
            match step(states[d - 1], self.byte[i]) {
                None => i = self.end[i] as usize,
                Some(s) => {
                    states.push(s);
                    for &id in &self.ids[self.first_id[i] as usize..self.first_id[i + 1] as usize] {
                        found(id, s);
                    }
                    i += 1;
                }
            }
        }
    }
}
