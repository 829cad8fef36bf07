//! The ranges sampling values are held to on every surface: OpenAI's documented ones, applied
//! on the native (Ollama) routes too, so that a value one route refuses is not taken by
//! another and turned into inf or NaN logits there. A value outside them is a 400 naming the
//! field as the request spelled it, never a silent clamp. Anthropic's narrower temperature
//! range (0 to 1) is that surface's own check.

/// A sampling value with a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    Temperature,
    TopP,
    MinP,
    PresencePenalty,
    FrequencyPenalty,
    RepetitionPenalty,
}

impl Knob {
    /// Whether `v` is in range (NaN never is).
    pub fn allows(self, v: f32) -> bool {
        match self {
            Knob::Temperature => (0.0..=2.0).contains(&v),
            Knob::TopP | Knob::MinP => (0.0..=1.0).contains(&v),
            Knob::PresencePenalty | Knob::FrequencyPenalty => (-2.0..=2.0).contains(&v),
            // Seen tokens' logits are divided by it: 0 makes them infinite (NaN logprobs), and
            // a negative one turns the penalty into a reward with the sign flipped.
            Knob::RepetitionPenalty => v > 0.0 && v <= 10.0,
        }
    }

    fn range(self) -> &'static str {
        match self {
            Knob::Temperature => "between 0 and 2",
            Knob::TopP | Knob::MinP => "between 0 and 1",
            Knob::PresencePenalty | Knob::FrequencyPenalty => "between -2 and 2",
            Knob::RepetitionPenalty => "greater than 0 and at most 10",
        }
    }
}

/// A value out of its knob's range; `param` is the field's name in the request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{param}` must be {range}, got {value}")]
pub struct OutOfRange {
    pub param: String,
    pub range: &'static str,
    pub value: f32,
}

/// Checks one value, if the request set it; `param` names it as the request did (Ollama's
/// `repeat_penalty` is OpenAI's `repetition_penalty`).
pub fn check(knob: Knob, param: &str, value: Option<f32>) -> Result<(), OutOfRange> {
    match value {
        Some(v) if !knob.allows(v) => Err(OutOfRange {
            param: param.to_string(),
            range: knob.range(),
            value: v,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_that_would_break_the_logits_are_refused() {
        for v in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert!(!Knob::RepetitionPenalty.allows(v), "{v}");
        }
        assert!(Knob::RepetitionPenalty.allows(1.1));
        let e = check(Knob::RepetitionPenalty, "repeat_penalty", Some(0.0)).unwrap_err();
        assert_eq!(e.param, "repeat_penalty");
        assert!(
            e.to_string()
                .contains("`repeat_penalty` must be greater than 0"),
            "{e}"
        );
    }

    #[test]
    fn temperatures_past_the_range_are_refused() {
        // 1e308 read as f32 is infinite.
        assert!(!Knob::Temperature.allows(1e308_f64 as f32));
        assert!(!Knob::TopP.allows(2.0));
        assert!(Knob::Temperature.allows(0.0) && Knob::Temperature.allows(2.0));
        assert_eq!(check(Knob::TopP, "top_p", None), Ok(()));
    }
}
