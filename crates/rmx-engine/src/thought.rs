//! A thinking budget: once an answer's thought (`<think>…</think>`, Gemma 4's thought channel)
//! has taken its budget of tokens, the engine feeds the model the text that closes it, as if
//! the model had written it, and the answer follows. This is what mlx-vlm's
//! `--thinking-budget` and vLLM's `thinking_token_budget` do; Anthropic's
//! `thinking.budget_tokens` asks for it.
//!
//! The watch reads the text each token completes (what the detokenizer releases), so it does
//! not depend on how a tokenizer splits the tags: Qwen3's `</think>` is one added token,
//! another model's may be several.

use serde::{Deserialize, Serialize};

/// How long a request's thought may be, and how it is closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThoughtBudget {
    /// Tokens the thought may take before it is closed; 0 closes it at once.
    pub max_tokens: usize,
    /// The text that opens a thought (`<think>`), when the model writes it itself.
    pub open: String,
    /// The text that closes one (`</think>`): a thought the model closes ends the watch.
    pub close: String,
    /// The prompt ends inside the thought (the template opened it).
    pub starts_inside: bool,
    /// The tokens fed in place of the model's choices when the budget runs out (the tokens of
    /// `"\n</think>\n\n"`).
    pub forced: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace and a part of the open tag yet.
    Before { seen: String },
    /// In the thought: its tokens so far, and the last text (enough to hold the close tag).
    Inside { tokens: usize, tail: String },
    /// No thought, a closed one, or one that was closed for the model.
    Done,
}

/// Follows one answer's text and says when to close its thought.
#[derive(Debug, Clone)]
pub(crate) struct ThoughtWatch {
    budget: ThoughtBudget,
    state: State,
}

impl ThoughtWatch {
    pub(crate) fn new(budget: ThoughtBudget) -> ThoughtWatch {
        let state = if budget.starts_inside {
            State::Inside {
                tokens: 0,
                tail: String::new(),
            }
        } else {
            State::Before {
                seen: String::new(),
            }
        };
        ThoughtWatch { budget, state }
    }

    /// The tokens to feed before anything is generated: a budget of 0 for a thought the
    /// prompt opened.
    pub(crate) fn at_start(&mut self) -> Option<Vec<u32>> {
        match self.state {
            State::Inside { .. } if self.budget.max_tokens == 0 => Some(self.force()),
            _ => None,
        }
    }

    /// A generated token's text. Returns the tokens to feed next, in place of the model's
    /// choices, when this token used up the thought's budget.
    pub(crate) fn push(&mut self, text: &str) -> Option<Vec<u32>> {
        match &mut self.state {
            State::Done => None,
            State::Before { seen } => {
                seen.push_str(text);
                let t = seen.trim_start();
                if let Some(rest) = t.strip_prefix(self.budget.open.as_str()) {
                    let tail = rest.to_string();
                    if tail.contains(self.budget.close.as_str()) {
                        self.state = State::Done;
                        return None;
                    }
                    self.state = State::Inside { tokens: 0, tail };
                    return (self.budget.max_tokens == 0).then(|| self.force());
                }
                if !self.budget.open.starts_with(t) || self.budget.open.is_empty() {
                    // The answer began without a thought.
                    self.state = State::Done;
                }
                None
            }
            State::Inside { tokens, tail } => {
                *tokens += 1;
                tail.push_str(text);
                if tail.contains(self.budget.close.as_str()) {
                    self.state = State::Done;
                    return None;
                }
                keep_last(tail, self.budget.close.len());
                if *tokens >= self.budget.max_tokens {
                    return Some(self.force());
                }
                None
            }
        }
    }

    fn force(&mut self) -> Vec<u32> {
        self.state = State::Done;
        self.budget.forced.clone()
    }
}

/// Drops all but about the last `n` bytes of `s` (at a character boundary), which is all a
/// close tag of `n` bytes that the next text completes can need.
fn keep_last(s: &mut String, n: usize) {
    if s.len() <= n {
        return;
    }
    let mut cut = s.len() - n;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.drain(..cut);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(max_tokens: usize, starts_inside: bool) -> ThoughtBudget {
        ThoughtBudget {
            max_tokens,
            open: "<think>".into(),
            close: "</think>".into(),
            starts_inside,
            forced: vec![7, 8, 9],
        }
    }

    /// Pushes `texts` and returns the index of the token after which the watch forced.
    fn forced_after(w: &mut ThoughtWatch, texts: &[&str]) -> Option<usize> {
        texts.iter().position(|t| w.push(t).is_some())
    }

    #[test]
    fn a_thought_the_prompt_opened_is_closed_after_its_budget() {
        let mut w = ThoughtWatch::new(budget(3, true));
        assert_eq!(w.at_start(), None);
        assert_eq!(w.push("a"), None);
        assert_eq!(w.push("b"), None);
        assert_eq!(w.push("c"), Some(vec![7, 8, 9]));
        // Closed: the forced tokens and the answer are not counted.
        assert_eq!(w.push("\n</think>\n\n"), None);
        assert_eq!(forced_after(&mut w, &["x"; 10]), None);
    }

    #[test]
    fn a_thought_the_model_opens_counts_from_after_the_tag() {
        let mut w = ThoughtWatch::new(budget(2, false));
        assert_eq!(
            forced_after(&mut w, &["\n", "<", "think", ">", "a", "b"]),
            Some(5)
        );
        let mut w = ThoughtWatch::new(budget(2, false));
        assert_eq!(forced_after(&mut w, &["<think>\n", "a", "b"]), Some(2));
    }

    #[test]
    fn a_thought_closed_in_time_or_an_answer_without_one_is_left_alone() {
        let mut w = ThoughtWatch::new(budget(3, true));
        assert_eq!(
            forced_after(&mut w, &["a", "</", "think>", "x", "y", "z"]),
            None
        );
        let mut w = ThoughtWatch::new(budget(1, false));
        assert_eq!(forced_after(&mut w, &["Hello", "a", "b"]), None);
        let mut w = ThoughtWatch::new(budget(1, false));
        assert_eq!(forced_after(&mut w, &["<b>", "a", "b"]), None);
        // Open and close in one piece of text.
        let mut w = ThoughtWatch::new(budget(1, false));
        assert_eq!(forced_after(&mut w, &["<think></think>", "a", "b"]), None);
    }

    #[test]
    fn a_budget_of_zero_closes_at_once() {
        let mut w = ThoughtWatch::new(budget(0, true));
        assert_eq!(w.at_start(), Some(vec![7, 8, 9]));
        assert_eq!(w.push("a"), None);
        let mut w = ThoughtWatch::new(budget(0, false));
        assert_eq!(w.at_start(), None);
        assert_eq!(w.push("<think>"), Some(vec![7, 8, 9]));
    }

    #[test]
    fn a_close_tag_split_over_tokens_with_wide_characters_is_seen() {
        let mut w = ThoughtWatch::new(budget(100, true));
        let texts = ["é", "日本語の考え", "</th", "ink>", "x"];
        assert_eq!(forced_after(&mut w, &texts), None);
        assert_eq!(w.state, State::Done);
    }
}
