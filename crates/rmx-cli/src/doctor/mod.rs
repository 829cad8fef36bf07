//! The checks behind `rmx doctor`. Each returns findings (PASS / WARN / FAIL, with the fix for
//! anything that is not a PASS); the command only prints them. Nothing here changes anything.

pub mod distributed;
mod safetensors;

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Points the MLX check at another library folder than the one rmx was built against. Only
/// `rmx doctor` reads it (the binary itself always loads the library through its rpath); tests
/// use it to plant a missing runtime, which cannot be done to a running binary.
pub const MLX_LIBDIR_OVERRIDE: &str = rmx_settings::EnvVars::RMX_DOCTOR_MLX_LIBDIR;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Pass,
    Warn,
    Fail,
}

impl Level {
    pub fn label(self) -> &'static str {
        match self {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub level: Level,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn pass(check: &'static str, message: impl Into<String>) -> Finding {
    Finding {
        check,
        level: Level::Pass,
        message: message.into(),
        fix: None,
    }
}

fn warn(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        check,
        level: Level::Warn,
        message: message.into(),
        fix: Some(fix.into()),
    }
}

fn fail(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        check,
        level: Level::Fail,
        message: message.into(),
        fix: Some(fix.into()),
    }
}

pub fn run_all() -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(mlx());
    out.push(memory());
    let store = rmx_store::Store::from_env();
    match &store {
        Ok(store) => out.push(disk(&store.config().hub_cache)),
        Err(e) => out.push(fail(
            "disk",
            format!("cannot find the model store: {e}"),
            "set HOME, or HF_HUB_CACHE / HF_HOME to a folder rmx can write to",
        )),
    }
    out.extend(daemon());
    if let Ok(store) = &store {
        out.extend(models(store));
        out.push(config(store));
    }
    out.extend(distributed::backends());
    out
}

fn mlx() -> Vec<Finding> {
    const CHECK: &str = "mlx";
    let dir = rmx_settings::var(MLX_LIBDIR_OVERRIDE)
        .unwrap_or_else(|| rmx_mlx::BUILD_MLX_LIBDIR.to_string());
    let Some(lib) = find_libmlx(Path::new(&dir)) else {
        return vec![fail(
            CHECK,
            format!(
                "no MLX runtime found: no libmlx in {dir}, where rmx was built to load it from"
            ),
            format!(
                "install MLX {} so that {dir} holds libmlx, or rebuild rmx (cargo install) \
                 against the MLX you have (MLX_DIR=<prefix>)",
                rmx_mlx::BUILD_MLX_VERSION
            ),
        )];
    };
    let mut out = Vec::new();
    let version = rmx_mlx::mlx_version();
    let backend = rmx_mlx::backend().name();
    out.push(pass(
        CHECK,
        format!("MLX {version} ({}), backend {backend}", lib.display()),
    ));
    if version != rmx_mlx::BUILD_MLX_VERSION {
        out.push(warn(
            CHECK,
            format!(
                "rmx was built with MLX {} headers but runs MLX {version}",
                rmx_mlx::BUILD_MLX_VERSION
            ),
            "rebuild rmx against the installed MLX (cargo install again)",
        ));
    }
    let blas_calls = rmx_mlx::cpu_blas_calls();
    match matmul_2x2() {
        Ok(got) if got == [19.0, 22.0, 43.0, 50.0] => out.push(pass(
            CHECK,
            format!("a 2x2 matmul on {backend} gives the right answer"),
        )),
        Ok(got) => out.push(fail(
            CHECK,
            format!("a 2x2 matmul on {backend} gave {got:?}, not [19, 22, 43, 50]"),
            "the MLX runtime computes wrong results: reinstall MLX, or try the CPU backend",
        )),
        Err(e) => out.push(fail(
            CHECK,
            format!("a 2x2 matmul on {backend} failed: {e}"),
            "reinstall MLX; on a GPU check the driver (nvidia-smi) or Metal support",
        )),
    }
    if cfg!(target_os = "linux") {
        out.push(cpu_blas(rmx_mlx::cpu_blas_calls() > blas_calls));
    }
    out
}

