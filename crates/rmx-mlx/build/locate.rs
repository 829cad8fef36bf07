//! Where MLX comes from, in order: `MLX_DIR`; the `mlx` package of a Python (`RMX_PYTHON`, else
//! `python3`) when its version is the pinned one; Homebrew's on macOS; else the pinned wheels,
//! installed with pip into a cache directory the first time.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Mlx {
    pub root: PathBuf,
    pub version: String,
    pub how: &'static str,
}

/// The variables that choose the MLX a build uses, declared and documented in rmx-settings'
/// table (its build section; a test there checks this list against it). A build script reads
/// them itself: depending on rmx-settings would rebuild this crate, and every crate above it,
/// whenever a line of the table's documentation changed.
pub const BUILD_VARS: &[&str] = &["MLX_DIR", "RMX_PYTHON", "RMX_MLX_BACKEND", "RMX_MLX_CACHE"];

/// One of [`BUILD_VARS`] (or a variable of the system's, like `HOME`), unset when blank.
fn build_var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

pub fn find_mlx() -> Result<Mlx, String> {
    for var in BUILD_VARS.iter().chain(&["XDG_CACHE_HOME"]) {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let pinned = pinned_version()?;

    if let Some(dir) = build_var("MLX_DIR") {
        let root = PathBuf::from(dir);
        let version = header_version(&root).ok_or_else(|| {
            format!(
                "MLX_DIR={} has no include/mlx/version.h and lib/libmlx: point it at a folder \
                 holding include/ and lib/ of an MLX install",
                root.display()
            )
        })?;
        return Ok(Mlx {
            root,
            version,
            how: "MLX_DIR",
        });
    }

    let python = build_var("RMX_PYTHON").unwrap_or_else(|| "python3".to_string());
    if let Some(root) = python_mlx(&python) {
        match header_version(&root) {
            Some(v) if v == pinned => {
                return Ok(Mlx {
                    root,
                    version: v,
                    how: "python package",
                });
            }
            Some(v) => println!(
                "cargo:warning=rmx-mlx: {python}'s mlx is {v}, not the pinned {pinned}; \
                 using the pinned wheels instead"
            ),
            None => {}
        }
    }

    if cfg!(target_os = "macos") {
        for root in ["/opt/homebrew/opt/mlx", "/usr/local/opt/mlx"] {
            let root = PathBuf::from(root);
            if let Some(v) = header_version(&root) {
                return Ok(Mlx {
                    root,
                    version: v,
                    how: "Homebrew",
                });
            }
        }
    }

    install_pinned(&python, &pinned)
}

fn pinned_version() -> Result<String, String> {
    let manifest = env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?;
    let path = Path::new(&manifest).join("MLX_VERSION");
    fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The version an install's headers declare, if it has both headers and the library.
fn header_version(root: &Path) -> Option<String> {
    let lib = root.join("lib");
    let has_lib = ["libmlx.so", "libmlx.dylib"]
        .iter()
        .any(|f| lib.join(f).exists());
    let header = fs::read_to_string(root.join("include/mlx/version.h")).ok()?;
    if !has_lib {
        return None;
    }
    let num = |key: &str| -> Option<String> {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {key} ")))
            .map(|v| v.trim().to_string())
    };
    Some(format!(
        "{}.{}.{}",
        num("MLX_VERSION_MAJOR")?,
        num("MLX_VERSION_MINOR")?,
        num("MLX_VERSION_PATCH")?
    ))
}

/// `mlx` is a namespace package (`mlx.__file__` is None), so look through `mlx.__path__`.
fn python_mlx(python: &str) -> Option<PathBuf> {
    let out = Command::new(python)
        .args(["-c", "import mlx\nfor p in mlx.__path__: print(p)"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .find(|p| header_version(p).is_some())
}

fn backend() -> String {
    build_var("RMX_MLX_BACKEND").unwrap_or_else(|| {
        if cfg!(target_os = "macos") {
            "metal"
        } else {
            "cpu"
        }
        .to_string()
    })
}

fn cache_dir() -> Result<PathBuf, String> {
    if let Some(d) = build_var("RMX_MLX_CACHE") {
        return Ok(PathBuf::from(d));
    }
    let base = build_var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| build_var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| "neither RMX_MLX_CACHE, XDG_CACHE_HOME nor HOME is set".to_string())?;
    Ok(base.join("rmx").join("mlx"))
}

fn install_pinned(python: &str, version: &str) -> Result<Mlx, String> {
    let backend = backend();
    let runtime = match backend.as_str() {
        "cpu" => "mlx-cpu",
        "cuda13" => "mlx-cuda-13",
        "cuda12" => "mlx-cuda-12",
        "metal" => "mlx-metal",
        other => {
            return Err(format!(
                "RMX_MLX_BACKEND={other} is not one of cpu, cuda13, cuda12, metal"
            ))
        }
    };
    let target = cache_dir()?.join(format!("{version}-{backend}"));
    let root = target.join("mlx");
    if let Some(v) = header_version(&root) {
        return Ok(Mlx {
            root,
            version: v,
            how: "cached pinned wheels",
        });
    }
    println!(
        "cargo:warning=rmx-mlx: installing mlx=={version} + {runtime}=={version} into {} with pip",
        target.display()
    );
    let partial = target.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-compile", "--target"])
        .arg(&partial)
        .arg(format!("mlx=={version}"))
        .arg(format!("{runtime}=={version}"))
        .status()
        .map_err(|e| {
            format!(
                "could not run `{python} -m pip`: {e}. Install Python 3 with pip, or set MLX_DIR"
            )
        })?;
    if !status.success() {
        return Err(format!(
            "`{python} -m pip install mlx=={version} {runtime}=={version}` failed ({status}); \
             check network access to PyPI, or set MLX_DIR to an MLX install"
        ));
    }
    let _ = fs::remove_dir_all(&target);
    fs::rename(&partial, &target).map_err(|e| format!("cannot move {}: {e}", partial.display()))?;
    let v = header_version(&root).ok_or_else(|| {
        format!(
            "pip installed MLX into {} but it has no libmlx",
            target.display()
        )
    })?;
    Ok(Mlx {
        root,
        version: v,
        how: "pinned wheels, installed now",
    })
}
