//! The command line, declared once: help, man pages and completions are generated from it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use rmx_settings::EnvVars;

#[derive(Debug, Parser)]
#[command(
    name = "rmx",
    version,
    about = "Run large language models locally on MLX",
    long_about = "Run large language models locally on MLX.\n\n\
        Models are MLX-format folders (config.json, *.safetensors, tokenizer.json).",
    after_long_help = rmx_settings::help_text(),
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate an answer to one prompt and exit; without a prompt on a terminal, chat.
    ///
    /// The prompt goes through the model's chat template unless --raw is given. Without a
    /// prompt argument, the prompt is read from standard input when it is piped, and an
    /// interactive chat starts when it is a terminal. Runs in the daemon (started if needed).
    #[command(after_help = "Examples:\n  \
        rmx run ./my-mlx-model \"Why is the sky blue?\"\n  \
        rmx run ~/models/gemma-3-4b-it --image photo.jpg \"What is in this picture?\"\n  \
        rmx run ~/models/gemma-3-4b-it --image a.png --image b.png \"What changed?\"")]
    Run(RunArgs),
    /// Chat with a model interactively (type /help for commands).
    Chat(ChatArgs),
    /// Turn texts into vectors with an embedding model, one JSON array per line.
    ///
    /// Each TEXT is one input; without TEXT, each non-empty line of standard input is one.
    /// The vectors are printed in the inputs' order, one JSON array per line (JSON Lines);
    /// --json prints the daemon's whole OpenAI-shaped answer instead (`data`, `usage`). An
    /// input longer than the model takes is an error naming it. Runs in the daemon (started
    /// if needed).
    #[command(after_help = "Examples:\n  \
        rmx embed qwen3-0.6b-embedding-bf16 \"What is MLX?\" \"An array framework\"\n  \
        rmx embed qwen3-0.6b-embedding-bf16 --query \"which framework runs on Apple silicon?\"\n  \
        cut -f2 docs.tsv | rmx embed ~/models/Qwen3-Embedding-0.6B --dimensions 256 > vectors.jsonl\n  \
        rmx embed ~/models/bge-m3 --json \"one text\"")]
    Embed(EmbedArgs),
    /// Run the daemon in the foreground: the HTTP API on TCP and the CLI's Unix socket.
    ///
    /// Other commands start a daemon in the background when none is running; run this to see
    /// its log, choose its address, or run it under a service manager.
    Serve(ServeArgs),
    /// List the models loaded in the daemon.
    Ps(PsArgs),
    /// Unload a model from the daemon.
    Stop(StopArgs),
    /// Print shell completions, or regenerate the checked-in completions and man pages.
    Completions(CompletionsArgs),
    /// Download a model (an alias or a Hugging Face repo id) into the model store.
    ///
    /// Interrupted downloads resume where they stopped on the next pull. Gated and private
    /// repos need a token: HF_TOKEN, or `hf auth login`. The daemon downloads with the token of
    /// the shell running `rmx pull`, even when it was started before the token was set.
    Pull(PullArgs),
    /// List the models on this machine.
    #[command(visible_alias = "list")]
    Ls(LsArgs),
    /// Remove models from the store (asks first unless -y).
    Rm(RmArgs),
    /// Show what a model is and whether it fits this machine's memory; while the daemon has it
    /// loaded, also its kinds of layer and how a decode step runs each.
    Info(InfoArgs),
    /// List the model names rmx knows (built-in and user aliases).
    Models(ModelsArgs),
    /// Add, remove or list your own model names.
    #[command(subcommand)]
    Alias(AliasCommand),
    /// Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships
    /// it, keeping its MTP head) into an MLX model in the store, under a name.
    Import(ImportArgs),
    /// Measure prefill and decode speed, time to first token and peak memory.
    ///
    /// Greedy generation from fixed pseudo-random prompts; warm-up rounds are discarded and
    /// the median (± half the range) of the others is shown.
    Bench(BenchArgs),
    /// List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and
    /// point one at the local daemon with --setup.
    ///
    /// --setup shows the change as a diff, asks (or -y), backs the old file up as
    /// <file>.rmx-backup and keeps the user's comments and other settings; --restore puts the
    /// backup back.
    Agents(AgentsArgs),
    /// Check the MLX runtime, memory, disk, the daemon, the model store, config files and the
    /// distributed backends.
    ///
    /// Prints PASS / WARN / FAIL lines, each problem with its fix; exits non-zero when
    /// something FAILs. --hostfile checks that every rank's host answers; under `rmx launch`
    /// every rank reports its rmx and MLX versions, backends and (--model) the model folder's
    /// fingerprint, and rank 0 prints them side by side, marking what differs.
    #[command(after_help = "Examples:\n  \
        rmx doctor\n  \
        rmx doctor --hostfile ring.json\n  \
        rmx launch -n 2 -- rmx doctor --model ~/models/Qwen3-8B-4bit\n  \
        rmx launch --hostfile ring.json --rank 1 -- rmx doctor --model ~/models/Qwen3-8B-4bit")]
    Doctor(DoctorArgs),
    /// Let others use a model: a key-protected, rate-limited address on the LAN, and a public
    /// URL through a tunnel when one is available.
    ///
    /// Loads the model in the daemon and keeps it loaded, listens on this machine's LAN
    /// address, and prints the URL and a freshly generated key (`Authorization: Bearer` or
    /// `x-api-key`). Only the generation routes and the model listings are shared, for this
    /// one model. With cloudflared on PATH (or --tunnel) it also opens a tunnel and prints its
    /// public URL. Ctrl-C closes the port and the tunnel, and the key stops working.
    Share(ShareArgs),
    /// Run an rmx command with its model split over several processes (ranks), joined by MLX's
    /// ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or
    /// pipeline parallel (each rank a range of layers).
    ///
    /// Without --hostfile, N ranks start on this machine over loopback. With one (MLX's ring
    /// hostfile: a JSON list with each rank's "ip:port" addresses), run `rmx launch` on every
    /// machine with --rank naming the ranks it starts there. Rank 0 runs the command; the
    /// others load their share of each model rank 0 loads and follow its engine. Every rank
    /// reads the model from the same path. Runs `rmx bench`; `rmx doctor`, which compares the
    /// ranks' versions and model files; and `rmx serve`: the daemon as
    /// rank 0, every model it loads split over the ranks, one at a time; when a rank ends, its
    /// running answers fail (503) and every rank is started again. `rmx run` and `rmx chat`
    /// (with -n) start such a daemon for themselves, talk to it, and stop it when they end;
    /// `rmx run`/`rmx chat` without launch talk to a launched `rmx serve` (docs/distributed.md).
    #[command(after_help = "Examples:\n  \
        rmx launch -n 2 -- rmx bench ~/models/Qwen3-8B-4bit\n  \
        rmx launch -n 2 -- rmx serve\n  \
        rmx launch -n 2 --mode pipeline -- rmx chat ~/models/Qwen3-32B-4bit\n  \
        rmx launch -n 4 --mode pipeline -- rmx bench ~/models/Llama-3-8B --gen-tokens 64\n  \
        rmx launch --hostfile ring.json --rank 1 -- rmx bench ~/models/Qwen3-32B-4bit\n  \
        rmx launch -n 2 --backend nccl -- rmx bench ~/models/Llama-3-8B-4bit")]
    Launch(LaunchArgs),
    /// A rank other than 0 of `rmx launch` (started by it, not by hand).
    #[command(hide = true)]
    Worker,
}

