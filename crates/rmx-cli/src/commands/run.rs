//! `rmx run <model> [prompt]`: one prompt, streamed answer, exit.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_engine::{ChatPrompt, Engine, Event, GenerateRequest, SamplingParams};
use rmx_text::reasoning::ReasoningParser;
use serde_json::{json, Map, Value};

use crate::cli::{GenArgs, RunArgs};
use crate::output::StreamPrinter;

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let prompt = match args.prompt {
        Some(p) => p,
        None => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("reading the prompt from standard input")?;
            s
        }
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty: pass it as an argument or on standard input");
    }
    let engine = Engine::load(&args.model).with_context(|| format!("loading {}", args.model.display()))?;
    let (tokens, starts_in_reasoning) = prompt_tokens(&engine, &args.gen, &prompt)?;
    let mut req = GenerateRequest::new(tokens, args.gen.max_tokens);
    req.sampling = SamplingParams {
        temperature: args.gen.temperature,
        top_p: args.gen.top_p,
        top_k: args.gen.top_k,
        seed: args.gen.seed,
        ..SamplingParams::default()
    };
    let thinks = !args.gen.raw && engine.render_chat(&chat(&args.gen, "x")).is_ok_and(|_| template_thinks(&engine));
    let parser = if thinks {
        ReasoningParser::think_tags(starts_in_reasoning)
    } else {
        ReasoningParser::disabled()
    };
    let mut printer = StreamPrinter::new(parser, !args.gen.no_think);
    let mut rx = engine.generate(req)?;
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { text, .. } => printer.push(&text)?,
            Event::Done { text, usage, timings, .. } => {
                printer.push(&text)?;
                printer.finish()?;
                if args.gen.verbose {
                    eprintln!(
                        "prompt: {} tokens, {:.1} tok/s | decode: {} tokens, {:.1} tok/s | ttft {:.0} ms | peak memory {:.1} MB",
                        usage.prompt_tokens,
                        timings.prefill_tps(usage.prompt_tokens),
                        usage.completion_tokens,
                        timings.decode_tps(usage.completion_tokens),
                        timings.time_to_first_token.as_secs_f64() * 1e3,
                        timings.peak_memory as f64 / 1e6
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            Event::Error(e) => bail!("generation failed: {e}"),
        }
    }
    bail!("the engine stopped before finishing the answer")
}

fn chat(gen: &GenArgs, prompt: &str) -> ChatPrompt {
    let mut messages = Vec::new();
    if let Some(s) = &gen.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let mut kwargs = Map::new();
    if gen.think || gen.no_think {
        kwargs.insert("enable_thinking".into(), Value::Bool(gen.think && !gen.no_think));
    }
    ChatPrompt {
        messages: Value::Array(messages),
        tools: None,
        add_generation_prompt: true,
        kwargs,
    }
}

fn template_thinks(engine: &Engine) -> bool {
    engine.tokenizer().chat_template().is_some_and(|t| t.contains("<think>"))
}

/// The prompt's tokens, and whether the rendered prompt already opened a `<think>` block.
fn prompt_tokens(engine: &Engine, gen: &GenArgs, prompt: &str) -> Result<(Vec<u32>, bool)> {
    if gen.raw || !engine.has_chat_template() {
        return Ok((engine.raw_tokens(prompt)?, false));
    }
    let c = chat(gen, prompt);
    let rendered = engine.render_chat(&c)?;
    let opens = rendered.trim_end().ends_with("<think>");
    Ok((engine.chat_tokens(&c)?, opens))
}
