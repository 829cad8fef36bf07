//! Issue #21: every built-in alias names a family the engine loads. The alias table (rmx-store,
//! no MLX) records each repo's config.json `model_type`; the engine's list comes from
//! rmx-models, which only a crate that links both can hold side by side.

use std::collections::BTreeMap;

#[test]
fn issue_21_every_builtin_alias_is_a_family_rmx_loads() {
    let supported = rmx_engine::supported_model_types();
    // Family -> the aliases that name it, so a failure lists each missing family once.
    let mut missing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for alias in rmx_store::aliases::builtin_aliases() {
        let family = alias.family.as_deref().unwrap_or("(none recorded)");
        if !supported.contains(&family) {
            missing.entry(family).or_default().push(&alias.name);
        }
    }
    assert!(
        missing.is_empty(),
        "built-in aliases name families rmx does not load (supported: {}):\n{}",
        supported.join(", "),
        missing
            .iter()
            .map(|(family, names)| format!("  {family}: {}", names.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
