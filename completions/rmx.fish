# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rmx_global_optspecs
    string join \n h/help V/version
end

function __fish_rmx_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rmx_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rmx_using_subcommand
    set -l cmd (__fish_rmx_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rmx -n "__fish_rmx_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_needs_command" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "run" -d 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "chat" -d 'Chat with a model interactively (type /help for commands)'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "embed" -d 'Turn texts into vectors with an embedding model, one JSON array per line'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "serve" -d 'Run the daemon in the foreground: the HTTP API on TCP and the CLI\'s Unix socket'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "ps" -d 'List the models loaded in the daemon'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "stop" -d 'Unload a model from the daemon'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "completions" -d 'Print shell completions, or regenerate the checked-in completions and man pages'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "pull" -d 'Download a model (an alias or a Hugging Face repo id) into the model store'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "ls" -d 'List the models on this machine'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "list" -d 'List the models on this machine'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "rm" -d 'Remove models from the store (asks first unless -y)'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "info" -d 'Show what a model is and whether it fits this machine\'s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "models" -d 'List the model names rmx knows (built-in and user aliases)'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "alias" -d 'Add, remove or list your own model names'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "import" -d 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "bench" -d 'Measure prefill and decode speed, time to first token and peak memory'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "agents" -d 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "doctor" -d 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "share" -d 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "launch" -d 'Run an rmx command with its model split over several processes (ranks), joined by MLX\'s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "worker" -d 'A rank other than 0 of `rmx launch` (started by it, not by hand)'
complete -c rmx -n "__fish_rmx_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rmx -n "__fish_rmx_using_subcommand run" -l image -d 'An image file for the prompt: PNG, JPEG, WebP or GIF (its first frame). Repeat for more, up to 8. Needs a vision model: for now Gemma 3 (4B and up) or Mistral Small 3.1/3.2 with its vision tower, a `vision_config` in its config.json; a text-only model refuses images. The file is sent as it is and the daemon reads it. Not with --raw (the chat template places the images). Without a prompt on a terminal, the chat\'s first message carries them' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand run" -l max-tokens -d 'Stop after this many generated tokens' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l temperature -d 'Sampling temperature; 0 picks the most likely token every time' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l top-p -d 'Nucleus sampling: keep the most likely tokens that add up to P' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l top-k -d 'Keep only the K most likely tokens (0: all)' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l seed -d 'Random seed: the same seed and prompt give the same answer' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l system -d 'A system message placed before the prompt' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l thinking-budget -d 'Close a reasoning model\'s thought after N tokens, so the answer starts (0: at once)' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l keep-alive -d 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l kv-bits -d 'Store keys and values 4- or 8-bit (MLX\'s quantized form, as mlx-lm\'s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache' -r -f -a "4\t''
8\t''"
complete -c rmx -n "__fish_rmx_using_subcommand run" -l kv-group-size -d 'Elements per quantization group of the KV cache (must divide the model\'s head size)' -r -f -a "32\t''
64\t''
128\t''"
complete -c rmx -n "__fish_rmx_using_subcommand run" -l kv-quant-start -d 'Quantize the KV cache only once it holds N positions (mlx-lm\'s --quantized-kv-start; default 0, from the start)' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l speculative -d 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft\'s folder); mtp has the model\'s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer\'s stats say so)' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l draft-tokens -d 'The most tokens guessed per step [default: 6; mtp: 3]' -r
complete -c rmx -n "__fish_rmx_using_subcommand run" -l raw -d 'Send the prompt as-is, without the chat template'
complete -c rmx -n "__fish_rmx_using_subcommand run" -l think -d 'Ask reasoning models to think first (sets the template\'s enable_thinking)'
complete -c rmx -n "__fish_rmx_using_subcommand run" -l no-think -d 'Ask reasoning models not to think, and hide any reasoning they still print'
complete -c rmx -n "__fish_rmx_using_subcommand run" -s v -l verbose -d 'Print prompt and decode speed after each answer'
complete -c rmx -n "__fish_rmx_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand run" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l max-tokens -d 'Stop after this many generated tokens' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l temperature -d 'Sampling temperature; 0 picks the most likely token every time' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l top-p -d 'Nucleus sampling: keep the most likely tokens that add up to P' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l top-k -d 'Keep only the K most likely tokens (0: all)' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l seed -d 'Random seed: the same seed and prompt give the same answer' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l system -d 'A system message placed before the prompt' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l thinking-budget -d 'Close a reasoning model\'s thought after N tokens, so the answer starts (0: at once)' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l keep-alive -d 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l kv-bits -d 'Store keys and values 4- or 8-bit (MLX\'s quantized form, as mlx-lm\'s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache' -r -f -a "4\t''
8\t''"
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l kv-group-size -d 'Elements per quantization group of the KV cache (must divide the model\'s head size)' -r -f -a "32\t''
64\t''
128\t''"
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l kv-quant-start -d 'Quantize the KV cache only once it holds N positions (mlx-lm\'s --quantized-kv-start; default 0, from the start)' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l speculative -d 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft\'s folder); mtp has the model\'s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer\'s stats say so)' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l draft-tokens -d 'The most tokens guessed per step [default: 6; mtp: 3]' -r
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l raw -d 'Send the prompt as-is, without the chat template'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l think -d 'Ask reasoning models to think first (sets the template\'s enable_thinking)'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -l no-think -d 'Ask reasoning models not to think, and hide any reasoning they still print'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -s v -l verbose -d 'Print prompt and decode speed after each answer'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand chat" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand embed" -l dimensions -d 'Keep each vector\'s first N values (renormalized when the model\'s vectors are unit length, as Matryoshka-trained models like Qwen3-Embedding are meant to be cut)' -r
complete -c rmx -n "__fish_rmx_using_subcommand embed" -l prompt-name -d 'Put the model\'s prompt of this name (from its config_sentence_transformers.json) before each text' -r
complete -c rmx -n "__fish_rmx_using_subcommand embed" -l query -d 'Embed the texts as search queries: the model\'s query prompt goes first where it has one (Qwen3-Embedding\'s retrieval instruction); documents are embedded without it'
complete -c rmx -n "__fish_rmx_using_subcommand embed" -l json -d 'Print the whole answer as JSON (OpenAI\'s embeddings response) instead of JSON lines'
complete -c rmx -n "__fish_rmx_using_subcommand embed" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand embed" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l host -d 'Address to serve HTTP on [env: RMX_HOST, default 127.0.0.1:8000]' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l port -d 'Port to serve HTTP on (overrides the port of --host / RMX_HOST)' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l api-key -d 'Require this key on TCP (`Authorization: Bearer` or `x-api-key`) [env: RMX_API_KEY]; needed to listen on anything but loopback' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l kv-bits -d 'Store keys and values 4- or 8-bit (MLX\'s quantized form, as mlx-lm\'s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache' -r -f -a "4\t''
8\t''"
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l kv-group-size -d 'Elements per quantization group of the KV cache (must divide the model\'s head size)' -r -f -a "32\t''
64\t''
128\t''"
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l kv-quant-start -d 'Quantize the KV cache only once it holds N positions (mlx-lm\'s --quantized-kv-start; default 0, from the start)' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l speculative -d 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft\'s folder); mtp has the model\'s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer\'s stats say so)' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l draft-tokens -d 'The most tokens guessed per step [default: 6; mtp: 3]' -r
complete -c rmx -n "__fish_rmx_using_subcommand serve" -l background -d 'Started by another rmx command: a taken TCP port is a warning, the socket still serves'
complete -c rmx -n "__fish_rmx_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand serve" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand ps" -l json -d 'Print JSON instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand ps" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand ps" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand stop" -l json -d 'Print JSON (the model, and whether it was loaded) instead of text'
complete -c rmx -n "__fish_rmx_using_subcommand stop" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand stop" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand completions" -l dir -d 'Where --write writes (default: the current directory, the repository root under cargo)' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand completions" -l write -d 'Write completions for every shell into DIR/completions and man pages into DIR/man'
complete -c rmx -n "__fish_rmx_using_subcommand completions" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand completions" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand pull" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand pull" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand ls" -l json -d 'Print JSON instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand ls" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand ls" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand list" -l json -d 'Print JSON instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand list" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand list" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand rm" -s y -l yes -d 'Do not ask for confirmation'
complete -c rmx -n "__fish_rmx_using_subcommand rm" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand rm" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand info" -l json -d 'Print JSON instead of text'
complete -c rmx -n "__fish_rmx_using_subcommand info" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand info" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand models" -l cached -d 'Only the models already on this machine'
complete -c rmx -n "__fish_rmx_using_subcommand models" -l json -d 'Print JSON instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand models" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand models" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -f -a "add" -d 'Add (or replace) an alias for a repo id or a model folder'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -f -a "rm" -d 'Remove one of your aliases'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -f -a "ls" -d 'List every alias in effect'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and not __fish_seen_subcommand_from add rm ls help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l tool-parser -d 'How the model writes tool calls: hermes, qwen3_coder, llama3_json, mistral, gemma, gemma4, harmony, none' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l reasoning-parser -d 'How the model marks its reasoning: think, harmony, none' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l context-length -d 'The model\'s context length in tokens' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l kv-bits -d 'Store keys and values 4- or 8-bit (MLX\'s quantized form, as mlx-lm\'s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache' -r -f -a "4\t''
8\t''"
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l kv-group-size -d 'Elements per quantization group of the KV cache (must divide the model\'s head size)' -r -f -a "32\t''
64\t''
128\t''"
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l kv-quant-start -d 'Quantize the KV cache only once it holds N positions (mlx-lm\'s --quantized-kv-start; default 0, from the start)' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l speculative -d 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft\'s folder); mtp has the model\'s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer\'s stats say so)' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -l draft-tokens -d 'The most tokens guessed per step [default: 6; mtp: 3]' -r
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from add" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from rm" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from rm" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from ls" -l json -d 'Print JSON instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from ls" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from ls" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from help" -f -a "add" -d 'Add (or replace) an alias for a repo id or a model folder'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from help" -f -a "rm" -d 'Remove one of your aliases'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from help" -f -a "ls" -d 'List every alias in effect'
complete -c rmx -n "__fish_rmx_using_subcommand alias; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rmx -n "__fish_rmx_using_subcommand import" -l name -d 'The name to run it by (default: made from the file name)' -r
complete -c rmx -n "__fish_rmx_using_subcommand import" -l quant -d 'Weight format of the MLX model: bf16 keeps the GGUF\'s values rounded to bfloat16, f32 keeps them whole (twice the bytes; on a Linux CPU the fastest form, as rmx multiplies float32 there with its own kernels); 4bit and 8bit (MLX affine, group size 64) re-quantize them, which small models feel. For a checkpoint folder: 4bit or 8bit, or bf16 for its own floats' -r -f -a "4bit\t''
8bit\t''
bf16\t''
f32\t''"
complete -c rmx -n "__fish_rmx_using_subcommand import" -l force -d 'Replace an existing model or alias of the same name'
complete -c rmx -n "__fish_rmx_using_subcommand import" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand import" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l prompt-tokens -d 'Prompt lengths to measure (default 128 and 512)' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l gen-tokens -d 'Generation lengths to measure (default 128 and 512)' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l rounds -d 'Measured rounds per case' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l warmup -d 'Rounds run first and discarded' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l streams -d 'Also run every case as N sequences at once (each its own prompt), e.g. `--streams 8,32`: aggregate tok/s and time to first token across the streams, as a server\'s users see them' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l json-schema -d 'Also decode every round constrained to the JSON schema in FILE (as `response_format` would), and show its decode tok/s beside the free run\'s: what structured output costs' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l kv-bits -d 'Store keys and values 4- or 8-bit (MLX\'s quantized form, as mlx-lm\'s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache' -r -f -a "4\t''
8\t''"
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l kv-group-size -d 'Elements per quantization group of the KV cache (must divide the model\'s head size)' -r -f -a "32\t''
64\t''
128\t''"
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l kv-quant-start -d 'Quantize the KV cache only once it holds N positions (mlx-lm\'s --quantized-kv-start; default 0, from the start)' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l speculative -d 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft\'s folder); mtp has the model\'s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer\'s stats say so)' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l draft-tokens -d 'The most tokens guessed per step [default: 6; mtp: 3]' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l verify-cost -d 'Instead of the cases: time a speculative verify step of each K drafted tokens (K + 1 tokens through the model over a cache of the first --prompt-tokens, default 512) against a plain decode step, and the speedup that makes at a few acceptance rates' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l image-cost -d 'Instead of the cases: time one photo-sized image (WxH, default 1024x768) through a vision model\'s processor (decode, resize, normalize, on the host) and its vision tower (on the model\'s device), per image' -r
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l json -d 'Print a JSON record (hardware, versions, model, every case) instead of a table'
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l submit -d 'Offer the JSON record to the community benchmarks repository [env: RMX_BENCH_REPO, default rmx-project/benchmarks]: shows it, asks, keeps a copy under the rmx home (benchmarks/), and opens a pull request through gh when it is installed'
complete -c rmx -n "__fish_rmx_using_subcommand bench" -l yes -d 'Send without asking (with --submit)'
complete -c rmx -n "__fish_rmx_using_subcommand bench" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand bench" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -l model -d 'The model the tool asks for [default: $RMX_MODEL, else qwen3-4b-4bit]' -r
complete -c rmx -n "__fish_rmx_using_subcommand agents" -l setup -d 'Write the tool\'s config so it talks to the local rmx daemon'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -l dry-run -d 'Show the change as a diff and write nothing'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -s y -l yes -d 'Write without asking'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -l restore -d 'Put back the file as it was before the first --setup'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand agents" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand doctor" -l hostfile -d 'MLX\'s ring hostfile (as for `rmx launch --hostfile`): check that every rank\'s host answers on the network' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand doctor" -l model -d 'A model folder to fingerprint (its files\' names, the weights\' sizes, the other files\' contents): under `rmx launch`, every rank\'s is compared with rank 0\'s' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand doctor" -l json -d 'Print JSON instead of lines'
complete -c rmx -n "__fish_rmx_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand share" -l host -d 'Address to listen on [default: this machine\'s LAN IPv4 address]; 127.0.0.1 keeps the share to this machine and the tunnel' -r
complete -c rmx -n "__fish_rmx_using_subcommand share" -l port -d 'Port to listen on (0: any free port)' -r
complete -c rmx -n "__fish_rmx_using_subcommand share" -l cors-origin -d 'A browser origin allowed to call the API (repeatable; `*` allows any)' -r
complete -c rmx -n "__fish_rmx_using_subcommand share" -l rate-limit -d 'Requests per minute per client address (0: no limit)' -r
complete -c rmx -n "__fish_rmx_using_subcommand share" -l tunnel -d 'Public tunnel: `cloudflared` (a quick tunnel), `ssh:[USER@]HOST[:PORT]` (ssh -R with key authentication; PORT defaults to --port, and the server needs GatewayPorts for others to reach it) or `none` [default: cloudflared when it is on PATH, else none]' -r
complete -c rmx -n "__fish_rmx_using_subcommand share" -l json -d 'Print one JSON line (url, key, model, public_url) when ready, instead of text'
complete -c rmx -n "__fish_rmx_using_subcommand share" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand share" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand launch" -s n -l processes -d 'Ranks to start on this machine over loopback (without --hostfile)' -r
complete -c rmx -n "__fish_rmx_using_subcommand launch" -l hostfile -d 'MLX\'s ring hostfile: one entry per rank, each a list of "ip:port" it listens on (with --backend jaccl: mlx.launch\'s jaccl hostfile, each host\'s "ips" and "rdma" devices)' -r -F
complete -c rmx -n "__fish_rmx_using_subcommand launch" -l rank -d 'The ranks of the hostfile to start on this machine [default: all]' -r
complete -c rmx -n "__fish_rmx_using_subcommand launch" -l mode -d 'How to split the model: every layer over all ranks (tensor), or each rank a range of layers (pipeline; fewer messages, for slower links)' -r -f -a "tensor\t''
pipeline\t''"
complete -c rmx -n "__fish_rmx_using_subcommand launch" -l backend -d 'MLX\'s backend between the ranks: ring (TCP; CPUs, Macs, any link), nccl (one NVIDIA GPU per rank, this machine\'s ranks only, tensor mode only; needs an MLX built with CUDA) or jaccl (RDMA over Thunderbolt 5 between Macs, macOS 26.2 and later; --hostfile)' -r -f -a "ring\t''
nccl\t''
jaccl\t''"
complete -c rmx -n "__fish_rmx_using_subcommand launch" -l coordinator-port -d 'With --backend jaccl: the port rank 0 coordinates on, at its hostfile address' -r
complete -c rmx -n "__fish_rmx_using_subcommand launch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rmx -n "__fish_rmx_using_subcommand launch" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand worker" -s h -l help -d 'Print help'
complete -c rmx -n "__fish_rmx_using_subcommand worker" -s V -l version -d 'Print version'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "run" -d 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "chat" -d 'Chat with a model interactively (type /help for commands)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "embed" -d 'Turn texts into vectors with an embedding model, one JSON array per line'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "serve" -d 'Run the daemon in the foreground: the HTTP API on TCP and the CLI\'s Unix socket'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "ps" -d 'List the models loaded in the daemon'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "stop" -d 'Unload a model from the daemon'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "completions" -d 'Print shell completions, or regenerate the checked-in completions and man pages'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "pull" -d 'Download a model (an alias or a Hugging Face repo id) into the model store'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "ls" -d 'List the models on this machine'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "rm" -d 'Remove models from the store (asks first unless -y)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "info" -d 'Show what a model is and whether it fits this machine\'s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "models" -d 'List the model names rmx knows (built-in and user aliases)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "alias" -d 'Add, remove or list your own model names'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "import" -d 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "bench" -d 'Measure prefill and decode speed, time to first token and peak memory'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "agents" -d 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "doctor" -d 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "share" -d 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "launch" -d 'Run an rmx command with its model split over several processes (ranks), joined by MLX\'s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "worker" -d 'A rank other than 0 of `rmx launch` (started by it, not by hand)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and not __fish_seen_subcommand_from run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rmx -n "__fish_rmx_using_subcommand help; and __fish_seen_subcommand_from alias" -f -a "add" -d 'Add (or replace) an alias for a repo id or a model folder'
complete -c rmx -n "__fish_rmx_using_subcommand help; and __fish_seen_subcommand_from alias" -f -a "rm" -d 'Remove one of your aliases'
complete -c rmx -n "__fish_rmx_using_subcommand help; and __fish_seen_subcommand_from alias" -f -a "ls" -d 'List every alias in effect'
