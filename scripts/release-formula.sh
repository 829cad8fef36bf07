#!/usr/bin/env bash
# Writes Formula/rmx.rb for a tagged release. Builds the tag's source archive as GitHub serves
# it at <repository>/archive/refs/tags/<tag>.tar.gz (`git archive`, prefix rmx-<version>/,
# git's own gzip: the same bytes for the same tag on any machine), takes its sha256 and writes
# the formula with that URL and sum.
#
#   scripts/release-formula.sh v0.1.0
#
# Run it in the repository whose tag it is (the current directory's). Writes the formula to
# $RMX_FORMULA_OUT (default Formula/rmx.rb) and keeps the archive at $RMX_ARCHIVE_OUT (default
# target/release-formula/rmx-<version>.tar.gz), so it can be compared with GitHub's download.
# tests/formula.rs checks the formula parses (`ruby -c`) and that its sum is the archive's.
set -euo pipefail
tag=${1:?usage: scripts/release-formula.sh <tag>, e.g. v0.1.0}
root=$(git rev-parse --show-toplevel)
cd "$root"
git rev-parse -q --verify "refs/tags/$tag^{commit}" >/dev/null || {
  echo "release-formula: no tag $tag in $root" >&2
  exit 1
}
version=${tag#v}
# The repository URL as the tagged Cargo.toml declares it (workspace.package.repository).
repository=$(git show "$tag:Cargo.toml" | sed -n 's/^repository = "\(.*\)"$/\1/p' | head -n 1)
[ -n "$repository" ] || { echo "release-formula: no repository in $tag:Cargo.toml" >&2; exit 1; }
name=${repository##*/}

archive=${RMX_ARCHIVE_OUT:-$root/target/release-formula/$name-$version.tar.gz}
formula=${RMX_FORMULA_OUT:-$root/Formula/rmx.rb}
mkdir -p "$(dirname "$archive")" "$(dirname "$formula")"
# GitHub's archives come from `git archive` with git's internal gzip; say so, so that a
# tar.tar.gz.command in someone's git config cannot change the bytes.
git -c tar.tar.gz.command="git archive gzip" archive --format=tar.gz \
  --prefix="$name-$version/" -o "$archive" "$tag"
sha256=$(sha256sum "$archive" 2>/dev/null || shasum -a 256 "$archive")
sha256=${sha256%% *}

cat >"$formula" <<EOF
# Homebrew formula, written by scripts/release-formula.sh for $tag. MLX comes from Homebrew's
# own \`mlx\` (the build is pointed at it through MLX_DIR), so no Python is needed on a Mac.
class Rmx < Formula
  desc "Run large language models locally on MLX"
  homepage "$repository"
  url "$repository/archive/refs/tags/$tag.tar.gz"
  sha256 "$sha256"
  license any_of: ["MIT", "Apache-2.0"]
  head "$repository.git", branch: "main"

  depends_on "rust" => :build
  depends_on arch: :arm64
  depends_on :macos
  depends_on "mlx"

  def install
    ENV["MLX_DIR"] = Formula["mlx"].opt_prefix
    system "cargo", "install", *std_cargo_args(path: "crates/rmx-cli")
    bash_completion.install "completions/rmx.bash" => "rmx"
    zsh_completion.install "completions/_rmx"
    fish_completion.install "completions/rmx.fish"
    man1.install Dir["man/*.1"]
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/rmx --version")
    ENV["RMX_HOME"] = (testpath/"rmx").to_s
    ENV["HF_HUB_CACHE"] = (testpath/"hub").to_s
    doctor = JSON.parse(shell_output("#{bin}/rmx doctor --json"))
    assert doctor["ok"], "rmx doctor failed: #{doctor["checks"]}"
  end
end
EOF
echo "release-formula: wrote $formula ($tag, sha256 $sha256); archive $archive" >&2