/// Where float32 products on the CPU run (rmx_mlx::CpuBlas): rmx's own kernels unless told
/// otherwise, and whether the MLX runtime's calls reach them.
fn cpu_blas(reached: bool) -> Finding {
    const CHECK: &str = "mlx";
    let what = rmx_mlx::cpu_blas_description();
    match rmx_mlx::cpu_blas() {
        rmx_mlx::CpuBlas::Rmx if rmx_mlx::backend() == rmx_mlx::Backend::Cpu && !reached => warn(
            CHECK,
            format!("float32 products on the CPU do not reach {what}"),
            "rebuild rmx (cargo install again); the MLX runtime's reference BLAS runs them \
             meanwhile, many times slower",
        ),
        rmx_mlx::CpuBlas::Rmx => pass(CHECK, format!("float32 products on the CPU: {what}")),
        rmx_mlx::CpuBlas::Mlx => pass(
            CHECK,
            format!("float32 products on the CPU: {what} (RMX_CPU_BLAS=mlx)"),
        ),
    }
}

fn find_libmlx(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.flatten().map(|e| e.path()).find(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
            n.starts_with("libmlx.")
                && (n.contains(".so") || n.ends_with(".dylib") || n.ends_with(".a"))
        })
    })
}

fn matmul_2x2() -> rmx_mlx::Result<Vec<f32>> {
    let a = rmx_mlx::Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    let b = rmx_mlx::Array::from_slice(&[5.0f32, 6.0, 7.0, 8.0], &[2, 2])?;
    a.matmul(&b)?.to_vec::<f32>()
}

fn memory() -> Finding {
    const CHECK: &str = "memory";
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return pass(
            CHECK,
            "memory not checked (no /proc/meminfo on this system)",
        );
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kb| kb * 1024)
    };
    let (Some(total), Some(available)) = (field("MemTotal:"), field("MemAvailable:")) else {
        return warn(
            CHECK,
            "cannot read MemTotal / MemAvailable from /proc/meminfo",
            "none needed to run; `rmx info <model>` then cannot judge fit",
        );
    };
    let human = rmx_store::human_bytes;
    let message = format!("{} available of {}", human(available), human(total));
    if available < 2 << 30 {
        warn(CHECK, message, "close other programs, or use a smaller or more quantized model (rmx info <model> shows what fits)")
    } else {
        pass(CHECK, message)
    }
}

fn disk(hub_cache: &Path) -> Finding {
    const CHECK: &str = "disk";
    // The store may not exist yet: measure the nearest folder that does.
    let mut at = hub_cache;
    while !at.exists() {
        match at.parent() {
            Some(p) => at = p,
            None => break,
        }
    }
    match rmx_store::available_space(at) {
        Ok(free) => {
            let message = format!(
                "{} free for models in {}",
                rmx_store::human_bytes(free),
                hub_cache.display()
            );
            if free < 5 << 30 {
                warn(CHECK, message, "free space there, or set HF_HUB_CACHE to a bigger disk; `rmx ls` and `rmx rm` free space taken by models")
            } else {
                pass(CHECK, message)
            }
        }
        Err(e) => warn(
            CHECK,
            format!("cannot measure free space at {}: {e}", at.display()),
            "check that the folder is readable",
        ),
    }
}