#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Ranks to start on this machine over loopback (without --hostfile).
    #[arg(
        short = 'n',
        long = "processes",
        value_name = "N",
        required_unless_present = "hostfile"
    )]
    pub processes: Option<usize>,
    /// MLX's ring hostfile: one entry per rank, each a list of "ip:port" it listens on (with
    /// --backend jaccl: mlx.launch's jaccl hostfile, each host's "ips" and "rdma" devices).
    #[arg(long, value_name = "FILE", conflicts_with = "processes")]
    pub hostfile: Option<PathBuf>,
    /// The ranks of the hostfile to start on this machine [default: all].
    #[arg(
        long,
        value_name = "R,..",
        value_delimiter = ',',
        requires = "hostfile"
    )]
    pub rank: Vec<usize>,
    /// How to split the model: every layer over all ranks (tensor), or each rank a range of
    /// layers (pipeline; fewer messages, for slower links).
    #[arg(long, value_enum, default_value_t = LaunchMode::Tensor)]
    pub mode: LaunchMode,
    /// MLX's backend between the ranks: ring (TCP; CPUs, Macs, any link), nccl (one NVIDIA
    /// GPU per rank, this machine's ranks only, tensor mode only; needs an MLX built with CUDA)
    /// or jaccl (RDMA over Thunderbolt 5 between Macs, macOS 26.2 and later; --hostfile).
    #[arg(long, value_enum, default_value_t = LaunchBackend::Ring)]
    pub backend: LaunchBackend,
    /// With --backend jaccl: the port rank 0 coordinates on, at its hostfile address.
    #[arg(long, value_name = "PORT", default_value_t = rmx_mlx::distributed::JACCL_DEFAULT_PORT)]
    pub coordinator_port: u16,
    /// The rmx command: `rmx bench MODEL ...`, `rmx serve ...`, `rmx run MODEL ...`, `rmx
    /// chat MODEL`, `rmx doctor ...`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchMode {
    Tensor,
    Pipeline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchBackend {
    Ring,
    Nccl,
    Jaccl,
}

