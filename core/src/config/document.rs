//! The config text parsed once ([`Document`]): each reader takes its
//! sections from it (the plugin its own, the programs every section), and
//! every error about it is one line naming `file:line`, the key and the fix
//! (`bad config /etc/slurm/imex.toml:12: [imex.watch] interval = …`).

use super::{locate, Section};
use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::path::Path;
use toml::de::{DeTable, Deserializer};
use toml::Spanned;

/// What every error about a key adds: where the keys are explained.
const WHERE_DOCUMENTED: &str = "(every key is documented in conf-examples/imex.toml)";

/// The config text, parsed (and so known to be TOML), with where it came
/// from for the error lines.
pub struct Document<'a> {
    text: &'a str,
    origin: &'a Path,
    table: Spanned<DeTable<'a>>,
}

impl<'a> Document<'a> {
    /// Parse `text`; `origin` names the file in error messages.
    pub fn parse(text: &'a str, origin: &'a Path) -> Result<Document<'a>> {
        let table = DeTable::parse(text).map_err(|e| toml_error(text, origin, &e))?;
        Ok(Document {
            text,
            origin,
            table,
        })
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    pub fn origin(&self) -> &'a Path {
        self.origin
    }

    /// The sections `T` reads, as the text writes them (a section or key
    /// `T` does not name is refused only if `T` says so).
    pub fn read<T: DeserializeOwned>(&self) -> Result<T> {
        let deserializer = Deserializer::from(self.table.clone());
        T::deserialize(deserializer).map_err(|e| toml_error(self.text, self.origin, &e))
    }

    /// A section's bounds, checked: its first bad value as one line.
    pub fn check(&self, section: &dyn Section) -> Result<()> {
        match section.first_problem() {
            Some((key, why)) => Err(self.bad_value(key, &why)),
            None => Ok(()),
        }
    }

    /// `bad config file:line: [section] key = <why>`, for the dotted `key`.
    pub fn bad_value(&self, key: &str, why: &str) -> Error {
        Error::invalid(format!(
            "bad config {}: {} = {why}",
            self.place(key),
            key_label(key)
        ))
    }

    /// `file:line` of the dotted `key`, the file alone when the text does
    /// not write it.
    pub fn place(&self, key: &str) -> String {
        match locate::line_of_key(self.text, key) {
            Some(l) => format!("{}:{l}", self.origin.display()),
            None => self.origin.display().to_string(),
        }
    }

    /// Refuse the first key of the table `table` (`imex`) that none of its
    /// readers knows (`known`: each reader's keys), as serde refuses an
    /// unknown key of a section that has one reader. A table several
    /// readers share is read by each with the others' keys ignored, so the
    /// whole file's reader asks this of it.
    pub fn refuse_unknown_keys(&self, table: &str, known: &[&[&str]]) -> Result<()> {
        let Some(section) = self.table.get_ref().get(table) else {
            return Ok(());
        };
        let Some(keys) = section.get_ref().as_table() else {
            return Ok(()); // not a table: its readers said so already
        };
        for (name, _) in keys.iter() {
            let key = name.get_ref().as_ref();
            if known.iter().any(|k| k.contains(&key)) {
                continue;
            }
            let mut expected: Vec<&str> = known.iter().flat_map(|k| k.iter().copied()).collect();
            expected.sort_unstable();
            let expected: Vec<String> = expected.iter().map(|k| format!("`{k}`")).collect();
            let line = locate::line_of(self.text, name.span().start);
            return Err(Error::invalid(format!(
                "bad config {}:{line}: {}: unknown field `{key}`, expected one of {} {WHERE_DOCUMENTED}",
                self.origin.display(),
                key_label(&format!("{table}.{key}")),
                expected.join(", ")
            )));
        }
        Ok(())
    }
}

/// toml's error as one line naming `file:line`, the key and the fix.
fn toml_error(text: &str, origin: &Path, e: &toml::de::Error) -> Error {
    let offset = e.span().map(|s| s.start);
    let at = match offset {
        Some(o) => format!("{}:{}", origin.display(), locate::line_of(text, o)),
        None => origin.display().to_string(),
    };
    let key = offset
        .and_then(|o| locate::key_at(text, o))
        .map(|k| format!("{}: ", key_label(&k)))
        .unwrap_or_default();
    let msg = plain_message(e.message());
    Error::invalid(format!("bad config {at}: {key}{msg} {WHERE_DOCUMENTED}"))
}

/// toml's message on one line. An integer past 64 bits reaches serde as an
/// i128 ("invalid type: integer `99999999999999999999` as i128, expected
/// u16"); it is said as what it is, a number too large for the key.
fn plain_message(message: &str) -> String {
    let msg = message.trim().replace('\n', " ");
    if msg.starts_with("invalid type: integer `") && msg.contains("` as i128, expected ") {
        return "number too large to fit in target type".to_string();
    }
    msg
}

/// `imex.daemon.ctl` as an admin reads it: `[imex.daemon] ctl`.
pub fn key_label(dotted: &str) -> String {
    match dotted.rsplit_once('.') {
        Some((section, key)) => format!("[{section}] {key}"),
        None => dotted.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Mine {
        a: u32,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct File {
        t: Mine,
    }

    #[test]
    fn each_reader_reads_the_one_parse_and_errors_name_line_and_key() {
        let origin = Path::new("/e/imex.toml");
        let doc = Document::parse("[t]\n\na = \"x\"\nb = 1\n", origin).unwrap();
        let e = doc.read::<File>().err().unwrap().to_string();
        assert!(
            e.starts_with("bad config /e/imex.toml:3: [t] a: invalid type"),
            "{e}"
        );
        let doc = Document::parse("[t]\na = 7\nb = 1\n", origin).unwrap();
        assert_eq!(doc.read::<File>().unwrap().t.a, 7);
        let e = doc.refuse_unknown_keys("t", &[&["a"]]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad config /e/imex.toml:3: [t] b: unknown field `b`, expected one of `a` \
             (every key is documented in conf-examples/imex.toml)"
        );
        assert!(doc.refuse_unknown_keys("t", &[&["a"], &["b"]]).is_ok());
        assert!(doc.refuse_unknown_keys("absent", &[]).is_ok());
        let e = Document::parse("[t\n", origin).err().unwrap().to_string();
        assert!(e.starts_with("bad config /e/imex.toml:1: "), "{e}");
    }
}
