#!/usr/bin/env bash
# Writes Formula/rmx.rb for a tagged release. Builds the tag's source archive as GitHub serves
# it at <repository>/archive/refs/tags/<tag>.tar.gz (`git archive`, prefix rmx-<version>/,
# git's own gzip: the same bytes for the same tag on any machine), takes its sha256 and writes
# the tag's Formula/rmx.rb with that URL and sum (the rest of the formula is edited there).
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

# The formula's text is the tag's Formula/rmx.rb; only its url and sha256 lines change.
template=$(git show "$tag:Formula/rmx.rb")
for key in url sha256; do
  [ "$(grep -c "^  $key \"" <<<"$template")" = 1 ] ||
    { echo "release-formula: $tag:Formula/rmx.rb has no single \`$key\` line" >&2; exit 1; }
done
sed -e "s|^  url \".*\"\$|  url \"$repository/archive/refs/tags/$tag.tar.gz\"|" \
  -e "s|^  sha256 \".*\"\$|  sha256 \"$sha256\"|" <<<"$template" >"$formula"
echo "release-formula: wrote $formula ($tag, sha256 $sha256); archive $archive" >&2
