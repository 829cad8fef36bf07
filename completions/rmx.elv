
use builtin;
use str;

set edit:completion:arg-completer[rmx] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'rmx'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'rmx'= {
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand run 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat'
            cand chat 'Chat with a model interactively (type /help for commands)'
            cand embed 'Turn texts into vectors with an embedding model, one JSON array per line'
            cand serve 'Run the daemon in the foreground: the HTTP API on TCP and the CLI''s Unix socket'
            cand ps 'List the models loaded in the daemon'
            cand stop 'Unload a model from the daemon'
            cand completions 'Print shell completions, or regenerate the checked-in completions and man pages'
            cand pull 'Download a model (an alias or a Hugging Face repo id) into the model store'
            cand ls 'List the models on this machine'
            cand list 'List the models on this machine'
            cand rm 'Remove models from the store (asks first unless -y)'
            cand info 'Show what a model is and whether it fits this machine''s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each'
            cand models 'List the model names rmx knows (built-in and user aliases)'
            cand alias 'Add, remove or list your own model names'
            cand import 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name'
            cand bench 'Measure prefill and decode speed, time to first token and peak memory'
            cand agents 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup'
            cand doctor 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends'
            cand share 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available'
            cand launch 'Run an rmx command with its model split over several processes (ranks), joined by MLX''s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)'
            cand worker 'A rank other than 0 of `rmx launch` (started by it, not by hand)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'rmx;run'= {
            cand --image 'An image file for the prompt: PNG, JPEG, WebP or GIF (its first frame). Repeat for more, up to 8. Needs a vision model: for now Gemma 3 (4B and up) or Mistral Small 3.1/3.2 with its vision tower, a `vision_config` in its config.json; a text-only model refuses images. The file is sent as it is and the daemon reads it. Not with --raw (the chat template places the images). Without a prompt on a terminal, the chat''s first message carries them'
            cand --max-tokens 'Stop after this many generated tokens'
            cand --temperature 'Sampling temperature; 0 picks the most likely token every time'
            cand --top-p 'Nucleus sampling: keep the most likely tokens that add up to P'
            cand --top-k 'Keep only the K most likely tokens (0: all)'
            cand --seed 'Random seed: the same seed and prompt give the same answer'
            cand --system 'A system message placed before the prompt'
            cand --thinking-budget 'Close a reasoning model''s thought after N tokens, so the answer starts (0: at once)'
            cand --keep-alive 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]'
            cand --kv-bits 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache'
            cand --kv-group-size 'Elements per quantization group of the KV cache (must divide the model''s head size)'
            cand --kv-quant-start 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)'
            cand --speculative 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)'
            cand --draft-tokens 'The most tokens guessed per step [default: 6; mtp: 3]'
            cand --raw 'Send the prompt as-is, without the chat template'
            cand --think 'Ask reasoning models to think first (sets the template''s enable_thinking)'
            cand --no-think 'Ask reasoning models not to think, and hide any reasoning they still print'
            cand -v 'Print prompt and decode speed after each answer'
            cand --verbose 'Print prompt and decode speed after each answer'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;chat'= {
            cand --max-tokens 'Stop after this many generated tokens'
            cand --temperature 'Sampling temperature; 0 picks the most likely token every time'
            cand --top-p 'Nucleus sampling: keep the most likely tokens that add up to P'
            cand --top-k 'Keep only the K most likely tokens (0: all)'
            cand --seed 'Random seed: the same seed and prompt give the same answer'
            cand --system 'A system message placed before the prompt'
            cand --thinking-budget 'Close a reasoning model''s thought after N tokens, so the answer starts (0: at once)'
            cand --keep-alive 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]'
            cand --kv-bits 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache'
            cand --kv-group-size 'Elements per quantization group of the KV cache (must divide the model''s head size)'
            cand --kv-quant-start 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)'
            cand --speculative 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)'
            cand --draft-tokens 'The most tokens guessed per step [default: 6; mtp: 3]'
            cand --raw 'Send the prompt as-is, without the chat template'
            cand --think 'Ask reasoning models to think first (sets the template''s enable_thinking)'
            cand --no-think 'Ask reasoning models not to think, and hide any reasoning they still print'
            cand -v 'Print prompt and decode speed after each answer'
            cand --verbose 'Print prompt and decode speed after each answer'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;embed'= {
            cand --dimensions 'Keep each vector''s first N values (renormalized when the model''s vectors are unit length, as Matryoshka-trained models like Qwen3-Embedding are meant to be cut)'
            cand --prompt-name 'Put the model''s prompt of this name (from its config_sentence_transformers.json) before each text'
            cand --query 'Embed the texts as search queries: the model''s query prompt goes first where it has one (Qwen3-Embedding''s retrieval instruction); documents are embedded without it'
            cand --json 'Print the whole answer as JSON (OpenAI''s embeddings response) instead of JSON lines'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;serve'= {
            cand --host 'Address to serve HTTP on [env: RMX_HOST, default 127.0.0.1:8000]'
            cand --port 'Port to serve HTTP on (overrides the port of --host / RMX_HOST)'
            cand --api-key 'Require this key on TCP (`Authorization: Bearer` or `x-api-key`) [env: RMX_API_KEY]; needed to listen on anything but loopback'
            cand --kv-bits 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache'
            cand --kv-group-size 'Elements per quantization group of the KV cache (must divide the model''s head size)'
            cand --kv-quant-start 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)'
            cand --speculative 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)'
            cand --draft-tokens 'The most tokens guessed per step [default: 6; mtp: 3]'
            cand --background 'Started by another rmx command: a taken TCP port is a warning, the socket still serves'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;ps'= {
            cand --json 'Print JSON instead of a table'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;stop'= {
            cand --json 'Print JSON (the model, and whether it was loaded) instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;completions'= {
            cand --dir 'Where --write writes (default: the current directory, the repository root under cargo)'
            cand --write 'Write completions for every shell into DIR/completions and man pages into DIR/man'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;pull'= {
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;ls'= {
            cand --json 'Print JSON instead of a table'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;list'= {
            cand --json 'Print JSON instead of a table'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;rm'= {
            cand -y 'Do not ask for confirmation'
            cand --yes 'Do not ask for confirmation'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;info'= {
            cand --json 'Print JSON instead of text'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;models'= {
            cand --cached 'Only the models already on this machine'
            cand --json 'Print JSON instead of a table'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;alias'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
            cand add 'Add (or replace) an alias for a repo id or a model folder'
            cand rm 'Remove one of your aliases'
            cand ls 'List every alias in effect'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'rmx;alias;add'= {
            cand --tool-parser 'How the model writes tool calls: hermes, qwen3_coder, llama3_json, mistral, gemma, gemma4, harmony, none'
            cand --reasoning-parser 'How the model marks its reasoning: think, harmony, none'
            cand --context-length 'The model''s context length in tokens'
            cand --kv-bits 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache'
            cand --kv-group-size 'Elements per quantization group of the KV cache (must divide the model''s head size)'
            cand --kv-quant-start 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)'
            cand --speculative 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)'
            cand --draft-tokens 'The most tokens guessed per step [default: 6; mtp: 3]'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;alias;rm'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;alias;ls'= {
            cand --json 'Print JSON instead of a table'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;alias;help'= {
            cand add 'Add (or replace) an alias for a repo id or a model folder'
            cand rm 'Remove one of your aliases'
            cand ls 'List every alias in effect'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'rmx;alias;help;add'= {
        }
        &'rmx;alias;help;rm'= {
        }
        &'rmx;alias;help;ls'= {
        }
        &'rmx;alias;help;help'= {
        }
        &'rmx;import'= {
            cand --name 'The name to run it by (default: made from the file name)'
            cand --quant 'Weight format of the MLX model: bf16 keeps the GGUF''s values rounded to bfloat16, f32 keeps them whole (twice the bytes; on a Linux CPU the fastest form, as rmx multiplies float32 there with its own kernels); 4bit and 8bit (MLX affine, group size 64) re-quantize them, which small models feel. For a checkpoint folder: 4bit or 8bit, or bf16 for its own floats'
            cand --force 'Replace an existing model or alias of the same name'
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;bench'= {
            cand --prompt-tokens 'Prompt lengths to measure (default 128 and 512)'
            cand --gen-tokens 'Generation lengths to measure (default 128 and 512)'
            cand --rounds 'Measured rounds per case'
            cand --warmup 'Rounds run first and discarded'
            cand --streams 'Also run every case as N sequences at once (each its own prompt), e.g. `--streams 8,32`: aggregate tok/s and time to first token across the streams, as a server''s users see them'
            cand --json-schema 'Also decode every round constrained to the JSON schema in FILE (as `response_format` would), and show its decode tok/s beside the free run''s: what structured output costs'
            cand --kv-bits 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache'
            cand --kv-group-size 'Elements per quantization group of the KV cache (must divide the model''s head size)'
            cand --kv-quant-start 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)'
            cand --speculative 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)'
            cand --draft-tokens 'The most tokens guessed per step [default: 6; mtp: 3]'
            cand --verify-cost 'Instead of the cases: time a speculative verify step of each K drafted tokens (K + 1 tokens through the model over a cache of the first --prompt-tokens, default 512) against a plain decode step, and the speedup that makes at a few acceptance rates'
            cand --image-cost 'Instead of the cases: time one photo-sized image (WxH, default 1024x768) through a vision model''s processor (decode, resize, normalize, on the host) and its vision tower (on the model''s device), per image'
            cand --json 'Print a JSON record (hardware, versions, model, every case) instead of a table'
            cand --submit 'Offer the JSON record to the community benchmarks repository [env: RMX_BENCH_REPO, default rmx-project/benchmarks]: shows it, asks, keeps a copy under the rmx home (benchmarks/), and opens a pull request through gh when it is installed'
            cand --yes 'Send without asking (with --submit)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;agents'= {
            cand --model 'The model the tool asks for [default: $RMX_MODEL, else qwen3-4b-4bit]'
            cand --setup 'Write the tool''s config so it talks to the local rmx daemon'
            cand --dry-run 'Show the change as a diff and write nothing'
            cand -y 'Write without asking'
            cand --yes 'Write without asking'
            cand --restore 'Put back the file as it was before the first --setup'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;doctor'= {
            cand --hostfile 'MLX''s ring hostfile (as for `rmx launch --hostfile`): check that every rank''s host answers on the network'
            cand --model 'A model folder to fingerprint (its files'' names, the weights'' sizes, the other files'' contents): under `rmx launch`, every rank''s is compared with rank 0''s'
            cand --json 'Print JSON instead of lines'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;share'= {
            cand --host 'Address to listen on [default: this machine''s LAN IPv4 address]; 127.0.0.1 keeps the share to this machine and the tunnel'
            cand --port 'Port to listen on (0: any free port)'
            cand --cors-origin 'A browser origin allowed to call the API (repeatable; `*` allows any)'
            cand --rate-limit 'Requests per minute per client address (0: no limit)'
            cand --tunnel 'Public tunnel: `cloudflared` (a quick tunnel), `ssh:[USER@]HOST[:PORT]` (ssh -R with key authentication; PORT defaults to --port, and the server needs GatewayPorts for others to reach it) or `none` [default: cloudflared when it is on PATH, else none]'
            cand --json 'Print one JSON line (url, key, model, public_url) when ready, instead of text'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;launch'= {
            cand -n 'Ranks to start on this machine over loopback (without --hostfile)'
            cand --processes 'Ranks to start on this machine over loopback (without --hostfile)'
            cand --hostfile 'MLX''s ring hostfile: one entry per rank, each a list of "ip:port" it listens on (with --backend jaccl: mlx.launch''s jaccl hostfile, each host''s "ips" and "rdma" devices)'
            cand --rank 'The ranks of the hostfile to start on this machine [default: all]'
            cand --mode 'How to split the model: every layer over all ranks (tensor), or each rank a range of layers (pipeline; fewer messages, for slower links)'
            cand --backend 'MLX''s backend between the ranks: ring (TCP; CPUs, Macs, any link), nccl (one NVIDIA GPU per rank, this machine''s ranks only, tensor mode only; needs an MLX built with CUDA) or jaccl (RDMA over Thunderbolt 5 between Macs, macOS 26.2 and later; --hostfile)'
            cand --coordinator-port 'With --backend jaccl: the port rank 0 coordinates on, at its hostfile address'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;worker'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand -V 'Print version'
            cand --version 'Print version'
        }
        &'rmx;help'= {
            cand run 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat'
            cand chat 'Chat with a model interactively (type /help for commands)'
            cand embed 'Turn texts into vectors with an embedding model, one JSON array per line'
            cand serve 'Run the daemon in the foreground: the HTTP API on TCP and the CLI''s Unix socket'
            cand ps 'List the models loaded in the daemon'
            cand stop 'Unload a model from the daemon'
            cand completions 'Print shell completions, or regenerate the checked-in completions and man pages'
            cand pull 'Download a model (an alias or a Hugging Face repo id) into the model store'
            cand ls 'List the models on this machine'
            cand rm 'Remove models from the store (asks first unless -y)'
            cand info 'Show what a model is and whether it fits this machine''s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each'
            cand models 'List the model names rmx knows (built-in and user aliases)'
            cand alias 'Add, remove or list your own model names'
            cand import 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name'
            cand bench 'Measure prefill and decode speed, time to first token and peak memory'
            cand agents 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup'
            cand doctor 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends'
            cand share 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available'
            cand launch 'Run an rmx command with its model split over several processes (ranks), joined by MLX''s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)'
            cand worker 'A rank other than 0 of `rmx launch` (started by it, not by hand)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'rmx;help;run'= {
        }
        &'rmx;help;chat'= {
        }
        &'rmx;help;embed'= {
        }
        &'rmx;help;serve'= {
        }
        &'rmx;help;ps'= {
        }
        &'rmx;help;stop'= {
        }
        &'rmx;help;completions'= {
        }
        &'rmx;help;pull'= {
        }
        &'rmx;help;ls'= {
        }
        &'rmx;help;rm'= {
        }
        &'rmx;help;info'= {
        }
        &'rmx;help;models'= {
        }
        &'rmx;help;alias'= {
            cand add 'Add (or replace) an alias for a repo id or a model folder'
            cand rm 'Remove one of your aliases'
            cand ls 'List every alias in effect'
        }
        &'rmx;help;alias;add'= {
        }
        &'rmx;help;alias;rm'= {
        }
        &'rmx;help;alias;ls'= {
        }
        &'rmx;help;import'= {
        }
        &'rmx;help;bench'= {
        }
        &'rmx;help;agents'= {
        }
        &'rmx;help;doctor'= {
        }
        &'rmx;help;share'= {
        }
        &'rmx;help;launch'= {
        }
        &'rmx;help;worker'= {
        }
        &'rmx;help;help'= {
        }
    ]
    $completions[$command]
}
