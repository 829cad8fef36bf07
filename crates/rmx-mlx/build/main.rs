//! Finds the MLX runtime (libmlx + headers), compiles the C++ side of the bridge against it and
//! tells dependents where libmlx lives. The search order is documented in docs/mlx-bridge.md.

mod locate;

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=cpp/rmx_mlx.h");
    println!("cargo:rerun-if-changed=cpp/rmx_mlx.cc");
    println!("cargo:rerun-if-changed=cpp/cpu_blas.cc");
    println!("cargo:rerun-if-changed=MLX_VERSION");
    println!("cargo:rerun-if-changed=build");

    let mlx = match locate::find_mlx() {
        Ok(m) => m,
        Err(e) => {
            // A panic here is how a build script reports failure; the message says what to do.
            panic!("\n\nrmx-mlx: could not find or install the MLX runtime.\n{e}\n\n");
        }
    };
    println!(
        "cargo:warning=rmx-mlx: using MLX {} ({}) from {}",
        mlx.version,
        mlx.how,
        mlx.root.display()
    );

    let include = mlx.root.join("include");
    let lib = mlx.root.join("lib");
    cxx_build::bridge("src/ffi.rs")
        .file("cpp/rmx_mlx.cc")
        .include(&include)
        .include(Path::new("cpp"))
        .std("c++20")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .compile("rmx_mlx_bridge");
    // The float32 kernels (Linux), optimized in every profile: the tests run debug builds, whose
    // -O0 would make every float32 product of their models several times slower.
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        cc::Build::new()
            .cpp(true)
            .file("cpp/cpu_blas.cc")
            .std("c++17")
            .opt_level(3)
            .compile("rmx_cpu_blas");
    }

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=mlx");
    // Our own tests and examples find libmlx without LD_LIBRARY_PATH ...
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // ... and dependents read this as DEP_MLX_LIBDIR to do the same for their binaries.
    println!("cargo:libdir={}", lib.display());
    println!("cargo:rustc-env=RMX_MLX_LIBDIR={}", lib.display());
    println!("cargo:rustc-env=RMX_MLX_BUILD_VERSION={}", mlx.version);
}
