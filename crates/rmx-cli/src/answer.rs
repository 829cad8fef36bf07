//! One answer streamed from the daemon and printed as it comes, for `rmx run` and `rmx chat`:
//! the request built from the generation flags, and the stream read into the printer.

use std::future::Future;

use anyhow::{bail, Result};
use rmx_api::{ChatRequest, Client, DoneStats, GenerateRequest, Message, Options};

use crate::cli::GenArgs;
use crate::daemon;
use crate::output::StreamPrinter;

pub fn options(gen: &GenArgs) -> Options {
    Options {
        temperature: Some(gen.temperature),
        top_p: Some(gen.top_p),
        top_k: Some(gen.top_k),
        seed: gen.seed,
        num_predict: Some(gen.max_tokens as i64),
        thinking_budget: gen.thinking_budget,
        rmx: rmx_api::extensions::RmxFields {
            speculative: gen.spec.speculative.clone(),
            draft_tokens: gen.spec.draft_tokens.map(usize::from),
            ..kv_fields(&gen.kv)
        },
        ..Options::default()
    }
}

/// The KV-cache flags as the API's fields (the rest at their defaults).
pub fn kv_fields(kv: &crate::cli::KvArgs) -> rmx_api::extensions::RmxFields {
    match kv.settings() {
        Some((bits, group, start)) => rmx_api::extensions::RmxFields {
            kv_bits: Some(bits),
            kv_group_size: Some(group),
            kv_quant_start: Some(start),
            ..Default::default()
        },
        None => Default::default(),
    }
}

pub fn think(gen: &GenArgs) -> Option<rmx_api::Think> {
    if gen.no_think {
        Some(rmx_api::Think::On(false))
    } else if gen.think {
        Some(rmx_api::Think::On(true))
    } else {
        None
    }
}

pub fn chat_request(model: &str, messages: Vec<Message>, gen: &GenArgs) -> ChatRequest {
    ChatRequest {
        model: model.to_string(),
        messages,
        think: think(gen),
        keep_alive: gen.keep_alive,
        options: Some(options(gen)),
        ..ChatRequest::default()
    }
}

/// One answer as it was printed.
#[derive(Debug, Default)]
pub struct Turn {
    pub content: String,
    pub thinking: String,
    pub stats: Option<DoneStats>,
    /// Stopped by the user (Ctrl-C) before the end.
    pub cancelled: bool,
}

/// Streams a chat answer to the printer until it ends or `cancel` completes; hanging up
/// cancels the generation in the daemon.
pub async fn chat(
    client: &Client,
    req: &ChatRequest,
    printer: &mut StreamPrinter,
    cancel: impl Future<Output = ()>,
) -> Result<Turn> {
    let mut stream = client.chat(req).await.map_err(daemon::broken_off)?;
    let mut turn = Turn::default();
    tokio::pin!(cancel);
    loop {
        let chunk = tokio::select! {
            c = stream.next() => c,
            _ = &mut cancel => {
                turn.cancelled = true;
                break;
            }
        };
        let Some(chunk) = chunk else {
            bail!("the rmx daemon ended the answer early");
        };
        let chunk = chunk.map_err(daemon::broken_off)?;
        if let Some(t) = &chunk.message.thinking {
            printer.reasoning(t)?;
            turn.thinking.push_str(t);
        }
        printer.content(&chunk.message.content)?;
        turn.content.push_str(&chunk.message.content);
        for call in &chunk.message.tool_calls {
            let text = format!(
                "[tool call: {} {}]",
                call.function.name, call.function.arguments
            );
            printer.content(&text)?;
        }
        if chunk.done {
            turn.stats = chunk.stats;
            break;
        }
    }
    printer.finish()?;
    Ok(turn)
}

pub async fn generate(
    client: &Client,
    req: &GenerateRequest,
    printer: &mut StreamPrinter,
) -> Result<Turn> {
    let mut stream = client.generate(req).await.map_err(daemon::broken_off)?;
    let mut turn = Turn::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(daemon::broken_off)?;
        if let Some(t) = &chunk.thinking {
            printer.reasoning(t)?;
        }
        printer.content(&chunk.response)?;
        turn.content.push_str(&chunk.response);
        if chunk.done {
            turn.stats = chunk.stats;
            printer.finish()?;
            return Ok(turn);
        }
    }
    bail!("the rmx daemon ended the answer early")
}
