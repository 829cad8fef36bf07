//! The engine thread of a reranker that judges by its next token (Qwen3-Reranker): each
//! (query, document) pair is written into the model's judging prompt, the prompts run as
//! left-padded batches like embedding inputs, and a document's score is the probability of
//! "yes" against "no" at the prompt's end — Qwen3-Reranker's own recipe:
//! `exp(log_softmax([logit_no, logit_yes])[1])`.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rmx_mlx::{concatenate, Array, Dtype};
use rmx_models::{CausalLm, LayerCache};
use rmx_text::tokenizer::Tokenizer;
use tokio::sync::oneshot;

use crate::engine::Command;
use crate::error::{EngineError, Result};
use crate::load::Load;

/// Qwen3-Reranker's judging prompt, around `<Instruct>: ..\n<Query>: ..\n<Document>: ..`.
const PREFIX: &str = "<|im_start|>system\nJudge whether the Document meets the requirements \
    based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \
    \"no\".<|im_end|>\n<|im_start|>user\n";
const SUFFIX: &str = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
/// The instruction Qwen3-Reranker's model card uses when the caller gives none.
pub const DEFAULT_INSTRUCTION: &str =
    "Given a web search query, retrieve relevant passages that answer the query";
/// The longest prompt the model card's code builds (its `max_length`).
pub const MAX_PROMPT: usize = 8192;

/// A rerank request on its way to the engine thread: one prompt per document.
pub(crate) struct RerankJob {
    pub prompts: Vec<Vec<u32>>,
    pub yes: u32,
    pub no: u32,
    pub reply: oneshot::Sender<std::result::Result<Vec<f32>, String>>,
}

/// The prompt's tokens for one document, as the model card's code makes them: the prefix,
/// the pair text (cut from its end so that the whole stays within `max`) and the suffix, each
/// encoded without special tokens. Also whether the pair was cut.
pub fn prompt(
    tokenizer: &Tokenizer,
    instruction: &str,
    query: &str,
    document: &str,
    max: usize,
) -> Result<(Vec<u32>, bool)> {
    let enc = |t: &str| tokenizer.encode(t, false).map_err(EngineError::Encode);
    let (pre, suf) = (enc(PREFIX)?, enc(SUFFIX)?);
    let mut pair = enc(&format!(
        "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
    ))?;
    let room = max.saturating_sub(pre.len() + suf.len());
    let cut = pair.len() > room;
    pair.truncate(room);
    Ok(([pre, pair, suf].concat(), cut))
}

/// The ids of the answer tokens "yes" and "no".
pub fn answer_ids(tokenizer: &Tokenizer) -> Result<(u32, u32)> {
    match (tokenizer.token_to_id("yes"), tokenizer.token_to_id("no")) {
        (Some(y), Some(n)) => Ok((y, n)),
        _ => Err(EngineError::Invalid(
            "this reranker's vocabulary has no \"yes\" and \"no\" tokens to score with".into(),
        )),
    }
}

/// Scores of one batch of prompts.
fn score(model: &dyn CausalLm, prompts: &[&[u32]], yes: u32, no: u32) -> Result<Vec<f32>> {
    let batches = model.make_cache().iter().all(LayerCache::is_trimmable);
    let last = if batches || prompts.len() == 1 {
        last_hidden(model, prompts)?
    } else {
        let rows = prompts
            .iter()
            .map(|p| last_hidden(model, &[p]))
            .collect::<Result<Vec<_>>>()?;
        concatenate(&rows.iter().collect::<Vec<_>>(), 0)?
    };
    let logits = model.lm_head(&last)?;
    let pick = Array::from_slice(&[no as i32, yes as i32], &[2])?;
    let two = logits.take(&pick, -1)?.astype(Dtype::F32)?;
    let lp = two.subtract(&two.logsumexp(&[-1], true)?)?;
    let flat = lp.exp()?.to_vec::<f32>()?;
    Ok(flat.chunks_exact(2).map(|c| c[1]).collect())
}

/// The final-normed hidden state of each prompt's last token, `[B, hidden]`.
fn last_hidden(model: &dyn CausalLm, prompts: &[&[u32]]) -> Result<Array> {
    let hidden = rmx_models::embed::forward_left_padded(model, prompts)?;
    let (b, l, h) = (hidden.dim(0), hidden.dim(1), hidden.dim(2));
    Ok(hidden.slice_axis(1, l - 1, l)?.reshape(&[b, h])?)
}

fn run_job(model: &dyn CausalLm, job: &RerankJob) -> std::result::Result<Vec<f32>, String> {
    crate::embed::in_batches(
        &job.prompts,
        || job.reply.is_closed(),
        |rows| score(model, rows, job.yes, job.no).map_err(|e| e.to_string()),
    )
}

/// The loop of a reranker's thread, until the last handle is dropped.
pub(crate) fn serve(model: &dyn CausalLm, rx: Receiver<Command>, load: &Arc<Load>) {
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Command::Rerank(job) => {
                let busy = load.busy();
                let result = run_job(model, &job);
                busy.release();
                let _ = job.reply.send(result);
            }
            Command::Embed(job) => {
                let _ = job.reply.send(Err(EngineError::NotEmbedding.to_string()));
            }
            // Measurements time a generating model's steps.
            Command::Probe(run) => run(None),
            Command::Draft(_, reply) => {
                let _ = reply.send(Err(EngineError::NotGenerative));
            }
            Command::Generate(_, tx, _) => {
                let _ = tx.send(crate::request::Event::Error(
                    EngineError::NotGenerative.to_string(),
                ));
            }
        }
    }
}
