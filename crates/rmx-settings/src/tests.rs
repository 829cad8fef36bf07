#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn names_are_unique_and_documented() {
    let mut names: Vec<&str> = ALL.iter().map(|v| v.name).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "a variable is declared twice");
    for v in ALL {
        assert!(!v.doc_text().is_empty(), "{} has no documentation", v.name);
        assert!(
            v.doc_text().ends_with('.'),
            "{}: end its doc with a full stop",
            v.name
        );
    }
    assert_eq!(EnvVars::RMX_HOME, "RMX_HOME");
}

#[test]
fn every_section_has_a_variable() {
    for s in Section::ALL {
        assert!(ALL.iter().any(|v| v.section == s), "{s:?} is empty");
    }
}

/// rmx-mlx's build script reads its variables itself (see the crate docs); they must be the
/// table's build section, no more and no fewer.
#[test]
fn the_build_script_reads_the_build_section() {
    let script = include_str!("../../rmx-mlx/build/locate.rs");
    let start = script.find("pub const BUILD_VARS").unwrap();
    let end = start + script[start..].find("];").unwrap();
    let listed: Vec<&str> = script[start..end].split('"').skip(1).step_by(2).collect();
    let declared: Vec<&str> = ALL
        .iter()
        .filter(|v| v.section == Section::Build)
        .map(|v| v.name)
        .collect();
    assert_eq!(listed, declared);
}

#[test]
fn parse_helpers() {
    // The only test that sets this variable.
    let name = EnvVars::RMX_DEBUG_FREE_SPACE;
    std::env::set_var(name, " 12 ");
    assert_eq!(number::<u64>(name), Ok(Some(12)));
    std::env::set_var(name, "  ");
    assert_eq!(var(name), None);
    assert_eq!(number::<u64>(name), Ok(None));
    std::env::set_var(name, "lots");
    assert_eq!(
        number::<u64>(name),
        Err(format!("{name}=`lots` is not a number"))
    );
    std::env::remove_var(name);
    assert_eq!(wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
    assert_eq!(roff_escape(".x-y"), "\\&.x\\-y");
    assert_eq!(code_in_bold("a `b` c"), "a \\fBb\\fR c");
}

#[test]
fn generated_docs_name_every_variable() {
    let (help, md, man) = (help_text(), markdown(), man_section());
    for v in ALL {
        assert!(md.contains(v.name), "{}", v.name);
        assert!(man.contains(&roff_escape(v.name)), "{}", v.name);
        if v.section.in_help() {
            assert!(help.contains(v.name), "{}", v.name);
        }
    }
}

/// docs/settings.md is the table as Markdown; regenerate it with
/// `cargo run -p rmx-cli -- completions --write`.
#[test]
fn docs_settings_md_is_in_sync_with_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/settings.md");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == markdown(),
        "docs/settings.md is out of date: run `cargo run -p rmx-cli -- completions --write`"
    );
}
