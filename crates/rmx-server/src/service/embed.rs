//! Embeddings through the service core: the model resolved and held like a generation's, the
//! inputs tokenized off the async workers, cut to the model's limit only where the request
//! allows it, and the vectors shortened to `dimensions` where asked.

use std::time::{Duration, Instant};

use rmx_api::KeepAlive;
use rmx_engine::{Engine, ModelKind};

use super::{Service, ServiceError};

/// One input to embed.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedInput {
    /// Tokenized with the model's special tokens (`[CLS] ... [SEP]`, a decoder's EOS).
    Text(String),
    /// Token ids, sent to the model as they are.
    Tokens(Vec<u32>),
}

/// An embedding request, whatever API it came from.
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    /// Alias, `owner/name` repo id, or model folder.
    pub model: String,
    /// At least one; none empty.
    pub inputs: Vec<EmbedInput>,
    /// Cut an input longer than the model takes to its limit (Ollama's `truncate`, on by
    /// default); false refuses it with [`ServiceError::InputTooLong`] (OpenAI's way).
    pub truncate: bool,
    /// The API has a `truncate` switch: the refusal says to turn it on.
    pub truncate_switch: bool,
    /// Keep each vector's first N values (renormalized when the model's vectors are unit
    /// length: Matryoshka-trained models like Qwen3-Embedding are meant to be cut so).
    pub dimensions: Option<usize>,
    /// None: the daemon's default.
    pub keep_alive: Option<KeepAlive>,
    /// Which of the model's named prompts goes before each text input.
    pub prompt: PromptChoice,
}

/// The prompt a sentence-transformers model puts before an input (its
/// `config_sentence_transformers.json` names them: Qwen3-Embedding's "query" instruction).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum PromptChoice {
    /// The model's `default_prompt_name`, if it has one (most have none: the text as given).
    #[default]
    Default,
    /// This name; one the model lacks is a 400 listing those it has.
    Named(String),
    /// This name where the model has it, else none (`input_type`: a model without a query
    /// prompt embeds queries as they are).
    IfPresent(String),
}

/// The answer: one vector per input, in the request's order.
#[derive(Debug, Clone)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// The tokens the model read, all inputs together (after any cut).
    pub prompt_tokens: usize,
    pub load_duration: Duration,
    pub total_duration: Duration,
}

impl Service {
    /// Vectors for the request's inputs. The model's lease is held until they are computed;
    /// dropping the future (the client hung up) cancels what is not computed yet.
    pub async fn embed(&self, req: EmbedRequest) -> Result<Embeddings, ServiceError> {
        let started = Instant::now();
        if self.is_shutting_down() {
            return Err(ServiceError::ShuttingDown);
        }
        if req.inputs.is_empty() {
            return Err(ServiceError::BadRequest(
                "`input` is empty: send at least one text to embed".into(),
            ));
        }
        if let Some(asked @ 0) = req.dimensions {
            return Err(ServiceError::Dimensions { asked, size: None });
        }
        let held = self
            .hold(&req.model, req.keep_alive, ModelKind::Embedding, started)
            .await?;
        let (loaded, load_duration) = (held.loaded.clone(), held.load_duration);
        let (truncate, switch) = (req.truncate, req.truncate_switch);
        let engine_side = loaded.clone();
        let inputs = req.inputs;
        let prompt = req.prompt;
        let ids = tokio::task::spawn_blocking(move || {
            let prefix = prompt_text(&engine_side.engine, &prompt)?;
            tokenize(
                &engine_side.engine,
                inputs,
                prefix.as_deref(),
                truncate,
                switch,
            )
        })
        .await
        .map_err(|e| ServiceError::Internal(format!("tokenizing the inputs failed: {e}")))??;
        let prompt_tokens = ids.iter().map(Vec::len).sum();
        let answer = loaded.engine.embed(ids)?;
        let vectors = self.engine_answer(answer).await?;
        drop(held);
        let vectors = match req.dimensions {
            Some(d) => shorten(vectors, d)?,
            None => vectors,
        };
        Ok(Embeddings {
            vectors,
            prompt_tokens,
            load_duration,
            total_duration: started.elapsed(),
        })
    }

