// Binaries and tests of this crate link libmlx; carry an rpath to it (see rmx-mlx's build).
fn main() {
    if let Ok(dir) = std::env::var("DEP_MLX_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
