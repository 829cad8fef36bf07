//! `rmx`: run large language models locally on MLX.

mod agents;
mod answer;
mod bench_submit;
mod cli;
mod commands;
mod daemon;
mod doctor;
mod images;
mod output;
mod progress;
mod tunnel;

fn main() -> std::process::ExitCode {
    quiet_when_the_reader_leaves();
    let cache = rmx_store::StoreConfig::from_env()
        .ok()
        .map(|c| c.rmx_home.join("cache"));
    rmx_mlx::runtime_defaults(cache.as_deref());
    cpu_blas_from_env();
    commands::dispatch(<cli::Cli as clap::Parser>::parse())
}

/// `RMX_CPU_BLAS`: where float32 products on the CPU run (rmx_mlx::CpuBlas), for this process
/// and the daemon it starts.
fn cpu_blas_from_env() {
    if let Some(v) = rmx_settings::var(rmx_settings::EnvVars::RMX_CPU_BLAS) {
        match v.parse() {
            Ok(which) => rmx_mlx::set_cpu_blas(which),
            Err(e) => eprintln!("rmx: RMX_CPU_BLAS: {e}; using the default"),
        }
    }
}

/// A reader that stops early (`rmx ls | head`) closes standard output, and `println!` then
/// panics. That is no error of rmx's: it ends quietly and successfully instead, as a writer
/// does under SIGPIPE (Rust ignores the signal, so the write fails instead).
fn quiet_when_the_reader_leaves() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info)
    }));
}
