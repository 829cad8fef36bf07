
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'rmx' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'rmx'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'rmx' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat')
            [CompletionResult]::new('chat', 'chat', [CompletionResultType]::ParameterValue, 'Chat with a model interactively (type /help for commands)')
            [CompletionResult]::new('embed', 'embed', [CompletionResultType]::ParameterValue, 'Turn texts into vectors with an embedding model, one JSON array per line')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Run the daemon in the foreground: the HTTP API on TCP and the CLI''s Unix socket')
            [CompletionResult]::new('ps', 'ps', [CompletionResultType]::ParameterValue, 'List the models loaded in the daemon')
            [CompletionResult]::new('stop', 'stop', [CompletionResultType]::ParameterValue, 'Unload a model from the daemon')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions, or regenerate the checked-in completions and man pages')
            [CompletionResult]::new('pull', 'pull', [CompletionResultType]::ParameterValue, 'Download a model (an alias or a Hugging Face repo id) into the model store')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the models on this machine')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the models on this machine')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Remove models from the store (asks first unless -y)')
            [CompletionResult]::new('info', 'info', [CompletionResultType]::ParameterValue, 'Show what a model is and whether it fits this machine''s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each')
            [CompletionResult]::new('models', 'models', [CompletionResultType]::ParameterValue, 'List the model names rmx knows (built-in and user aliases)')
            [CompletionResult]::new('alias', 'alias', [CompletionResultType]::ParameterValue, 'Add, remove or list your own model names')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name')
            [CompletionResult]::new('bench', 'bench', [CompletionResultType]::ParameterValue, 'Measure prefill and decode speed, time to first token and peak memory')
            [CompletionResult]::new('agents', 'agents', [CompletionResultType]::ParameterValue, 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends')
            [CompletionResult]::new('share', 'share', [CompletionResultType]::ParameterValue, 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available')
            [CompletionResult]::new('launch', 'launch', [CompletionResultType]::ParameterValue, 'Run an rmx command with its model split over several processes (ranks), joined by MLX''s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)')
            [CompletionResult]::new('worker', 'worker', [CompletionResultType]::ParameterValue, 'A rank other than 0 of `rmx launch` (started by it, not by hand)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'rmx;run' {
            [CompletionResult]::new('--image', '--image', [CompletionResultType]::ParameterName, 'An image file for the prompt: PNG, JPEG, WebP or GIF (its first frame). Repeat for more, up to 8. Needs a vision model: for now Gemma 3 (4B and up) or Mistral Small 3.1/3.2 with its vision tower, a `vision_config` in its config.json; a text-only model refuses images. The file is sent as it is and the daemon reads it. Not with --raw (the chat template places the images). Without a prompt on a terminal, the chat''s first message carries them')
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Stop after this many generated tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Sampling temperature; 0 picks the most likely token every time')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Nucleus sampling: keep the most likely tokens that add up to P')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (0: all)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Random seed: the same seed and prompt give the same answer')
            [CompletionResult]::new('--system', '--system', [CompletionResultType]::ParameterName, 'A system message placed before the prompt')
            [CompletionResult]::new('--thinking-budget', '--thinking-budget', [CompletionResultType]::ParameterName, 'Close a reasoning model''s thought after N tokens, so the answer starts (0: at once)')
            [CompletionResult]::new('--keep-alive', '--keep-alive', [CompletionResultType]::ParameterName, 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]')
            [CompletionResult]::new('--kv-bits', '--kv-bits', [CompletionResultType]::ParameterName, 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache')
            [CompletionResult]::new('--kv-group-size', '--kv-group-size', [CompletionResultType]::ParameterName, 'Elements per quantization group of the KV cache (must divide the model''s head size)')
            [CompletionResult]::new('--kv-quant-start', '--kv-quant-start', [CompletionResultType]::ParameterName, 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)')
            [CompletionResult]::new('--speculative', '--speculative', [CompletionResultType]::ParameterName, 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)')
            [CompletionResult]::new('--draft-tokens', '--draft-tokens', [CompletionResultType]::ParameterName, 'The most tokens guessed per step [default: 6; mtp: 3]')
            [CompletionResult]::new('--raw', '--raw', [CompletionResultType]::ParameterName, 'Send the prompt as-is, without the chat template')
            [CompletionResult]::new('--think', '--think', [CompletionResultType]::ParameterName, 'Ask reasoning models to think first (sets the template''s enable_thinking)')
            [CompletionResult]::new('--no-think', '--no-think', [CompletionResultType]::ParameterName, 'Ask reasoning models not to think, and hide any reasoning they still print')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print prompt and decode speed after each answer')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print prompt and decode speed after each answer')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;chat' {
            [CompletionResult]::new('--max-tokens', '--max-tokens', [CompletionResultType]::ParameterName, 'Stop after this many generated tokens')
            [CompletionResult]::new('--temperature', '--temperature', [CompletionResultType]::ParameterName, 'Sampling temperature; 0 picks the most likely token every time')
            [CompletionResult]::new('--top-p', '--top-p', [CompletionResultType]::ParameterName, 'Nucleus sampling: keep the most likely tokens that add up to P')
            [CompletionResult]::new('--top-k', '--top-k', [CompletionResultType]::ParameterName, 'Keep only the K most likely tokens (0: all)')
            [CompletionResult]::new('--seed', '--seed', [CompletionResultType]::ParameterName, 'Random seed: the same seed and prompt give the same answer')
            [CompletionResult]::new('--system', '--system', [CompletionResultType]::ParameterName, 'A system message placed before the prompt')
            [CompletionResult]::new('--thinking-budget', '--thinking-budget', [CompletionResultType]::ParameterName, 'Close a reasoning model''s thought after N tokens, so the answer starts (0: at once)')
            [CompletionResult]::new('--keep-alive', '--keep-alive', [CompletionResultType]::ParameterName, 'How long the model stays loaded after the answer: 5m, 30s, 0 (unload at once), -1 (until stopped) [default: $RMX_KEEP_ALIVE or 5m]')
            [CompletionResult]::new('--kv-bits', '--kv-bits', [CompletionResultType]::ParameterName, 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache')
            [CompletionResult]::new('--kv-group-size', '--kv-group-size', [CompletionResultType]::ParameterName, 'Elements per quantization group of the KV cache (must divide the model''s head size)')
            [CompletionResult]::new('--kv-quant-start', '--kv-quant-start', [CompletionResultType]::ParameterName, 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)')
            [CompletionResult]::new('--speculative', '--speculative', [CompletionResultType]::ParameterName, 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)')
            [CompletionResult]::new('--draft-tokens', '--draft-tokens', [CompletionResultType]::ParameterName, 'The most tokens guessed per step [default: 6; mtp: 3]')
            [CompletionResult]::new('--raw', '--raw', [CompletionResultType]::ParameterName, 'Send the prompt as-is, without the chat template')
            [CompletionResult]::new('--think', '--think', [CompletionResultType]::ParameterName, 'Ask reasoning models to think first (sets the template''s enable_thinking)')
            [CompletionResult]::new('--no-think', '--no-think', [CompletionResultType]::ParameterName, 'Ask reasoning models not to think, and hide any reasoning they still print')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print prompt and decode speed after each answer')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print prompt and decode speed after each answer')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;embed' {
            [CompletionResult]::new('--dimensions', '--dimensions', [CompletionResultType]::ParameterName, 'Keep each vector''s first N values (renormalized when the model''s vectors are unit length, as Matryoshka-trained models like Qwen3-Embedding are meant to be cut)')
            [CompletionResult]::new('--prompt-name', '--prompt-name', [CompletionResultType]::ParameterName, 'Put the model''s prompt of this name (from its config_sentence_transformers.json) before each text')
            [CompletionResult]::new('--query', '--query', [CompletionResultType]::ParameterName, 'Embed the texts as search queries: the model''s query prompt goes first where it has one (Qwen3-Embedding''s retrieval instruction); documents are embedded without it')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the whole answer as JSON (OpenAI''s embeddings response) instead of JSON lines')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;serve' {
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'Address to serve HTTP on [env: RMX_HOST, default 127.0.0.1:8000]')
            [CompletionResult]::new('--port', '--port', [CompletionResultType]::ParameterName, 'Port to serve HTTP on (overrides the port of --host / RMX_HOST)')
            [CompletionResult]::new('--api-key', '--api-key', [CompletionResultType]::ParameterName, 'Require this key on TCP (`Authorization: Bearer` or `x-api-key`) [env: RMX_API_KEY]; needed to listen on anything but loopback')
            [CompletionResult]::new('--kv-bits', '--kv-bits', [CompletionResultType]::ParameterName, 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache')
            [CompletionResult]::new('--kv-group-size', '--kv-group-size', [CompletionResultType]::ParameterName, 'Elements per quantization group of the KV cache (must divide the model''s head size)')
            [CompletionResult]::new('--kv-quant-start', '--kv-quant-start', [CompletionResultType]::ParameterName, 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)')
            [CompletionResult]::new('--speculative', '--speculative', [CompletionResultType]::ParameterName, 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)')
            [CompletionResult]::new('--draft-tokens', '--draft-tokens', [CompletionResultType]::ParameterName, 'The most tokens guessed per step [default: 6; mtp: 3]')
            [CompletionResult]::new('--background', '--background', [CompletionResultType]::ParameterName, 'Started by another rmx command: a taken TCP port is a warning, the socket still serves')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;ps' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;stop' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (the model, and whether it was loaded) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;completions' {
            [CompletionResult]::new('--dir', '--dir', [CompletionResultType]::ParameterName, 'Where --write writes (default: the current directory, the repository root under cargo)')
            [CompletionResult]::new('--write', '--write', [CompletionResultType]::ParameterName, 'Write completions for every shell into DIR/completions and man pages into DIR/man')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;pull' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;ls' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;list' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;rm' {
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Do not ask for confirmation')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;info' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;models' {
            [CompletionResult]::new('--cached', '--cached', [CompletionResultType]::ParameterName, 'Only the models already on this machine')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;alias' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add (or replace) an alias for a repo id or a model folder')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Remove one of your aliases')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List every alias in effect')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'rmx;alias;add' {
            [CompletionResult]::new('--tool-parser', '--tool-parser', [CompletionResultType]::ParameterName, 'How the model writes tool calls: hermes, qwen3_coder, llama3_json, mistral, gemma, gemma4, harmony, none')
            [CompletionResult]::new('--reasoning-parser', '--reasoning-parser', [CompletionResultType]::ParameterName, 'How the model marks its reasoning: think, harmony, none')
            [CompletionResult]::new('--context-length', '--context-length', [CompletionResultType]::ParameterName, 'The model''s context length in tokens')
            [CompletionResult]::new('--kv-bits', '--kv-bits', [CompletionResultType]::ParameterName, 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache')
            [CompletionResult]::new('--kv-group-size', '--kv-group-size', [CompletionResultType]::ParameterName, 'Elements per quantization group of the KV cache (must divide the model''s head size)')
            [CompletionResult]::new('--kv-quant-start', '--kv-quant-start', [CompletionResultType]::ParameterName, 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)')
            [CompletionResult]::new('--speculative', '--speculative', [CompletionResultType]::ParameterName, 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)')
            [CompletionResult]::new('--draft-tokens', '--draft-tokens', [CompletionResultType]::ParameterName, 'The most tokens guessed per step [default: 6; mtp: 3]')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;alias;rm' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;alias;ls' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of a table')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;alias;help' {
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add (or replace) an alias for a repo id or a model folder')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Remove one of your aliases')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List every alias in effect')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'rmx;alias;help;add' {
            break
        }
        'rmx;alias;help;rm' {
            break
        }
        'rmx;alias;help;ls' {
            break
        }
        'rmx;alias;help;help' {
            break
        }
        'rmx;import' {
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'The name to run it by (default: made from the file name)')
            [CompletionResult]::new('--quant', '--quant', [CompletionResultType]::ParameterName, 'Weight format of the MLX model: bf16 keeps the GGUF''s values rounded to bfloat16, f32 keeps them whole (twice the bytes; on a Linux CPU the fastest form, as rmx multiplies float32 there with its own kernels); 4bit and 8bit (MLX affine, group size 64) re-quantize them, which small models feel. For a checkpoint folder: 4bit or 8bit, or bf16 for its own floats')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Replace an existing model or alias of the same name')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;bench' {
            [CompletionResult]::new('--prompt-tokens', '--prompt-tokens', [CompletionResultType]::ParameterName, 'Prompt lengths to measure (default 128 and 512)')
            [CompletionResult]::new('--gen-tokens', '--gen-tokens', [CompletionResultType]::ParameterName, 'Generation lengths to measure (default 128 and 512)')
            [CompletionResult]::new('--rounds', '--rounds', [CompletionResultType]::ParameterName, 'Measured rounds per case')
            [CompletionResult]::new('--warmup', '--warmup', [CompletionResultType]::ParameterName, 'Rounds run first and discarded')
            [CompletionResult]::new('--streams', '--streams', [CompletionResultType]::ParameterName, 'Also run every case as N sequences at once (each its own prompt), e.g. `--streams 8,32`: aggregate tok/s and time to first token across the streams, as a server''s users see them')
            [CompletionResult]::new('--json-schema', '--json-schema', [CompletionResultType]::ParameterName, 'Also decode every round constrained to the JSON schema in FILE (as `response_format` would), and show its decode tok/s beside the free run''s: what structured output costs')
            [CompletionResult]::new('--kv-bits', '--kv-bits', [CompletionResultType]::ParameterName, 'Store keys and values 4- or 8-bit (MLX''s quantized form, as mlx-lm''s --kv-bits): about 0.28x / 0.53x the memory of a bf16 cache at groups of 64. Full-attention layers only (sliding windows and recurrent states stay as they are); such an answer decodes alone, without the prefix cache')
            [CompletionResult]::new('--kv-group-size', '--kv-group-size', [CompletionResultType]::ParameterName, 'Elements per quantization group of the KV cache (must divide the model''s head size)')
            [CompletionResult]::new('--kv-quant-start', '--kv-quant-start', [CompletionResultType]::ParameterName, 'Quantize the KV cache only once it holds N positions (mlx-lm''s --quantized-kv-start; default 0, from the start)')
            [CompletionResult]::new('--speculative', '--speculative', [CompletionResultType]::ParameterName, 'Guess tokens ahead and let the model check them in one forward pass; the answer is the one it would be without. prompt-lookup copies the guesses from the prompt and the answer so far (fast where the answer repeats its input: editing code, quoting); draft:MODEL has a smaller model of the same tokenizer guess (draft:qwen3-0.6b for a Qwen3-8B; for `rmx bench`, the draft''s folder); mtp has the model''s own multi-token-prediction head guess (Qwen3.5/3.6 and Qwen3-Next checkpoints as the Hub ships them keep it, and `rmx import` of such a folder; MLX conversions drop it). Models split over ranks answer without it (-v and the answer''s stats say so)')
            [CompletionResult]::new('--draft-tokens', '--draft-tokens', [CompletionResultType]::ParameterName, 'The most tokens guessed per step [default: 6; mtp: 3]')
            [CompletionResult]::new('--verify-cost', '--verify-cost', [CompletionResultType]::ParameterName, 'Instead of the cases: time a speculative verify step of each K drafted tokens (K + 1 tokens through the model over a cache of the first --prompt-tokens, default 512) against a plain decode step, and the speedup that makes at a few acceptance rates')
            [CompletionResult]::new('--image-cost', '--image-cost', [CompletionResultType]::ParameterName, 'Instead of the cases: time one photo-sized image (WxH, default 1024x768) through a vision model''s processor (decode, resize, normalize, on the host) and its vision tower (on the model''s device), per image')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print a JSON record (hardware, versions, model, every case) instead of a table')
            [CompletionResult]::new('--submit', '--submit', [CompletionResultType]::ParameterName, 'Offer the JSON record to the community benchmarks repository [env: RMX_BENCH_REPO, default rmx-project/benchmarks]: shows it, asks, keeps a copy under the rmx home (benchmarks/), and opens a pull request through gh when it is installed')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Send without asking (with --submit)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;agents' {
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'The model the tool asks for [default: $RMX_MODEL, else qwen3-4b-4bit]')
            [CompletionResult]::new('--setup', '--setup', [CompletionResultType]::ParameterName, 'Write the tool''s config so it talks to the local rmx daemon')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Show the change as a diff and write nothing')
            [CompletionResult]::new('-y', '-y', [CompletionResultType]::ParameterName, 'Write without asking')
            [CompletionResult]::new('--yes', '--yes', [CompletionResultType]::ParameterName, 'Write without asking')
            [CompletionResult]::new('--restore', '--restore', [CompletionResultType]::ParameterName, 'Put back the file as it was before the first --setup')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;doctor' {
            [CompletionResult]::new('--hostfile', '--hostfile', [CompletionResultType]::ParameterName, 'MLX''s ring hostfile (as for `rmx launch --hostfile`): check that every rank''s host answers on the network')
            [CompletionResult]::new('--model', '--model', [CompletionResultType]::ParameterName, 'A model folder to fingerprint (its files'' names, the weights'' sizes, the other files'' contents): under `rmx launch`, every rank''s is compared with rank 0''s')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON instead of lines')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;share' {
            [CompletionResult]::new('--host', '--host', [CompletionResultType]::ParameterName, 'Address to listen on [default: this machine''s LAN IPv4 address]; 127.0.0.1 keeps the share to this machine and the tunnel')
            [CompletionResult]::new('--port', '--port', [CompletionResultType]::ParameterName, 'Port to listen on (0: any free port)')
            [CompletionResult]::new('--cors-origin', '--cors-origin', [CompletionResultType]::ParameterName, 'A browser origin allowed to call the API (repeatable; `*` allows any)')
            [CompletionResult]::new('--rate-limit', '--rate-limit', [CompletionResultType]::ParameterName, 'Requests per minute per client address (0: no limit)')
            [CompletionResult]::new('--tunnel', '--tunnel', [CompletionResultType]::ParameterName, 'Public tunnel: `cloudflared` (a quick tunnel), `ssh:[USER@]HOST[:PORT]` (ssh -R with key authentication; PORT defaults to --port, and the server needs GatewayPorts for others to reach it) or `none` [default: cloudflared when it is on PATH, else none]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON line (url, key, model, public_url) when ready, instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;launch' {
            [CompletionResult]::new('-n', '-n', [CompletionResultType]::ParameterName, 'Ranks to start on this machine over loopback (without --hostfile)')
            [CompletionResult]::new('--processes', '--processes', [CompletionResultType]::ParameterName, 'Ranks to start on this machine over loopback (without --hostfile)')
            [CompletionResult]::new('--hostfile', '--hostfile', [CompletionResultType]::ParameterName, 'MLX''s ring hostfile: one entry per rank, each a list of "ip:port" it listens on (with --backend jaccl: mlx.launch''s jaccl hostfile, each host''s "ips" and "rdma" devices)')
            [CompletionResult]::new('--rank', '--rank', [CompletionResultType]::ParameterName, 'The ranks of the hostfile to start on this machine [default: all]')
            [CompletionResult]::new('--mode', '--mode', [CompletionResultType]::ParameterName, 'How to split the model: every layer over all ranks (tensor), or each rank a range of layers (pipeline; fewer messages, for slower links)')
            [CompletionResult]::new('--backend', '--backend', [CompletionResultType]::ParameterName, 'MLX''s backend between the ranks: ring (TCP; CPUs, Macs, any link), nccl (one NVIDIA GPU per rank, this machine''s ranks only, tensor mode only; needs an MLX built with CUDA) or jaccl (RDMA over Thunderbolt 5 between Macs, macOS 26.2 and later; --hostfile)')
            [CompletionResult]::new('--coordinator-port', '--coordinator-port', [CompletionResultType]::ParameterName, 'With --backend jaccl: the port rank 0 coordinates on, at its hostfile address')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;worker' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            break
        }
        'rmx;help' {
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Generate an answer to one prompt and exit; without a prompt on a terminal, chat')
            [CompletionResult]::new('chat', 'chat', [CompletionResultType]::ParameterValue, 'Chat with a model interactively (type /help for commands)')
            [CompletionResult]::new('embed', 'embed', [CompletionResultType]::ParameterValue, 'Turn texts into vectors with an embedding model, one JSON array per line')
            [CompletionResult]::new('serve', 'serve', [CompletionResultType]::ParameterValue, 'Run the daemon in the foreground: the HTTP API on TCP and the CLI''s Unix socket')
            [CompletionResult]::new('ps', 'ps', [CompletionResultType]::ParameterValue, 'List the models loaded in the daemon')
            [CompletionResult]::new('stop', 'stop', [CompletionResultType]::ParameterValue, 'Unload a model from the daemon')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'Print shell completions, or regenerate the checked-in completions and man pages')
            [CompletionResult]::new('pull', 'pull', [CompletionResultType]::ParameterValue, 'Download a model (an alias or a Hugging Face repo id) into the model store')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List the models on this machine')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Remove models from the store (asks first unless -y)')
            [CompletionResult]::new('info', 'info', [CompletionResultType]::ParameterValue, 'Show what a model is and whether it fits this machine''s memory; while the daemon has it loaded, also its kinds of layer and how a decode step runs each')
            [CompletionResult]::new('models', 'models', [CompletionResultType]::ParameterValue, 'List the model names rmx knows (built-in and user aliases)')
            [CompletionResult]::new('alias', 'alias', [CompletionResultType]::ParameterValue, 'Add, remove or list your own model names')
            [CompletionResult]::new('import', 'import', [CompletionResultType]::ParameterValue, 'Convert a GGUF file (or a Qwen3.5/3.6 or Qwen3-Next checkpoint folder as the Hub ships it, keeping its MTP head) into an MLX model in the store, under a name')
            [CompletionResult]::new('bench', 'bench', [CompletionResultType]::ParameterValue, 'Measure prefill and decode speed, time to first token and peak memory')
            [CompletionResult]::new('agents', 'agents', [CompletionResultType]::ParameterValue, 'List coding agents (Codex, Claude Code, OpenCode, Aider, Goose, Continue, Hermes) and point one at the local daemon with --setup')
            [CompletionResult]::new('doctor', 'doctor', [CompletionResultType]::ParameterValue, 'Check the MLX runtime, memory, disk, the daemon, the model store, config files and the distributed backends')
            [CompletionResult]::new('share', 'share', [CompletionResultType]::ParameterValue, 'Let others use a model: a key-protected, rate-limited address on the LAN, and a public URL through a tunnel when one is available')
            [CompletionResult]::new('launch', 'launch', [CompletionResultType]::ParameterValue, 'Run an rmx command with its model split over several processes (ranks), joined by MLX''s ring backend (or nccl, one NVIDIA GPU a rank): tensor parallel (every layer split) or pipeline parallel (each rank a range of layers)')
            [CompletionResult]::new('worker', 'worker', [CompletionResultType]::ParameterValue, 'A rank other than 0 of `rmx launch` (started by it, not by hand)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'rmx;help;run' {
            break
        }
        'rmx;help;chat' {
            break
        }
        'rmx;help;embed' {
            break
        }
        'rmx;help;serve' {
            break
        }
        'rmx;help;ps' {
            break
        }
        'rmx;help;stop' {
            break
        }
        'rmx;help;completions' {
            break
        }
        'rmx;help;pull' {
            break
        }
        'rmx;help;ls' {
            break
        }
        'rmx;help;rm' {
            break
        }
        'rmx;help;info' {
            break
        }
        'rmx;help;models' {
            break
        }
        'rmx;help;alias' {
            [CompletionResult]::new('add', 'add', [CompletionResultType]::ParameterValue, 'Add (or replace) an alias for a repo id or a model folder')
            [CompletionResult]::new('rm', 'rm', [CompletionResultType]::ParameterValue, 'Remove one of your aliases')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List every alias in effect')
            break
        }
        'rmx;help;alias;add' {
            break
        }
        'rmx;help;alias;rm' {
            break
        }
        'rmx;help;alias;ls' {
            break
        }
        'rmx;help;import' {
            break
        }
        'rmx;help;bench' {
            break
        }
        'rmx;help;agents' {
            break
        }
        'rmx;help;doctor' {
            break
        }
        'rmx;help;share' {
            break
        }
        'rmx;help;launch' {
            break
        }
        'rmx;help;worker' {
            break
        }
        'rmx;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
