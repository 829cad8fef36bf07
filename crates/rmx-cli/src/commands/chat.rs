//! `rmx chat [model]` (and `rmx run <model>` on a terminal): the interactive chat.
//!
//! Lines are read with rustyline (history in the rmx home, `"""` blocks and trailing `\` for
//! multi-line input); each answer streams from the daemon. Ctrl-C stops the answer and keeps
//! the chat (the terminal turns it into SIGINT while an answer streams, which the tokio handler
//! catches; at the prompt rustyline reads it as a key and clears the line); Ctrl-D leaves.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_api::{Client, Message};
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;
use serde::{Deserialize, Serialize};

use crate::answer::{chat, chat_request};
use crate::cli::{ChatArgs, GenArgs};
use crate::daemon;
use crate::images::{self, Image};
use crate::output::{print_stats, StreamPrinter};

const HELP: &str = "\
Commands:
  /help                 this help
  /system <text>        set the system message (empty: remove it)
  /clear                forget the conversation (and any attached images)
  /image <file>         attach an image (PNG, JPEG, WebP, GIF) to your next message;
                        vision models only (Gemma 3 4B+, Mistral Small 3.x); up to 8 in a conversation
  /image                list the attached images; /image clear drops them
  /save <file>          save the conversation (JSON)
  /load <file>          load a saved conversation
  /think on|off         ask the model to think first, or not (off also hides reasoning)
  /set <param> <value>  temperature, top_p, max_tokens, seed
  /show                 what the model is
  /exit                 leave (also Ctrl-D)
Multi-line input: start and end with \"\"\", or end lines with \\.
Ctrl-C stops an answer.";

pub fn run(args: ChatArgs) -> Result<ExitCode> {
    repl(args.model, args.gen, Vec::new())
}

/// A saved conversation (`/save`, `/load`).
#[derive(Debug, Serialize, Deserialize)]
struct Session {
    model: String,
    #[serde(default)]
    system: Option<String>,
    messages: Vec<Message>,
}

struct Chat {
    client: Client,
    model: String,
    gen: GenArgs,
    messages: Vec<Message>,
    /// Images for the next user message (`/image`, `rmx run --image` without a prompt).
    attached: Vec<Image>,
}

