//! Stop strings over a stream of text deltas.
//!
//! A stop string usually spans several tokens, so text that could still turn into one is held
//! back: the matcher never emits the start of a stop string, and never needs the text again
//! once it is out. What it holds is at most the longest stop string, so each delta costs time
//! in proportion to that, not to the text so far.

/// What one [`StopMatcher::push`] lets out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StopOutput {
    /// Text that can be sent now: it cannot be part of any stop string.
    pub text: String,
    /// The stop string that ended the stream; `text` then holds everything before it.
    pub stop: Option<String>,
}

#[derive(Debug, Clone)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopMatcher {
    /// Empty stop strings are dropped: they would match before any text.
    pub fn new<I, S>(stops: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let stops = stops
            .into_iter()
            .map(Into::into)
            .filter(|stop: &String| !stop.is_empty())
            .collect();
        Self {
            stops,
            held: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop string has matched; later pushes then return nothing.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    pub fn push(&mut self, delta: &str) -> StopOutput {
        if self.stopped {
            return StopOutput::default();
        }
        self.held.push_str(delta);
        if let Some((at, stop)) = self.first_match() {
            let text = self.held[..at].to_string();
            self.held.clear();
            self.stopped = true;
            return StopOutput {
                text,
                stop: Some(stop),
            };
        }
        let keep = self.partial_suffix_len();
        let text = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        StopOutput { text, stop: None }
    }

    /// The text held back at the end of the stream, which no stop string completed.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// The stop string that starts earliest in the held text (the longest one on a tie, so
    /// `</tool>` wins over `</t` when both are stops).
    fn first_match(&self) -> Option<(usize, String)> {
        self.stops
            .iter()
            .filter_map(|stop| self.held.find(stop.as_str()).map(|at| (at, stop)))
            .min_by(|a, b| a.0.cmp(&b.0).then(b.1.len().cmp(&a.1.len())))
            .map(|(at, stop)| (at, stop.clone()))
    }

    /// Length in bytes of the longest end of the held text that begins some stop string.
    fn partial_suffix_len(&self) -> usize {
        let held = self.held.as_str();
        held.char_indices()
            .map(|(at, _)| at)
            .find(|&at| {
                let tail = &held[at..];
                self.stops.iter().any(|stop| stop.starts_with(tail))
            })
            .map_or(0, |at| held.len() - at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces cut at `cuts` and returns (emitted text, stop).
    fn run(stops: &[&str], text: &str, cuts: &[usize]) -> (String, Option<String>) {
        let mut matcher = StopMatcher::new(stops.iter().copied());
        let mut out = String::new();
        let mut last = 0;
        for &cut in cuts.iter().chain(std::iter::once(&text.len())) {
            let piece = matcher.push(&text[last..cut]);
            out.push_str(&piece.text);
            last = cut;
            if piece.stop.is_some() {
                return (out, piece.stop);
            }
        }
        out.push_str(&matcher.finish());
        (out, None)
    }

    fn boundaries(text: &str) -> Vec<usize> {
        text.char_indices().map(|(at, _)| at).skip(1).collect()
    }

    #[test]
    fn a_stop_split_at_every_position_is_caught_and_never_emitted() {
        let text = "Hello wörld<|end|> and more";
        for cut in boundaries(text) {
            let (out, stop) = run(&["<|end|>"], text, &[cut]);
            assert_eq!(out, "Hello wörld", "cut at {cut}");
            assert_eq!(stop.as_deref(), Some("<|end|>"), "cut at {cut}");
        }
        // One character at a time.
        let (out, stop) = run(&["<|end|>"], text, &boundaries(text));
        assert_eq!(
            (out.as_str(), stop.as_deref()),
            ("Hello wörld", Some("<|end|>"))
        );
    }

    #[test]
    fn false_starts_are_released_and_text_survives_whole() {
        let text = "a <|en b <|e <| c <";
        for cut in boundaries(text) {
            let (out, stop) = run(&["<|end|>"], text, &[cut]);
            assert_eq!(out, text, "cut at {cut}");
            assert_eq!(stop, None);
        }
        let (out, stop) = run(&["<|end|>"], text, &boundaries(text));
        assert_eq!((out.as_str(), stop), (text, None));
    }

    #[test]
    fn earliest_of_several_stops_wins_and_multibyte_stops_work() {
        let text = "数学は楽しい。終わり。STOP";
        for cut in boundaries(text) {
            let (out, stop) = run(&["STOP", "終わり"], text, &[cut]);
            assert_eq!(out, "数学は楽しい。", "cut at {cut}");
            assert_eq!(stop.as_deref(), Some("終わり"));
        }
    }

    #[test]
    fn held_text_is_only_a_possible_stop_prefix() {
        let mut matcher = StopMatcher::new(["</s>"]);
        assert_eq!(matcher.push("abc<").text, "abc");
        assert_eq!(matcher.push("/").text, "");
        assert_eq!(matcher.push("x").text, "</x");
        assert_eq!(matcher.push("</").text, "");
        assert_eq!(matcher.finish(), "</");
    }

    #[test]
    fn after_a_stop_nothing_more_comes_out() {
        let mut matcher = StopMatcher::new(["\n\n", ""]);
        let first = matcher.push("one\n\ntwo");
        assert_eq!(first.text, "one");
        assert_eq!(first.stop.as_deref(), Some("\n\n"));
        assert!(matcher.is_stopped());
        assert_eq!(matcher.push("three"), StopOutput::default());
        assert_eq!(matcher.finish(), "");
    }

    #[test]
    fn no_stops_pass_everything_through() {
        let mut matcher = StopMatcher::new(Vec::<String>::new());
        assert_eq!(matcher.push("anything <").text, "anything <");
    }
}
