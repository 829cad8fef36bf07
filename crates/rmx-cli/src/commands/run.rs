//! `rmx run <model> [prompt]`: one prompt, the answer streamed from the daemon, exit. Without a
//! prompt, standard input is the prompt when piped, and a chat starts on a terminal.

use std::future::Future;
use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_api::{ChatRequest, Client, DoneStats, GenerateRequest, Message, Options};

use crate::cli::{GenArgs, RunArgs};
use crate::daemon;
use crate::output::{print_stats, StreamPrinter};

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let prompt = match args.prompt {
        Some(p) => p,
        None if std::io::stdin().is_terminal() => {
            return super::chat::repl(args.model, args.gen);
        }
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the prompt from standard input")?;
            s
        }
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty: pass it as an argument or on standard input");
    }
    daemon::runtime()?.block_on(async {
        let client = daemon::connect().await?;
        let mut printer = StreamPrinter::new(!args.gen.no_think);
        let turn = if args.gen.raw {
            let req = GenerateRequest {
                model: args.model.clone(),
                prompt,
                raw: true,
                keep_alive: args.gen.keep_alive,
                options: Some(options(&args.gen)),
                ..GenerateRequest::default()
            };
            generate(&client, &req, &mut printer).await?
        } else {
            let mut messages = Vec::new();
            if let Some(s) = &args.gen.system {
                messages.push(Message::new("system", s.clone()));
            }
            messages.push(Message::new("user", prompt));
            let req = chat_request(&args.model, messages, &args.gen);
            chat(&client, &req, &mut printer, std::future::pending()).await?
        };
        if args.gen.verbose {
            if let Some(stats) = &turn.stats {
                print_stats(stats);
            }
            print_layers(&client, &args.model).await;
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `-v`: the model's layer kinds and how a decode step runs each (rmx's CUDA layer kernel or
/// MLX's ops), from the daemon's list of loaded models. Quiet when it cannot tell.
async fn print_layers(client: &Client, model: &str) {
    let Ok(ps) = client.ps().await else {
        return;
    };
    let Some(m) = ps
        .models
        .iter()
        .find(|m| m.name == model || m.path == model)
    else {
        return;
    };
    if !m.layers.is_empty() {
        eprintln!("layers: {}", m.layers.join(", "));
    }
}

pub fn options(gen: &GenArgs) -> Options {
    Options {
        temperature: Some(gen.temperature),
        top_p: Some(gen.top_p),
        top_k: Some(gen.top_k),
        seed: gen.seed,
        num_predict: Some(gen.max_tokens as i64),
        ..Options::default()
    }
}

pub fn think(gen: &GenArgs) -> Option<bool> {
    if gen.no_think {
        Some(false)
    } else if gen.think {
        Some(true)
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

async fn generate(
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
