//! `rmx run <model> [prompt]`: one prompt, the answer streamed from the daemon, exit. Without a
//! prompt, standard input is the prompt when piped, and a chat starts on a terminal. `--image`
//! files go with the prompt (or the chat's first message).

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_api::{Client, GenerateRequest, Message};

use crate::answer::{chat, chat_request, generate, options};
use crate::cli::RunArgs;
use crate::daemon;
use crate::images;
use crate::output::{print_stats, StreamPrinter};

pub fn run(args: RunArgs) -> Result<ExitCode> {
    // Read before anything else, so a wrong path is said before a daemon starts or a model
    // loads.
    let images = images::read_all(&args.images)?;
    let prompt = match args.prompt {
        Some(p) => p,
        None if std::io::stdin().is_terminal() => {
            return super::chat::repl(args.model, args.gen, images);
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
            messages.push(Message {
                images: images.into_iter().map(|i| i.base64).collect(),
                ..Message::new("user", prompt)
            });
            let req = chat_request(&args.model, messages, &args.gen);
            chat(&client, &req, &mut printer, std::future::pending()).await?
        };
        if args.gen.verbose {
            if let Some(stats) = &turn.stats {
                print_stats(stats);
            }
            print_layers(&client, &args.model).await;
            print_kv(&args.gen.kv);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `-v` with --kv-bits: how the cache was stored and read. Per answer, so not in the layer list
/// (that is the loaded model's).
fn print_kv(kv: &crate::cli::KvArgs) {
    if let Some((bits, group, start)) = kv.settings() {
        eprintln!(
            "kv cache: {bits}-bit in groups of {group} from position {start}; full-attention \
             layers attend through MLX's quantized matmul (not the fast path's kernels), \
             sliding windows and recurrent states unquantized"
        );
    }
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
