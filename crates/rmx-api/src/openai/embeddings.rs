//! Embeddings (`/v1/embeddings`).

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `input`: a string, strings, token ids, or lists of token ids.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u32>),
    TokenLists(Vec<Vec<u32>>),
}

impl EmbeddingInput {
    /// How many inputs (vectors) it asks for.
    pub fn len(&self) -> usize {
        match self {
            EmbeddingInput::Text(_) | EmbeddingInput::Tokens(_) => 1,
            EmbeddingInput::Texts(v) => v.len(),
            EmbeddingInput::TokenLists(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const INPUT_SHAPES: &str =
    "expected a string, an array of strings, an array of token ids or an array of arrays of token ids";

// By hand rather than `untagged`: an array of mixed items would otherwise be refused with
// serde's "did not match any variant", which names none of the four shapes.
impl<'de> Deserialize<'de> for EmbeddingInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let token = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
        let tokens = |v: &Value| -> Option<Vec<u32>> { v.as_array()?.iter().map(token).collect() };
        match Value::deserialize(d)? {
            Value::String(s) => Ok(EmbeddingInput::Text(s)),
            Value::Array(items) if items.is_empty() => Ok(EmbeddingInput::Texts(Vec::new())),
            Value::Array(items) => {
                if let Some(texts) = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                {
                    Ok(EmbeddingInput::Texts(texts))
                } else if let Some(ids) = items.iter().map(token).collect::<Option<Vec<_>>>() {
                    Ok(EmbeddingInput::Tokens(ids))
                } else if let Some(lists) = items.iter().map(tokens).collect::<Option<Vec<_>>>() {
                    Ok(EmbeddingInput::TokenLists(lists))
                } else {
                    Err(de::Error::custom(format!(
                        "{INPUT_SHAPES} (token ids are integers from 0 to 4294967295), \
                         not a mix of them"
                    )))
                }
            }
            other => Err(de::Error::custom(format!("{INPUT_SHAPES}, got {other}"))),
        }
    }
}

/// How the vectors are written: JSON numbers, or base64 of their little-endian f32 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct EmbeddingRequest {
    pub model: String,
    pub input: EmbeddingInput,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding_format: Option<EncodingFormat>,
    /// Keep each vector's first N values (renormalized when the model normalizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    /// rmx's addition, sentence-transformers' word: the model's named prompt to put before
    /// each text input (Qwen3-Embedding's "query" instruction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_name: Option<String>,
    /// rmx's addition, as Voyage's, Cohere's and Jina's APIs name it: "query" (also
    /// "search_query", "retrieval.query") puts the model's query prompt before each text;
    /// "document" ("search_document", "passage", "retrieval.passage") its document prompt,
    /// where it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    /// Accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// One vector, as numbers or as base64.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    Float(Vec<f32>),
    Base64(String),
}

impl EmbeddingVector {
    /// Base64 of the values' little-endian f32 bytes, as the OpenAI SDKs decode it.
    pub fn base64(values: &[f32]) -> EmbeddingVector {
        use base64::Engine;
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        EmbeddingVector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// The values, decoding base64; None when it is not base64 of whole f32s.
    pub fn values(&self) -> Option<Vec<f32>> {
        use base64::Engine;
        match self {
            EmbeddingVector::Float(v) => Some(v.clone()),
            EmbeddingVector::Base64(s) => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
                (bytes.len() % 4 == 0).then(|| {
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect()
                })
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Embedding {
    /// "embedding".
    pub object: String,
    pub index: usize,
    pub embedding: EmbeddingVector,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct EmbeddingUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct EmbeddingResponse {
    /// "list".
    pub object: String,
    pub data: Vec<Embedding>,
    pub model: String,
    pub usage: EmbeddingUsage,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(json: &str) -> Result<EmbeddingInput, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn every_input_shape_reads() {
        assert_eq!(
            input(r#""hi""#).ok(),
            Some(EmbeddingInput::Text("hi".into()))
        );
        assert_eq!(
            input(r#"["a", "b"]"#).ok(),
            Some(EmbeddingInput::Texts(vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            input("[1, 2]").ok(),
            Some(EmbeddingInput::Tokens(vec![1, 2]))
        );
        assert_eq!(
            input("[[1], [2, 3]]").ok(),
            Some(EmbeddingInput::TokenLists(vec![vec![1], vec![2, 3]]))
        );
        assert_eq!(input("[]").ok(), Some(EmbeddingInput::Texts(vec![])));
        for bad in [r#"["a", 1]"#, "[-1]", "3", r#"{"a": 1}"#, "[[1], 2]"] {
            let e = input(bad).expect_err(bad).to_string();
            assert!(e.contains("array of token ids"), "{bad}: {e}");
        }
    }

    #[test]
    fn base64_round_trips_little_endian_f32() {
        let v = [1.0f32, -0.5, 3.25e-7];
        let b = EmbeddingVector::base64(&v);
        // 1.0f32 is 00 00 80 3f little-endian.
        assert!(matches!(&b, EmbeddingVector::Base64(s) if s.starts_with("AACAPw")));
        assert_eq!(b.values(), Some(v.to_vec()));
    }
}