#[derive(Debug, Args)]
pub struct ShareArgs {
    /// The model: an alias, a Hugging Face repo id (owner/name) or a model folder. Clients
    /// name it the same way.
    pub model: String,
    /// Address to listen on [default: this machine's LAN IPv4 address]; 127.0.0.1 keeps the
    /// share to this machine and the tunnel.
    #[arg(long, value_name = "ADDRESS")]
    pub host: Option<std::net::IpAddr>,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8001)]
    pub port: u16,
    /// A browser origin allowed to call the API (repeatable; `*` allows any).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// Requests per minute per client address (0: no limit).
    #[arg(long, default_value_t = 120, value_name = "N")]
    pub rate_limit: u32,
    /// Public tunnel: `cloudflared` (a quick tunnel), `ssh:[USER@]HOST[:PORT]` (ssh -R with key
    /// authentication; PORT defaults to --port, and the server needs GatewayPorts for others
    /// to reach it) or `none` [default: cloudflared when it is on PATH, else none].
    #[arg(long, value_name = "TUNNEL")]
    pub tunnel: Option<String>,
    /// Print one JSON line (url, key, model, public_url) when ready, instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// The tool: codex, claude, opencode, aider, goose, continue, hermes (none: list them all).
    pub name: Option<String>,
    /// Write the tool's config so it talks to the local rmx daemon.
    #[arg(long, conflicts_with = "restore")]
    pub setup: bool,
    /// The model the tool asks for [default: $RMX_MODEL, else qwen3-4b-4bit].
    #[arg(long, value_name = "NAME", requires = "setup")]
    pub model: Option<String>,
    /// Show the change as a diff and write nothing.
    #[arg(long, requires = "setup")]
    pub dry_run: bool,
    /// Write without asking.
    #[arg(short, long)]
    pub yes: bool,
    /// Put back the file as it was before the first --setup.
    #[arg(long)]
    pub restore: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
    /// MLX's ring hostfile (as for `rmx launch --hostfile`): check that every rank's host
    /// answers on the network.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// A model folder to fingerprint (its files' names, the weights' sizes, the other files'
    /// contents): under `rmx launch`, every rank's is compared with rank 0's.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The model: an alias, a Hugging Face repo id (owner/name) or a model folder.
    pub model: String,
    /// The prompt (read from standard input when absent and piped).
    pub prompt: Option<String>,
    /// An image file for the prompt: PNG, JPEG, WebP or GIF (its first frame). Repeat for
    /// more, up to 8. Needs a vision model: for now Gemma 3 (4B and up) or Mistral Small
    /// 3.1/3.2 with its vision tower, a `vision_config` in its config.json; a text-only model
    /// refuses images. The file is
    /// sent as it is and the daemon reads it. Not with --raw (the chat template places the
    /// images). Without a prompt on a terminal, the chat's first message carries them.
    #[arg(long = "image", value_name = "FILE", conflicts_with = "raw")]
    pub images: Vec<PathBuf>,
    #[command(flatten)]
    pub gen: GenArgs,
}