/// The chat; `attached` images go with the first message.
pub fn repl(model: String, gen: GenArgs, attached: Vec<Image>) -> Result<ExitCode> {
    let rt = daemon::runtime()?;
    let client = rt.block_on(async {
        let client = daemon::connect().await?;
        // Load now, so a wrong name or a model that does not fit is said before the first prompt.
        client
            .load(&model, gen.keep_alive)
            .await
            .map_err(daemon::broken_off)?;
        Ok::<_, anyhow::Error>(client)
    })?;
    let mut chat = Chat {
        client,
        model,
        gen,
        messages: Vec::new(),
        attached,
    };
    let mut editor = DefaultEditor::new().context("starting the line editor")?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!(
        "Chatting with {}. /help for commands, Ctrl-D to leave.",
        chat.model
    );
    if !chat.attached.is_empty() {
        chat.list_attached();
    }
    loop {
        let input = match read_input(&mut editor) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("reading input"),
        };
        let _ = editor.add_history_entry(input.as_str());
        if let Some(h) = &history {
            let _ = editor.save_history(h);
        }
        let trimmed = input.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(command) = trimmed.strip_prefix('/') {
            match chat.command(command, &rt) {
                Ok(true) => continue,
                Ok(false) => break,
                Err(e) => {
                    eprintln!("{e:#}");
                    continue;
                }
            }
        }
        if let Err(e) = rt.block_on(chat.ask(input)) {
            eprintln!("rmx: {e:#}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn history_path() -> Option<PathBuf> {
    let home = rmx_api::rmx_home()?;
    std::fs::create_dir_all(&home).ok()?;
    Some(home.join("history"))
}

/// One input: a line, a `"""` block, or lines joined by trailing `\`. Ok(None): Ctrl-C at the
/// prompt (the line is dropped).
fn read_input(editor: &mut DefaultEditor) -> Result<Option<String>, ReadlineError> {
    let first = match editor.readline(">>> ") {
        Ok(l) => l,
        Err(ReadlineError::Interrupted) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Some(rest) = first.trim_start().strip_prefix("\"\"\"") {
        if let Some(body) = rest.strip_suffix("\"\"\"") {
            return Ok(Some(body.to_string()));
        }
        let mut text = rest.to_string();
        loop {
            let line = match editor.readline("... ") {
                Ok(l) => l,
                Err(ReadlineError::Interrupted) => return Ok(None),
                Err(e) => return Err(e),
            };
            if let Some(last) = line.trim_end().strip_suffix("\"\"\"") {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(last);
                return Ok(Some(text));
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&line);
        }
    }
    let mut text = first;
    while text.ends_with('\\') {
        text.pop();
        text.push('\n');
        match editor.readline("... ") {
            Ok(l) => text.push_str(&l),
            Err(ReadlineError::Interrupted) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(text))
}

impl Chat {
    async fn ask(&mut self, text: String) -> Result<()> {
        let attached = std::mem::take(&mut self.attached);
        self.messages.push(Message {
            images: attached.iter().map(|i| i.base64.clone()).collect(),
            ..Message::new("user", text)
        });
        let mut messages = Vec::new();
        if let Some(s) = &self.gen.system {
            messages.push(Message::new("system", s.clone()));
        }
        messages.extend(self.messages.iter().cloned());
        let req = chat_request(&self.model, messages, &self.gen);
        let mut printer = StreamPrinter::new(!self.gen.no_think);
        let cancel = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let turn = match chat(&self.client, &req, &mut printer, cancel).await {
            Ok(t) => t,
            Err(e) => {
                // The question stays unanswered: take it back so it can be asked again. Its
                // images go too: the daemon's refusal is most often about them (a text-only
                // model, a file that is no image), and resending them would fail again.
                self.messages.pop();
                if !attached.is_empty() {
                    return Err(anyhow::anyhow!(
                        "{e:#}\n(the message and its {} were not kept: /image attaches again)",
                        count(attached.len())
                    ));
                }
                return Err(e);
            }
        };
        if turn.cancelled {
            eprintln!("(stopped)");
        }
        self.messages.push(Message::new("assistant", turn.content));
        if self.gen.verbose {
            if let Some(stats) = &turn.stats {
                print_stats(stats);
            }
        }
        Ok(())
    }

    /// Runs a slash command; Ok(false) leaves the chat.
    fn command(&mut self, line: &str, rt: &tokio::runtime::Runtime) -> Result<bool> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        match name {
            "help" | "?" => println!("{HELP}"),
            "exit" | "bye" | "quit" => return Ok(false),
            "system" => {
                self.gen.system = (!arg.is_empty()).then(|| arg.to_string());
                println!(
                    "{}",
                    if arg.is_empty() {
                        "System message removed."
                    } else {
                        "System message set."
                    }
                );
            }
            "clear" => {
                self.messages.clear();
                self.attached.clear();
                println!("Conversation cleared.");
            }
            "image" => self.image(arg)?,
            "save" => {
                if arg.is_empty() {
                    bail!("usage: /save <file>");
                }
                let session = Session {
                    model: self.model.clone(),
                    system: self.gen.system.clone(),
                    messages: self.messages.clone(),
                };
                let json = serde_json::to_string_pretty(&session)?;
                std::fs::write(arg, json).with_context(|| format!("writing {arg}"))?;
                println!("Saved {} messages to {arg}.", self.messages.len());
            }
            "load" => {
                if arg.is_empty() {
                    bail!("usage: /load <file>");
                }
                let text =
                    std::fs::read_to_string(arg).with_context(|| format!("reading {arg}"))?;
                let session: Session = serde_json::from_str(&text)
                    .with_context(|| format!("{arg} is not a saved rmx chat"))?;
                self.messages = session.messages;
                self.gen.system = session.system;
                println!("Loaded {} messages from {arg}.", self.messages.len());
            }
            "think" => match arg {
                "on" => {
                    self.gen.think = true;
                    self.gen.no_think = false;
                    println!("Thinking on.");
                }
                "off" => {
                    self.gen.think = false;
                    self.gen.no_think = true;
                    println!("Thinking off.");
                }
                _ => bail!("usage: /think on|off"),
            },
            "set" => self.set(arg)?,
            "show" => {
                let show = rt
                    .block_on(self.client.show(&self.model))
                    .map_err(daemon::broken_off)?;
                let info = &show.info;
                let field = |k: &str| match &info[k] {
                    serde_json::Value::Null => "-".to_string(),
                    serde_json::Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                println!("  model          {}", show.model);
                println!("  path           {}", field("path"));
                println!("  architecture   {}", field("architecture"));
                println!("  parameters     {}", field("parameters"));
                println!("  quantization   {}", field("quantization"));
                println!("  context        {}", field("context_length"));
                println!("  capabilities   {}", show.capabilities.join(", "));
                println!(
                    "  loaded         {}",
                    if show.loaded { "yes" } else { "no" }
                );
            }
            other => bail!("unknown command /{other}; /help lists them"),
        }
        Ok(true)
    }

    /// `/image <file>` attaches a file to the next message; `/image` lists what is attached,
    /// `/image clear` drops it.
    fn image(&mut self, arg: &str) -> Result<()> {
        match arg {
            "" => self.list_attached(),
            "clear" => {
                let n = self.attached.len();
                self.attached.clear();
                println!("Dropped {}.", count(n));
            }
            file => {
                // The daemon counts every image of the conversation, which is resent each turn.
                let sent = self.messages.iter().map(|m| m.images.len()).sum::<usize>();
                if sent + self.attached.len() >= images::MAX {
                    bail!(
                        "the conversation holds {} (sent and attached), the most one request \
                         takes; /clear starts a new conversation",
                        count(sent + self.attached.len())
                    );
                }
                let image = images::read(&expand_home(unquote(file)))?;
                let total = self
                    .messages
                    .iter()
                    .flat_map(|m| &m.images)
                    .chain(self.attached.iter().map(|i| &i.base64))
                    .map(String::len)
                    .sum::<usize>();
                images::check_size(total + image.base64.len())?;
                self.attached.push(image);
                self.list_attached();
            }
        }
        Ok(())
    }

    fn list_attached(&self) {
        if self.attached.is_empty() {
            println!("No images attached. /image <file> attaches one to your next message.");
            return;
        }
        let names: Vec<String> = self
            .attached
            .iter()
            .map(|i| i.path.display().to_string())
            .collect();
        println!(
            "Attached to your next message: {} ({}).",
            names.join(", "),
            count(names.len())
        );
    }

    fn set(&mut self, arg: &str) -> Result<()> {
        let Some((param, value)) = arg.split_once(char::is_whitespace) else {
            bail!("usage: /set <temperature|top_p|max_tokens|seed> <value>");
        };
        let value = value.trim();
        let bad = || format!("`{value}` is not a valid {param}");
        match param {
            "temperature" => self.gen.temperature = value.parse().with_context(bad)?,
            "top_p" => self.gen.top_p = value.parse().with_context(bad)?,
            "max_tokens" => self.gen.max_tokens = value.parse().with_context(bad)?,
            "seed" => self.gen.seed = Some(value.parse().with_context(bad)?),
            _ => bail!("unknown parameter `{param}`: temperature, top_p, max_tokens, seed"),
        }
        println!("Set {param} to {value}.");
        Ok(())
    }
}

/// "1 image", "3 images".
fn count(n: usize) -> String {
    if n == 1 {
        "1 image".into()
    } else {
        format!("{n} images")
    }
}

/// A path as typed or dropped into a terminal, which may quote it when it has spaces.
fn unquote(arg: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = arg.strip_prefix(q).and_then(|a| a.strip_suffix(q)) {
            return inner;
        }
    }
    arg
}

/// `~/` at the start of a path is the home folder, as in a shell (no shell reads these lines).
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}
