//! Every environment variable rmx reads, declared once with its documentation.
//!
//! [`EnvVars`] names them; [`ALL`] is the same table as data, from which `rmx --help`'s long
//! form, the man page's ENVIRONMENT section and `docs/settings.md` are generated (tests keep the
//! checked-in copies in sync). [`var`] is the one place the process environment is read for
//! them: a crate that needs a setting asks here, by its constant, and parses the value into its
//! own typed config (the daemon's `ServiceConfig` and `SecurityConfig`, the models' `FastPath`),
//! keeping the default and the error for a bad value beside the code that uses it.
//!
//! The build-time variables (section [`Section::Build`]) are read by rmx-mlx's build script,
//! which cannot depend on this crate without rebuilding MLX's bindings whenever a doc line here
//! changes; they are declared here so that they are documented with the rest, and a test checks
//! that the build script reads exactly those.

mod table;

pub use table::{EnvVars, ALL};

/// Where a variable belongs, for the order and headings of the generated documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// Read by the CLI and the daemon alike: where rmx keeps its files, where the daemon listens.
    Common,
    /// Read by the daemon when it starts.
    Daemon,
    /// Read by the engine (in the daemon, or in `rmx bench`).
    Engine,
    /// The CUDA fast path's knobs (docs/perf.md), read once per process when the first model
    /// loads; for measurements.
    FastPath,
    /// For developing and testing rmx's own commands.
    Debug,
    /// Read when rmx is compiled (by rmx-mlx's build script), not when it runs.
    Build,
    /// Read by rmx's test suites (`scripts/test-env.sh` sets them).
    Tests,
}

impl Section {
    pub const ALL: [Section; 7] = [
        Section::Common,
        Section::Daemon,
        Section::Engine,
        Section::FastPath,
        Section::Debug,
        Section::Build,
        Section::Tests,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Section::Common => "Files and addresses",
            Section::Daemon => "The daemon",
            Section::Engine => "The engine",
            Section::FastPath => "The CUDA fast path (for measurements)",
            Section::Debug => "Debugging rmx",
            Section::Build => "Building rmx",
            Section::Tests => "Testing rmx",
        }
    }

    /// Whether `rmx --help` lists the section (the man page and docs/settings.md list all).
    pub fn in_help(self) -> bool {
        !matches!(self, Section::Build | Section::Tests)
    }
}

/// One variable: its name, where it belongs and what it does (the doc comment on its
/// [`EnvVars`] constant, one string per line).
#[derive(Debug, Clone, Copy)]
pub struct EnvVar {
    pub name: &'static str,
    pub section: Section,
    pub doc: &'static [&'static str],
}

impl EnvVar {
    /// The documentation as one paragraph.
    pub fn doc_text(&self) -> String {
        self.doc
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The value of `name` from the process environment: None when unset, not Unicode, or blank
/// (spaces only), so that `RMX_X=` in a shell means "unset" everywhere. Surrounding spaces are
/// kept; a caller parsing a number trims them.
///
/// Only names declared in [`ALL`] may be read here (checked in debug builds), which is what
/// keeps the table complete.
pub fn var(name: &str) -> Option<String> {
    debug_assert!(
        ALL.iter().any(|v| v.name == name),
        "{name} is not declared in rmx-settings' table"
    );
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `name` parsed as a number (trimmed): Ok(None) when unset or blank, Err with a message naming
/// the variable when it is not a number.
pub fn number<T: std::str::FromStr>(name: &str) -> Result<Option<T>, String> {
    match var(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}=`{v}` is not a number")),
    }
}

/// Whether `name` is set to `1` (a switch that is off unless turned on).
pub fn is_one(name: &str) -> bool {
    var(name).is_some_and(|v| v.trim() == "1")
}

/// Whether `name` is set to `0` (a switch that is on unless turned off).
pub fn is_zero(name: &str) -> bool {
    var(name).is_some_and(|v| v.trim() == "0")
}

/// The table as plain text, for `rmx --help`'s long form: one block a section, each variable
/// followed by its documentation, indented.
pub fn help_text() -> String {
    let mut out = String::from("Environment variables:\n");
    for section in Section::ALL.into_iter().filter(|s| s.in_help()) {
        out.push_str(&format!("\n  {}:\n", section.title()));
        for v in ALL.iter().filter(|v| v.section == section) {
            out.push_str(&format!("    {}\n", v.name));
            for line in wrap(&v.doc_text(), 84) {
                out.push_str(&format!("        {line}\n"));
            }
        }
    }
    out.push_str("\nThe man page rmx(1) and docs/settings.md list every variable, also those read when building and testing rmx.");
    out
}

/// The table as Markdown, for `docs/settings.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Settings\n\n\
         <!-- Generated from crates/rmx-settings/src/table.rs by `cargo run -p rmx-cli -- completions --write`; \
         a test keeps it in sync. Edit the table, not this file. -->\n\n\
         rmx reads these environment variables. Each is declared once, with this text, in\n\
         `crates/rmx-settings/src/table.rs`; `rmx --help` and the man page rmx(1) list them too.\n\
         A variable set to an empty value counts as unset.\n",
    );
    for section in Section::ALL {
        out.push_str(&format!("\n## {}\n\n", section.title()));
        out.push_str("| Variable | What it does |\n|---|---|\n");
        for v in ALL.iter().filter(|v| v.section == section) {
            out.push_str(&format!(
                "| `{}` | {} |\n",
                v.name,
                v.doc_text().replace('|', "\\|")
            ));
        }
    }
    out
}

/// The ENVIRONMENT section of a man page, in roff.
pub fn man_section() -> String {
    let mut out = String::from(".SH ENVIRONMENT\n");
    out.push_str("A variable set to an empty value counts as unset.\n");
    for section in Section::ALL {
        out.push_str(&format!(".SS \"{}\"\n", roff_escape(section.title())));
        for v in ALL.iter().filter(|v| v.section == section) {
            out.push_str(&format!(".TP\n\\fB{}\\fR\n", roff_escape(v.name)));
            out.push_str(&code_in_bold(&roff_escape(&v.doc_text())));
            out.push('\n');
        }
    }
    out
}

/// Text safe in a roff body line: backslashes and hyphens escaped, and no line starting with a
/// control character.
fn roff_escape(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// `code` spans (Markdown's backticks, as the table writes them) in bold.
fn code_in_bold(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push_str(if i % 2 == 1 { "\\fB" } else { "\\fR" });
        }
        out.push_str(part);
    }
    out
}

/// Words into lines of at most `width` characters (a longer word stands alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests;
