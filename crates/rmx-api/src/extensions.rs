//! rmx's own request fields, the same on every generating route: the native options and the
//! OpenAI and Anthropic bodies flatten them in, and the daemon reads them with one parser each
//! (rmx-server's kv_options.rs and speculation.rs).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RmxFields {
    /// Store this answer's keys and values 4- or 8-bit (mlx-lm's `kv_bits`); absent: as the
    /// model's alias or the daemon says (`rmx serve --kv-bits`), else unquantized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_bits: Option<i32>,
    /// Elements per quantization group of the KV cache, 32, 64 or 128 (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_group_size: Option<i32>,
    /// Quantize the KV cache only once it holds this many positions (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_quant_start: Option<i32>,
    /// Guess tokens ahead and check them in one forward; "prompt-lookup" copies them from the
    /// prompt and the answer so far, "draft:MODEL" has a smaller model of the same tokenizer
    /// guess, "mtp" the model's own multi-token-prediction head; "off" turns the alias's or the
    /// daemon's default off. The answer is the one it would be without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<String>,
    /// The most tokens guessed per step with `speculative`, 1 to 16 (default 6; "mtp": 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<usize>,
}
