//! Where a key sits in the config text: the dotted key and line number an
//! error message names. toml's own errors carry a byte span but not the key
//! ("invalid type: string \"many\", expected i64"); toml's own spanned
//! document (`toml::de::DeTable`) keeps the spans of every key and value,
//! so we look the key up there. (toml_edit did this before; toml's parser
//! does it without linking a second TOML parser into the SPANK plugin.)

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = floor_char_boundary(text, offset.min(text.len()));
    text[..end].matches('\n').count() + 1
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The dotted key (`imex.daemon.ctl_timeout`) whose key or value covers
/// byte `offset`, if any.
pub fn key_at(text: &str, offset: usize) -> Option<String> {
    match DeTable::parse(text) {
        Ok(doc) => find_in_table(text, doc.get_ref(), offset, ""),
        Err(_) => key_on_line(text, offset),
    }
}

/// When the text does not even lex (a number too large for 64 bits, a bad
/// float), there are no spans either. Then the key is read from the
/// error's line itself (`name = …`, a bare or dotted key) and its table from
/// the last `[header]` above it. Hand-rolled because no parser can be asked
/// about a document that does not parse; quoted keys are not attempted.
fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let end = floor_char_boundary(text, offset.min(text.len()));
    let start = text[..end].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    let bare = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|p| {
                let p = p.trim();
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
    };
    if !bare(key) {
        return None;
    }
    let key: Vec<&str> = key.split('.').map(str::trim).collect();
    let table = text[..start].lines().rev().find_map(|l| {
        let l = l.trim();
        let inner = l.strip_prefix('[')?.split_once(']')?.0.trim();
        (!inner.starts_with('[') && bare(inner)).then(|| inner.to_string())
    });
    Some(match table {
        Some(t) => format!("{t}.{}", key.join(".")),
        None => key.join("."),
    })
}

fn find_in_table(text: &str, table: &DeTable, offset: usize, prefix: &str) -> Option<String> {
    for (name, item) in table.iter() {
        let path = if prefix.is_empty() {
            name.get_ref().to_string()
        } else {
            format!("{prefix}.{}", name.get_ref())
        };
        let covers = |span: std::ops::Range<usize>| {
            span.start <= offset && offset < span.end.max(span.start + 1)
        };
        if let DeValue::Table(sub) = item.get_ref() {
            if let Some(found) = find_in_table(text, sub, offset, &path) {
                return Some(found);
            }
            // A `[header]` table (or one a dotted key implies) is named by
            // the keys inside it; an inline `{ ... }` one is a value too.
            if !is_inline_table(text, item) {
                continue;
            }
        }
        if covers(item.span()) || covers(name.span()) {
            return Some(path);
        }
    }
    None
}

fn is_inline_table(text: &str, item: &Spanned<DeValue>) -> bool {
    text.get(item.span().start..)
        .is_some_and(|rest| rest.starts_with('{'))
}

/// Line of the dotted key `path` in `text`, if it is written there.
pub fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let doc = DeTable::parse(text).ok()?;
    line_in(text, &doc, path)
}

/// [`line_of_key`] for each of `paths`, the text parsed once; the keys
/// the text does not write are left out.
pub fn lines_of_keys<'k>(text: &str, paths: &[&'k str]) -> Vec<(&'k str, usize)> {
    match DeTable::parse(text) {
        Ok(doc) => paths
            .iter()
            .filter_map(|p| Some((*p, line_in(text, &doc, p)?)))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn line_in(text: &str, doc: &Spanned<DeTable>, path: &str) -> Option<usize> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop()?;
    // A key may sit in a `[table]` or an inline `{ ... }` one
    // (`slurm = { scontrol = "/b" }`), and both are the key written.
    let mut table: &DeTable = doc.get_ref();
    for p in parts {
        table = table.get(p)?.get_ref().as_table()?;
    }
    let (key, _) = table.get_key_value(last)?;
    Some(line_of(text, key.span().start))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "# c\n[imex]\nmax_nodes = 4\n\n[imex.daemon]\nctl_timeout = \"many\"\n[database]\nretention = 0\n";

    #[test]
    fn finds_keys_by_offset_and_lines_by_key() {
        let at = TEXT.find("\"many\"").unwrap();
        assert_eq!(key_at(TEXT, at).as_deref(), Some("imex.daemon.ctl_timeout"));
        assert_eq!(line_of(TEXT, at), 6);
        assert_eq!(line_of_key(TEXT, "imex.max_nodes"), Some(3));
        assert_eq!(line_of_key(TEXT, "database.retention"), Some(8));
        assert_eq!(line_of_key(TEXT, "imex.port_base"), None);
        let inline = "[health]\nscontrol = \"/b\"\n[imex]\ndaemon = { ctl_timeout = \"1s\" }\n";
        assert_eq!(line_of_key(inline, "imex.daemon.ctl_timeout"), Some(4));
        let inline = "slurm = { scontrol = \"/a\" }\n";
        assert_eq!(line_of_key(inline, "slurm.scontrol"), Some(1));
        assert_eq!(key_at(TEXT, 0), None);
        // A header line names no key; a value inside an inline table names
        // the key it is the value of.
        assert_eq!(key_at(TEXT, TEXT.find("[imex.daemon]").unwrap()), None);
        let inline = "[imex]\ndaemon = { ctl_timeout = \"many\" }\n";
        let at = inline.find("\"many\"").unwrap();
        assert_eq!(
            key_at(inline, at).as_deref(),
            Some("imex.daemon.ctl_timeout")
        );
    }

    #[test]
    fn a_value_that_does_not_lex_still_names_its_key() {
        let t = "[imex]\nport_base = 1\n\n[imex.daemon]\n stop_timeout = 99999999999999999999\n";
        let at = t.find("999").unwrap();
        assert_eq!(key_at(t, at).as_deref(), Some("imex.daemon.stop_timeout"));
        let t = "max_nodes = 1e400\n";
        assert_eq!(key_at(t, 12).as_deref(), Some("max_nodes"));
        assert_eq!(key_at("[a]\n\"q k\" = 1e400\n", 10), None);
    }

    #[test]
    fn offsets_past_the_end_or_inside_a_character_are_safe() {
        assert_eq!(line_of("é\n", 1), 1);
        assert_eq!(line_of("a\nb", 99), 2);
        // A document that does not parse: the key on the offset's line.
        assert_eq!(key_at("not = [toml", 3).as_deref(), Some("not"));
        assert_eq!(key_at("[toml", 3), None);
        assert_eq!(key_at("[a]\nb = [\n", 99).as_deref(), None);
    }
}
