//! What a section says of each of its keys, where the section is defined:
//! its default as imex.toml writes it and one line of what it does ([`Key`],
//! one const table per section, [`Documented::KEYS`]). The settings
//! reference (docs/settings.md, `slurm-imex config --reference`) is rendered
//! from these tables, and [`check_keys`] holds a table to its struct: the
//! same keys as serde reads, and defaults that read back as the struct's
//! own `Default`.

use super::field_names;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Debug;

/// One key of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub name: &'static str,
    /// Its default as a TOML value (`2048`, `"60s"`, `"auto"`); None for a
    /// key that is unset unless written.
    pub default: Option<&'static str>,
    /// What it does, in one line.
    pub about: &'static str,
}

impl Key {
    /// A key and its default (a TOML value).
    pub const fn new(name: &'static str, default: &'static str, about: &'static str) -> Key {
        Key {
            name,
            default: Some(default),
            about,
        }
    }

    /// A key that is unset unless written.
    pub const fn unset(name: &'static str, about: &'static str) -> Key {
        Key {
            name,
            default: None,
            about,
        }
    }
}

/// A section whose keys are documented beside its struct.
pub trait Documented: Default + Serialize + DeserializeOwned + PartialEq + Debug {
    /// The table, dotted (`imex.daemon`).
    const TABLE: &'static str;
    /// Who reads it, for the reference.
    const READ_BY: &'static str;
    /// Every key the section reads, in the order imex.toml gives them.
    const KEYS: &'static [Key];
    /// Old names still read (each moved to a new key), documented there.
    const OLD_NAMES: &'static [&'static str] = &[];
}

/// `S`'s key table against `S` itself; each difference as one line.
/// - the keys: the table's and the old names are every key serde reads,
///   but the subtables (a table-valued key of the default);
/// - the defaults: a key with one is in the serialized `Default`, a key
///   unset is not, and the table's defaults, read as a file, give `Default`;
/// - each `about` is one line.
pub fn check_keys<S: Documented>() -> Result<(), String> {
    let table = toml::Table::try_from(S::default())
        .map_err(|e| format!("[{}]: its default does not serialize: {e}", S::TABLE))?;
    let subtables: BTreeSet<&str> = table
        .iter()
        .filter(|(_, v)| v.is_table())
        .map(|(k, _)| k.as_str())
        .collect();
    let mut problems = Vec::new();
    let read: BTreeSet<&str> = field_names::<S>().iter().copied().collect();
    let documented: BTreeSet<&str> = S::KEYS.iter().map(|k| k.name).collect();
    let named: BTreeSet<&str> = documented
        .iter()
        .chain(S::OLD_NAMES)
        .chain(&subtables)
        .copied()
        .collect();
    for key in read.difference(&named) {
        problems.push(format!("[{}] {key} is read but not documented", S::TABLE));
    }
    for key in named.difference(&read) {
        problems.push(format!("[{}] {key} is documented but not read", S::TABLE));
    }
    for key in S::KEYS {
        let serialized = table.contains_key(key.name) && !subtables.contains(key.name);
        match key.default {
            Some(_) if !serialized => problems.push(format!(
                "[{}] {} has a documented default but is unset by default",
                S::TABLE,
                key.name
            )),
            None if serialized => problems.push(format!(
                "[{}] {} is documented unset but has a default",
                S::TABLE,
                key.name
            )),
            _ => {}
        }
        if key.about.is_empty() || key.about.contains('\n') {
            problems.push(format!(
                "[{}] {}: about is not one line",
                S::TABLE,
                key.name
            ));
        }
    }
    if let Err(e) = documented_defaults_are_the_codes::<S>() {
        problems.push(e);
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("\n")),
    }
}

/// The table's defaults, written as a file of `name = default` lines, read
/// back as `S`: they must give `S::default()`.
fn documented_defaults_are_the_codes<S: Documented>() -> Result<(), String> {
    let text: String = S::KEYS
        .iter()
        .filter_map(|k| Some(format!("{} = {}\n", k.name, k.default?)))
        .collect();
    let read: S = toml::from_str(&text)
        .map_err(|e| format!("[{}]: the documented defaults do not read: {e}", S::TABLE))?;
    if read != S::default() {
        return Err(format!(
            "[{}]: the documented defaults differ from the code's:\n  documented {read:?}\n  code       {:?}",
            S::TABLE,
            S::default()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct Two {
        a: u32,
        b: Option<String>,
    }

    impl Documented for Two {
        const TABLE: &'static str = "two";
        const READ_BY: &'static str = "a test";
        const KEYS: &'static [Key] = &[Key::new("a", "0", "A."), Key::unset("b", "B.")];
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct Wrong {
        a: u32,
        c: u32,
    }

    impl Documented for Wrong {
        const TABLE: &'static str = "wrong";
        const READ_BY: &'static str = "a test";
        const KEYS: &'static [Key] = &[Key::new("a", "1", "A."), Key::new("b", "0", "B.")];
    }

    #[test]
    fn a_table_that_matches_its_struct_passes_and_each_difference_is_named() {
        assert_eq!(check_keys::<Two>(), Ok(()));
        let e = check_keys::<Wrong>().unwrap_err();
        assert!(e.contains("[wrong] c is read but not documented"), "{e}");
        assert!(e.contains("[wrong] b is documented but not read"), "{e}");
        assert!(e.contains("the documented defaults"), "{e}");
    }
}
