//! Converts a GGUF file by hand: `cargo run -p rmx-gguf --example gguf2mlx -- IN.gguf OUT_DIR [bf16|4bit|8bit]`.

use std::path::PathBuf;
use std::process::ExitCode;

use rmx_gguf::{convert, Progress, Quant};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(input), Some(output)) = (args.first(), args.get(1)) else {
        eprintln!("usage: gguf2mlx IN.gguf OUT_DIR [bf16|4bit|8bit]");
        return ExitCode::FAILURE;
    };
    let quant: Quant = match args.get(2).map_or(Ok(Quant::Bf16), |q| q.parse()) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut report = |p: Progress<'_>| match p {
        Progress::Started {
            architecture,
            tensors,
            ..
        } => eprintln!("{architecture}: {tensors} tensors"),
        Progress::Tensor { index, total, .. } if index % 50 == 0 || index == total => {
            eprintln!("{index}/{total}")
        }
        Progress::Finished { bytes_written } => eprintln!("wrote {bytes_written} bytes of weights"),
        _ => {}
    };
    match convert(
        &PathBuf::from(input),
        &PathBuf::from(output),
        quant,
        &mut report,
    ) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