fn daemon() -> Vec<Finding> {
    const CHECK: &str = "daemon";
    let mut out = Vec::new();
    let Some(paths) = rmx_api::home::DaemonPaths::from_env() else {
        return vec![fail(
            CHECK,
            "neither RMX_HOME nor HOME is set",
            "set RMX_HOME to a folder rmx can write to",
        )];
    };
    let socket = &paths.socket;
    let mut socket_alive = false;
    match std::fs::symlink_metadata(socket) {
        Err(_) => out.push(pass(
            CHECK,
            format!(
                "not running (socket {} absent); rmx commands start it when needed",
                socket.display()
            ),
        )),
        Ok(meta) if !meta.file_type().is_socket() => out.push(fail(
            CHECK,
            format!(
                "stale socket file: {} is not a socket (a leftover file)",
                socket.display()
            ),
            format!("remove it: rm {}", socket.display()),
        )),
        Ok(_) => match UnixStream::connect(socket) {
            Ok(_) => {
                socket_alive = true;
                out.push(pass(
                    CHECK,
                    format!("running (socket {})", socket.display()),
                ));
            }
            Err(_) => out.push(warn(
                CHECK,
                format!(
                    "stale socket: nothing listens on {} (the daemon stopped or was killed)",
                    socket.display()
                ),
                format!(
                    "remove it (rm {}), or run `rmx serve`, which replaces it",
                    socket.display()
                ),
            )),
        },
    }
    let addr = rmx_api::home::default_http_addr();
    let root = format!("http://{}", addr.replace("0.0.0.0:", "127.0.0.1:"));
    match crate::agents::daemon_version(&root) {
        Some(v) => out.push(pass(CHECK, format!("{root}/api/version answers: rmx {v}"))),
        None if port_taken(&root) => out.push(warn(
            CHECK,
            format!("{root} is taken by something that is not rmx"),
            "stop that program, or serve rmx elsewhere: RMX_HOST=127.0.0.1:8001 rmx serve",
        )),
        None if socket_alive => out.push(warn(
            CHECK,
            format!("the daemon runs but does not serve HTTP on {root}"),
            "check RMX_HOST, or restart it with `rmx serve`",
        )),
        None => out.push(pass(
            CHECK,
            format!("{root} is free for the daemon (start it: rmx serve)"),
        )),
    }
    out
}

fn port_taken(root: &str) -> bool {
    use std::net::{TcpStream, ToSocketAddrs};
    root.strip_prefix("http://")
        .and_then(|a| a.to_socket_addrs().ok())
        .and_then(|mut a| a.next())
        .is_some_and(|a| {
            TcpStream::connect_timeout(&a, std::time::Duration::from_millis(500)).is_ok()
        })
}

fn models(store: &rmx_store::Store) -> Vec<Finding> {
    const CHECK: &str = "models";
    let entries = match store.list() {
        Ok(e) => e,
        Err(e) => {
            return vec![fail(
                CHECK,
                format!("cannot read the model store: {e}"),
                format!(
                    "check {} (permissions, disk)",
                    store.config().hub_cache.display()
                ),
            )]
        }
    };
    let mut out = Vec::new();
    let mut good = 0;
    for entry in &entries {
        let name = &entry.name;
        if entry.status == rmx_store::ModelStatus::Partial {
            out.push(warn(
                CHECK,
                format!("{name}: download incomplete"),
                format!("rmx pull {name} (resumes where it stopped)"),
            ));
            continue;
        }
        let snapshot = match store.cache().current_snapshot(&entry.repo) {
            Ok(Some((_, dir))) => dir,
            _ => {
                out.push(fail(
                    CHECK,
                    format!("{name}: no snapshot folder"),
                    format!("rmx rm {name} && rmx pull {name}"),
                ));
                continue;
            }
        };
        let problems = safetensors::check_dir(&snapshot);
        if problems.is_empty() {
            good += 1;
        }
        for problem in problems {
            out.push(fail(
                CHECK,
                format!("{name}: {problem}"),
                format!("download it again: rmx rm {name} && rmx pull {name}"),
            ));
        }
    }
    out.insert(
        0,
        pass(
            CHECK,
            format!(
                "{good} of {} models in {} are complete and readable",
                entries.len(),
                store.config().hub_cache.display()
            ),
        ),
    );
    out
}

fn config(store: &rmx_store::Store) -> Finding {
    const CHECK: &str = "config";
    let path = store.user_aliases_path();
    if !path.exists() {
        return pass(CHECK, format!("no user aliases file ({})", path.display()));
    }
    match rmx_store::aliases::load_user_aliases(&path) {
        Ok(aliases) => pass(CHECK, format!("{} user aliases in {}", aliases.len(), path.display())),
        Err(e) => fail(CHECK, format!("{} does not parse: {e}", path.display()), format!("fix the file, or move it away (mv {0} {0}.bad) and add aliases again with `rmx alias add`", path.display())),
    }
}
