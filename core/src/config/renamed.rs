//! Keys that moved keep working under their old names: the old key's
//! value is read into the new one (with a deprecation line naming the line
//! to change), both names with different values are refused, and lines
//! about such a value name the key as the admin wrote it.

use super::{key_label, locate};
use crate::error::{Error, Result};
use std::path::Path;

/// The keys a file gave under an old name: (new, old) pairs, so an error
/// about the value names the key the admin wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Renamed(Vec<(&'static str, &'static str)>);

impl Renamed {
    /// The old key was read into the new one: refuse it when the new key is
    /// also written, with another value (`seen`: the old key's value and
    /// the new key's, as the file writes them), else note the deprecation.
    pub(super) fn note(
        &mut self,
        text: &str,
        origin: &Path,
        (old, new): (&'static str, &'static str),
        (value, mine): (String, String),
        deprecations: &mut Vec<String>,
    ) -> Result<()> {
        let at = |key: &str| match locate::line_of_key(text, key) {
            Some(l) => format!("{}:{l}", origin.display()),
            None => origin.display().to_string(),
        };
        if locate::line_of_key(text, new).is_some() && value != mine {
            return Err(Error::invalid(format!(
                "bad config {}: {} = {value} and {} = {mine} disagree: keep only {}",
                at(old),
                key_label(old),
                key_label(new),
                key_label(new)
            )));
        }
        deprecations.push(format!(
            "{}: {} is deprecated: rename it to {} (same meaning)",
            at(old),
            key_label(old),
            key_label(new)
        ));
        self.0.push((new, old));
        Ok(())
    }

    /// The key as the file wrote it.
    pub(super) fn as_written(&self, key: &'static str) -> &'static str {
        self.0
            .iter()
            .find(|(new, _)| *new == key)
            .map_or(key, |(_, old)| old)
    }
}

/// An old key's value, if set, put under its new name; both values, old
/// first, as the config file would spell them (for the conflict check).
pub(super) fn move_renamed<T>(
    old: Option<T>,
    new: &mut T,
    spell: impl Fn(&T) -> String,
) -> Option<(String, String)> {
    let mine = std::mem::replace(new, old?);
    Some((spell(new), spell(&mine)))
}
