# Homebrew formula. MLX comes from Homebrew's own `mlx` (the build finds it under
# $(brew --prefix)/opt/mlx), so no Python is needed on a Mac.
class Rmx < Formula
  desc "Run large language models locally on MLX"
  homepage "https://github.com/rmx-project/rmx"
  url "https://github.com/rmx-project/rmx/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]
  head "https://github.com/rmx-project/rmx.git", branch: "main"

  depends_on "rust" => :build
  depends_on arch: :arm64
  depends_on "mlx"
  depends_on :macos

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
  end
end