#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// The embedding model: an alias, a Hugging Face repo id (owner/name) or a model folder.
    pub model: String,
    /// The texts to embed, one input each (read from standard input, a line each, when
    /// absent).
    #[arg(value_name = "TEXT")]
    pub texts: Vec<String>,
    /// Keep each vector's first N values (renormalized when the model's vectors are unit
    /// length, as Matryoshka-trained models like Qwen3-Embedding are meant to be cut).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub dimensions: Option<u32>,
    /// Embed the texts as search queries: the model's query prompt goes first where it has
    /// one (Qwen3-Embedding's retrieval instruction); documents are embedded without it.
    #[arg(long, conflicts_with = "prompt_name")]
    pub query: bool,
    /// Put the model's prompt of this name (from its config_sentence_transformers.json) before
    /// each text.
    #[arg(long, value_name = "NAME")]
    pub prompt_name: Option<String>,
    /// Print the whole answer as JSON (OpenAI's embeddings response) instead of JSON lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The model: an alias, a Hugging Face repo id (owner/name) or a model folder
    /// (default: $RMX_MODEL).
    #[arg(env = EnvVars::RMX_MODEL, hide_env_values = true)]
    pub model: String,
    #[command(flatten)]
    pub gen: GenArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to serve HTTP on [env: RMX_HOST, default 127.0.0.1:8000].
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Port to serve HTTP on (overrides the port of --host / RMX_HOST).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Require this key on TCP (`Authorization: Bearer` or `x-api-key`) [env: RMX_API_KEY];
    /// needed to listen on anything but loopback.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Started by another rmx command: a taken TCP port is a warning, the socket still serves.
    #[arg(long, hide = true)]
    pub background: bool,
    /// The KV cache of answers whose request does not say (Ollama options `kv_bits`, ...).
    #[command(flatten)]
    pub kv: KvArgs,
    /// How answers whose request does not say speculate (the `speculative` and `draft_tokens`
    /// fields of every API).
    #[command(flatten)]
    pub spec: SpecArgs,
}

#[derive(Debug, Args)]
pub struct PsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The model to unload (as given to run/chat, or its repo id or folder).
    pub model: String,
    /// Print JSON (the model, and whether it was loaded) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to print completions for.
    #[arg(required_unless_present = "write")]
    pub shell: Option<clap_complete::Shell>,
    /// Write completions for every shell into DIR/completions and man pages into DIR/man.
    #[arg(long)]
    pub write: bool,
    /// Where --write writes (default: the current directory, the repository root under cargo).
    #[arg(long, value_name = "DIR", requires = "write")]
    pub dir: Option<PathBuf>,
}

/// Options shared by everything that generates text.
#[derive(Debug, Args, Clone)]
pub struct GenArgs {
    /// Send the prompt as-is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Stop after this many generated tokens.
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub max_tokens: usize,
    /// Sampling temperature; 0 picks the most likely token every time.
    #[arg(long, default_value_t = 0.0, value_name = "T")]
    pub temperature: f32,
    /// Nucleus sampling: keep the most likely tokens that add up to P.
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub top_p: f32,
    /// Keep only the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub top_k: u32,
    /// Random seed: the same seed and prompt give the same answer.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// A system message placed before the prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Ask reasoning models to think first (sets the template's enable_thinking).
    #[arg(long, overrides_with = "no_think")]
    pub think: bool,
    /// Ask reasoning models not to think, and hide any reasoning they still print.
    #[arg(long)]
    pub no_think: bool,
    /// Close a reasoning model's thought after N tokens, so the answer starts (0: at once).
    #[arg(long, value_name = "N")]
    pub thinking_budget: Option<usize>,
    /// Print prompt and decode speed after each answer.
    #[arg(long, short)]
    pub verbose: bool,
    /// How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1
    /// (until stopped) [default: $RMX_KEEP_ALIVE or 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_keep_alive, allow_hyphen_values = true)]
    pub keep_alive: Option<rmx_api::KeepAlive>,
    #[command(flatten)]
    pub kv: KvArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// Speculative decoding: guessed tokens checked in one forward pass.
#[derive(Debug, Args, Clone, Default)]
pub struct SpecArgs {
    /// Guess tokens ahead and let the model check them in one forward pass; the answer is the
    /// one it would be without. prompt-lookup copies the guesses from the prompt and the answer
    /// so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL
    /// has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for
    /// `rmx bench`, the draft's folder); mtp has the model's own multi-token-prediction head
    /// guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx
    /// import` of such a folder; MLX conversions drop it).
    /// Models split over ranks answer without it (-v and the answer's stats say so).
    #[arg(long, value_name = "METHOD", value_parser = parse_speculative)]
    pub speculative: Option<String>,
    /// The most tokens guessed per step [default: 6; mtp: 3].
    #[arg(long, value_name = "K", requires = "speculative", value_parser = clap::value_parser!(u8).range(1..=16))]
    pub draft_tokens: Option<u8>,
}

/// `prompt-lookup`, `draft:MODEL` or `mtp`, as the daemon reads a request's `speculative`.
fn parse_speculative(s: &str) -> Result<String, String> {
    match rmx_server::speculation::parse(Some(s), None) {
        Ok(Some(rmx_server::speculation::Asked::On(_))) => Ok(s.to_string()),
        Ok(_) => Err("expected prompt-lookup, draft:MODEL or mtp".into()),
        Err(e) => Err(e.message),
    }
}

impl SpecArgs {
    /// The speculation asked for, if --speculative was given, as the daemon's default
    /// (`rmx serve`): a draft is found by name per answer.
    pub fn spec(&self) -> Option<rmx_server::speculation::Spec> {
        let k = self.draft_tokens.map(usize::from);
        match rmx_server::speculation::parse(self.speculative.as_deref(), k) {
            Ok(Some(rmx_server::speculation::Asked::On(s))) => Some(s),
            // The parsers above hold the flags to what parse takes.
            _ => None,
        }
    }

