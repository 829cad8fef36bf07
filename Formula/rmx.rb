# Homebrew formula. Each release rewrites this file with `scripts/release-formula.sh <tag>`,
# which fills in the tag's archive URL and its sha256; until the first tag they are
# placeholders. MLX comes from Homebrew's own `mlx` (the build is pointed at it through
# MLX_DIR), so no Python is needed on a Mac.
class Rmx < Formula
  desc "Run large language models locally on MLX"
  homepage "https://github.com/rmx-project/rmx"
  url "https://github.com/rmx-project/rmx/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]
  head "https://github.com/rmx-project/rmx.git", branch: "main"

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