    /// Loads an embedding model without embedding anything (Ollama's `/api/embed` with no
    /// input); a language model is refused as [`Service::embed`] refuses it.
    pub async fn load_embedder(
        &self,
        model: &str,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Duration, ServiceError> {
        let held = self
            .hold(model, keep_alive, ModelKind::Embedding, Instant::now())
            .await?;
        Ok(held.loaded.load_duration)
    }
}

/// The text to put before each text input, as `choice` picks it from the model's prompts.
fn prompt_text(engine: &Engine, choice: &PromptChoice) -> Result<Option<String>, ServiceError> {
    let prompts = engine.embed_prompts();
    Ok(match choice {
        PromptChoice::Default => engine.default_embed_prompt().map(String::from),
        PromptChoice::IfPresent(name) => prompts.get(name).cloned(),
        PromptChoice::Named(name) => match prompts.get(name) {
            Some(p) => Some(p.clone()),
            None => {
                return Err(ServiceError::BadRequest(if prompts.is_empty() {
                    format!("`prompt_name` {name:?}: this model names no prompts")
                } else {
                    format!(
                        "`prompt_name` {name:?} is not one of this model's prompts: {}",
                        prompts.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                }))
            }
        },
    })
}

/// Each input's token ids: text as sentence-transformers prepares it (the model's special
/// tokens, lowercased where its config says), ids as sent; at most the model's limit each (cut
/// when `truncate`, else refused).
fn tokenize(
    engine: &Engine,
    inputs: Vec<EmbedInput>,
    prefix: Option<&str>,
    truncate: bool,
    truncate_switch: bool,
) -> Result<Vec<Vec<u32>>, ServiceError> {
    let limit = engine.embed_limit();
    let mut out = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.into_iter().enumerate() {
        let ids = match input {
            EmbedInput::Text(t) if t.is_empty() => {
                return Err(ServiceError::BadRequest(format!(
                    "input[{index}] is an empty string; every input needs some text"
                )))
            }
            EmbedInput::Tokens(ids) if ids.is_empty() => {
                return Err(ServiceError::BadRequest(format!(
                    "input[{index}] is an empty list of token ids"
                )))
            }
            EmbedInput::Text(t) => {
                // sentence-transformers puts the prompt before the text, then tokenizes.
                let t = match prefix {
                    Some(p) => format!("{p}{t}"),
                    None => t,
                };
                engine
                    .embed_tokens(&t, truncate)
                    .map_err(|e| {
                        ServiceError::BadRequest(format!("tokenizing input[{index}]: {e}"))
                    })?
                    .0
            }
            EmbedInput::Tokens(mut ids) => {
                if let Some(limit) = limit.filter(|_| truncate) {
                    ids.truncate(limit);
                }
                ids
            }
        };
        if ids.is_empty() {
            return Err(ServiceError::BadRequest(format!(
                "input[{index}] has no tokens for this model"
            )));
        }
        if let Some(limit) = limit.filter(|&l| ids.len() > l) {
            return Err(ServiceError::InputTooLong {
                index,
                tokens: ids.len(),
                limit,
                truncatable: truncate_switch,
            });
        }
        out.push(ids);
    }
    Ok(out)
}

/// Each vector's first `dims` values; unit vectors (the model normalizes) stay unit.
fn shorten(vectors: Vec<Vec<f32>>, dims: usize) -> Result<Vec<Vec<f32>>, ServiceError> {
    let size = vectors.first().map_or(0, Vec::len);
    if dims > size {
        return Err(ServiceError::Dimensions {
            asked: dims,
            size: Some(size),
        });
    }
    Ok(vectors
        .into_iter()
        .map(|mut v| {
            // The model's pooling is not visible from here, but its answer is: a model that
            // normalizes gives unit vectors, and no other gives one but by chance.
            let unit = (norm(&v) - 1.0).abs() < 1e-3;
            v.truncate(dims);
            if unit {
                normalize(&mut v);
            }
            v
        })
        .collect())
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt() as f32
}

/// Scales `v` to unit length (a zero vector stays zero), as sentence-transformers' Normalize.
pub fn normalize(v: &mut [f32]) {
    let n = norm(v).max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortened_unit_vectors_stay_unit_and_others_are_only_cut() {
        let mut unit = vec![3.0f32, 4.0, 12.0];
        normalize(&mut unit);
        let raw = vec![3.0f32, 4.0, 12.0];
        let out = shorten(vec![unit, raw], 2).expect("shorten");
        assert!((norm(&out[0]) - 1.0).abs() < 1e-6, "{:?}", out[0]);
        assert!((out[0][0] - 0.6).abs() < 1e-6, "{:?}", out[0]);
        assert_eq!(out[1], vec![3.0, 4.0]);
        assert!(matches!(
            shorten(vec![vec![1.0; 3]], 4),
            Err(ServiceError::Dimensions {
                asked: 4,
                size: Some(3)
            })
        ));
    }
}