    /// The speculation asked for, for an engine run in this process (`rmx bench`): a draft is
    /// the folder named after `draft:`.
    pub fn speculation(&self) -> Result<Option<rmx_engine::Speculation>, rmx_engine::EngineError> {
        use rmx_server::speculation::Spec;
        match self.spec() {
            Some(Spec::PromptLookup { draft_tokens }) => {
                rmx_engine::Speculation::prompt_lookup(draft_tokens).map(Some)
            }
            Some(Spec::Draft {
                model,
                draft_tokens,
            }) => rmx_engine::Speculation::draft(model, draft_tokens).map(Some),
            Some(Spec::Mtp { draft_tokens }) => {
                rmx_engine::Speculation::mtp(draft_tokens).map(Some)
            }
            None => Ok(None),
        }
    }
}

/// How the KV cache is stored: mlx-lm's `--kv-bits`, `--kv-group-size` and
/// `--quantized-kv-start`.
#[derive(Debug, Args, Clone, Default)]
pub struct KvArgs {
    /// Store keys and values 4- or 8-bit (MLX's quantized form, as mlx-lm's --kv-bits): about
    /// 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only
    /// (sliding windows and recurrent states stay as they are); such an answer decodes alone,
    /// without the prefix cache.
    #[arg(long, value_name = "BITS", value_parser = ["4", "8"])]
    pub kv_bits: Option<String>,
    /// Elements per quantization group of the KV cache (must divide the model's head size).
    #[arg(long, value_name = "N", value_parser = ["32", "64", "128"], default_value = "64", requires = "kv_bits")]
    pub kv_group_size: String,
    /// Quantize the KV cache only once it holds N positions (mlx-lm's --quantized-kv-start;
    /// default 0, from the start).
    #[arg(long, value_name = "N", requires = "kv_bits", value_parser = clap::value_parser!(i32).range(0..))]
    pub kv_quant_start: Option<i32>,
}

impl KvArgs {
    /// (bits, group size, start), when --kv-bits was given; the parsers above hold the values
    /// to what they accept.
    pub fn settings(&self) -> Option<(i32, i32, i32)> {
        let bits = self.kv_bits.as_deref()?.parse().ok()?;
        let group = self.kv_group_size.parse().unwrap_or(64);
        Some((bits, group, self.kv_quant_start.unwrap_or(0)))
    }
}

fn parse_keep_alive(s: &str) -> Result<rmx_api::KeepAlive, String> {
    rmx_api::KeepAlive::parse(s)
}

// Store commands: pull, ls, rm, info, models, alias, import.

#[derive(Debug, Args)]
pub struct PullArgs {
    /// An alias (`rmx models` lists them) or a Hugging Face repo id (owner/name).
    pub model: String,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// Models to remove: aliases, repo ids, or names given to `rmx import`.
    #[arg(required = true)]
    pub models: Vec<String>,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// An alias, a repo id, or a model folder.
    pub model: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// Only the models already on this machine.
    #[arg(long)]
    pub cached: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum AliasCommand {
    /// Add (or replace) an alias for a repo id or a model folder.
    Add(AliasAddArgs),
    /// Remove one of your aliases.
    Rm { name: String },
    /// List every alias in effect.
    Ls {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct AliasAddArgs {
    /// The new name: lowercase letters, digits, `.`, `-`, `_`.
    pub name: String,
    /// A Hugging Face repo id (owner/name) or a model folder.
    pub target: String,
    /// How the model writes tool calls: hermes, qwen3_coder, llama3_json, mistral, gemma,
    /// gemma4, harmony, none.
    #[arg(long, value_parser = parse_hint::<rmx_store::ToolParser>)]
    pub tool_parser: Option<rmx_store::ToolParser>,
    /// How the model marks its reasoning: think, harmony, none.
    #[arg(long, value_parser = parse_hint::<rmx_store::ReasoningParser>)]
    pub reasoning_parser: Option<rmx_store::ReasoningParser>,
    /// The model's context length in tokens.
    #[arg(long, value_name = "TOKENS")]
    pub context_length: Option<u64>,
    /// How answers through this alias store their KV cache unless the request says.
    #[command(flatten)]
    pub kv: KvArgs,
    /// How answers through this alias speculate unless the request says (the daemon's
    /// `--speculative` applies where neither does).
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// The parser names are the alias files' spelling (serde's), so one spelling serves both.
fn parse_hint<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| format!("unknown value `{s}`"))
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The GGUF file, or a folder holding a Qwen3.5/3.6 or Qwen3-Next checkpoint as the Hub
    /// ships it (transformers' layout, bfloat16; or such a model pulled into the store, by its
    /// name): written as MLX writes it (`mlx_lm.convert`), plus its multi-token-prediction
    /// head, which `--speculative mtp` guesses with.
    pub file: PathBuf,
    /// The name to run it by (default: made from the file name).
    #[arg(long)]
    pub name: Option<String>,
    /// Weight format of the MLX model: bf16 keeps the GGUF's values rounded to bfloat16, f32
    /// keeps them whole (twice the bytes; on a Linux CPU the fastest form, as rmx multiplies
    /// float32 there with its own kernels); 4bit and 8bit (MLX affine, group size 64) re-quantize
    /// them, which small models feel. For a checkpoint folder: 4bit or 8bit, or bf16 for its
    /// own floats.
    #[arg(long, default_value = "bf16", value_parser = ["4bit", "8bit", "bf16", "f32"])]
    pub quant: String,
    /// Replace an existing model or alias of the same name.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The model: a folder holding an MLX-format model.
    pub model: PathBuf,
    /// Prompt lengths to measure (default 128 and 512).
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub prompt_tokens: Vec<usize>,
    /// Generation lengths to measure (default 128 and 512).
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub gen_tokens: Vec<usize>,
    /// Measured rounds per case.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Rounds run first and discarded.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Also run every case as N sequences at once (each its own prompt), e.g. `--streams 8,32`:
    /// aggregate tok/s and time to first token across the streams, as a server's users see them.
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub streams: Vec<usize>,
    /// Print a JSON record (hardware, versions, model, every case) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also decode every round constrained to the JSON schema in FILE (as `response_format`
    /// would), and show its decode tok/s beside the free run's: what structured output costs.
    #[arg(long, value_name = "FILE")]
    pub json_schema: Option<PathBuf>,
    /// Offer the JSON record to the community benchmarks repository [env: RMX_BENCH_REPO,
    /// default rmx-project/benchmarks]: shows it, asks, keeps a copy under the rmx home
    /// (benchmarks/), and opens a pull request through gh when it is installed.
    #[arg(long)]
    pub submit: bool,
    #[command(flatten)]
    pub kv: KvArgs,
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Instead of the cases: time a speculative verify step of each K drafted tokens (K + 1
    /// tokens through the model over a cache of the first --prompt-tokens, default 512)
    /// against a plain decode step, and the speedup that makes at a few acceptance rates.
    #[arg(long, value_delimiter = ',', value_name = "K,..")]
    pub verify_cost: Vec<usize>,
    /// Instead of the cases: time one photo-sized image (WxH, default 1024x768) through a
    /// vision model's processor (decode, resize, normalize, on the host) and its vision tower
    /// (on the model's device), per image.
    #[arg(long, value_name = "WxH", num_args = 0..=1, default_missing_value = "1024x768")]
    pub image_cost: Option<String>,
    /// Send without asking (with --submit).
    #[arg(long, requires = "submit")]
    pub yes: bool,
}
