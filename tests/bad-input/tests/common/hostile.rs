//! Outside text made hostile, generically: every string of a value (its
//! serde_json form, object keys too) replaced by a tagged hostile text (ESC
//! sequences that clear the screen and set the window title, BEL, NUL,
//! `\r`, a newline followed by a forged table line, DEL, C1 CSI, a bidi
//! override, a line separator; some of them a megabyte long), and the same
//! replaced by a benign text of the same shape (each control character a
//! `?`). A command run on both must print the same lines, the hostile ones
//! printable, bounded and none forged ([`assert_same_shape`]). A field added
//! to a type is made hostile with the rest, with no change here.

#![allow(dead_code)]

use super::Ran;
use serde_json::Value;
use std::collections::BTreeMap;

/// What each hostile string holds after its tag.
pub const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{7}\u{0}\r\nFORGED  line  PASS  0\u{9b}31m\u{202e}\u{2028}\u{7f}\tend";
/// What follows a newline or a carriage return in [`HOSTILE`]: no line of
/// a command's output may start with it.
pub const FORGED: &str = "FORGED";
/// A line a command prints may be this long at most: a table row of 15
/// cells of at most 1 KiB each, or a line cut at 16 KiB.
pub const LINE_BOUND: usize = 20 * 1024;

/// Whether a character must never reach a terminal as it is.
pub fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// How each string is replaced: `hostile` or benign, and how many distinct
/// strings may be a megabyte long (within what the input can carry).
#[derive(Clone, Copy)]
pub struct Fill {
    pub hostile: bool,
    pub megabytes: usize,
}

impl Fill {
    pub fn hostile(megabytes: usize) -> Fill {
        Fill {
            hostile: true,
            megabytes,
        }
    }

    pub fn benign(megabytes: usize) -> Fill {
        Fill {
            hostile: false,
            megabytes,
        }
    }

    /// The text for the string numbered `n` (its tag, `v00012`), a
    /// megabyte long when `big`.
    pub fn text(&self, n: usize, big: bool) -> String {
        let mut t = format!("v{n:05}{HOSTILE}");
        if big {
            let piece = format!("{HOSTILE}{}", "x".repeat(100));
            t.push_str(&piece.repeat((1 << 20) / piece.len() + 1));
        }
        if self.hostile {
            t
        } else {
            t.chars()
                .map(|c| if unprintable(c) { '?' } else { c })
                .collect()
        }
    }
}

/// Every string in `v` replaced by `fill`'s text, and the keys of the
/// objects under a `maps` key (a map's keys are data: a throttle reason, a
/// counter's name; a struct's are its fields), the same original string by
/// the same text (a node named in many places stays one node), numbered in
/// the order met; the first `fill.megabytes` strings met that occur once
/// are a megabyte long. A string that is the value of one of the `keep`
/// keys (what must parse: a number in a label, an enum) stays.
pub fn fill_strings(v: &mut Value, keep: &[String], maps: &[String], fill: Fill) {
    let mut counts = BTreeMap::new();
    count_strings(v, &mut counts);
    let mut texts = Texts {
        fill,
        counts,
        seen: BTreeMap::new(),
        big_left: fill.megabytes,
    };
    walk(v, (keep, maps), &mut texts, false, false);
}

/// The replacement of each original string.
struct Texts {
    fill: Fill,
    counts: BTreeMap<String, usize>,
    seen: BTreeMap<String, String>,
    big_left: usize,
}

impl Texts {
    fn of(&mut self, s: &str) -> String {
        if let Some(t) = self.seen.get(s) {
            return t.clone();
        }
        let big = self.big_left > 0 && self.counts.get(s) == Some(&1);
        self.big_left -= usize::from(big);
        let t = self.fill.text(self.seen.len(), big);
        self.seen.insert(s.to_string(), t.clone());
        t
    }
}

fn count_strings(v: &Value, counts: &mut BTreeMap<String, usize>) {
    match v {
        Value::String(s) => *counts.entry(s.clone()).or_default() += 1,
        Value::Array(items) => items.iter().for_each(|i| count_strings(i, counts)),
        Value::Object(map) => {
            for (k, item) in map {
                *counts.entry(k.clone()).or_default() += 1;
                count_strings(item, counts);
            }
        }
        _ => {}
    }
}

/// `kept`: `v` is the value of a `keep` key (its strings, or its array's,
/// stay; an object below is walked afresh). `is_map`: `v`'s keys are data.
fn walk(
    v: &mut Value,
    (keep, maps): (&[String], &[String]),
    texts: &mut Texts,
    kept: bool,
    is_map: bool,
) {
    match v {
        Value::String(s) if !kept => *s = texts.of(s),
        Value::Array(items) => {
            for item in items {
                walk(item, (keep, maps), texts, kept, false);
            }
        }
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (k, mut item) in old {
                let (keep_this, a_map) = (keep.contains(&k), maps.contains(&k));
                walk(&mut item, (keep, maps), texts, keep_this, a_map);
                let key = if is_map { texts.of(&k) } else { k };
                map.insert(key, item);
            }
        }
        _ => {}
    }
}

/// The keys of `v` (any depth) whose strings cannot be replaced without
/// `T` refusing the value (an enum such as a blame): what
/// [`fill_strings`] must keep.
pub fn unreplaceable<T: serde::de::DeserializeOwned>(v: &Value) -> Vec<String> {
    keys_of(v)
        .into_iter()
        .filter(|k| {
            let mut one = v.clone();
            strings_under(&mut one, k, false);
            serde_json::from_value::<T>(one).is_err()
        })
        .collect()
}

/// The keys of `v` (any depth) whose objects are maps of `T` (their keys
/// are data, kept when renamed), not structs (whose renamed fields are
/// dropped or refused): what [`fill_strings`] renames the keys of.
pub fn maps_of<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Vec<String> {
    keys_of(v)
        .into_iter()
        .filter(|k| {
            let mut one = v.clone();
            if !rename_under(&mut one, k, false) {
                return false;
            }
            serde_json::from_value::<T>(one)
                .ok()
                .and_then(|t| serde_json::to_string(&t).ok())
                .is_some_and(|back| back.contains("renamed-key-"))
        })
        .collect()
}

fn keys_of(v: &Value) -> Vec<String> {
    fn collect(v: &Value, keys: &mut Vec<String>) {
        match v {
            Value::Array(items) => items.iter().for_each(|i| collect(i, keys)),
            Value::Object(map) => {
                for (k, item) in map {
                    keys.push(k.clone());
                    collect(item, keys);
                }
            }
            _ => {}
        }
    }
    let mut keys = Vec::new();
    collect(v, &mut keys);
    keys.sort();
    keys.dedup();
    keys
}

/// The strings that are the value of key `key` (or its array's items)
/// made hostile.
fn strings_under(v: &mut Value, key: &str, under: bool) {
    match v {
        Value::String(s) if under => *s = Fill::hostile(0).text(0, false),
        Value::Array(items) => items.iter_mut().for_each(|i| strings_under(i, key, under)),
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                strings_under(item, key, k == key);
            }
        }
        _ => {}
    }
}

/// The keys of the objects right under key `key` renamed; whether any was.
fn rename_under(v: &mut Value, key: &str, under: bool) -> bool {
    let mut any = false;
    match v {
        Value::Array(items) => {
            for i in items {
                any |= rename_under(i, key, under);
            }
        }
        Value::Object(map) if under => {
            let old = std::mem::take(map);
            any = !old.is_empty();
            for (k, item) in old {
                map.insert(format!("renamed-key-{k}"), item);
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                any |= rename_under(item, key, k == key);
            }
        }
        _ => {}
    }
    any
}

/// The field names of struct `T`, as its Deserialize lists them: a test
/// that fills a value of `T` checks that its example sets every one, so a
/// field added later is filled too (or the test says to set it).
pub fn fields_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    struct Grab<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Grab<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("fields read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Grab(&mut fields));
    assert!(
        !fields.is_empty(),
        "{} is not a struct",
        std::any::type_name::<T>()
    );
    fields
}

/// `example` (the serde_json form of a `T`) sets every field of `T`.
pub fn assert_every_field_set<T: serde::de::DeserializeOwned>(example: &Value) {
    let name = std::any::type_name::<T>();
    let set = example
        .as_object()
        .unwrap_or_else(|| panic!("{name}: not an object: {example}"));
    for f in fields_of::<T>() {
        assert!(
            set.contains_key(*f),
            "the example {name} leaves `{f}` unset (or at a value it does not serialize): set it, \
             so its text is made hostile with the rest"
        );
    }
}

/// The hostile run printed what the benign run printed, line for line: the
/// same exit status, the same number of lines on each stream, each line
/// beginning as the benign one does (its indent and the first six
/// characters of its first word: a tag `v00012`, or the program's own
/// word); and no control character, no line longer than [`LINE_BOUND`],
/// no line beginning with the [`FORGED`] text a newline led.
pub fn assert_same_shape(case: &str, hostile: &Ran, benign: &Ran) {
    assert_same_shape_by(case, hostile, benign, shape)
}

/// [`assert_same_shape`], each line's beginning as `shape` takes it (for
/// output whose first word is a verdict the text may change, such as
/// doctor's).
pub fn assert_same_shape_by<S: PartialEq + std::fmt::Debug>(
    case: &str,
    hostile: &Ran,
    benign: &Ran,
    shape: fn(&str) -> S,
) {
    hostile.ended_without_panic(case);
    assert_eq!(
        hostile.code, benign.code,
        "{case}: exit status; hostile stderr: {}; benign stderr: {}",
        hostile.stderr, benign.stderr
    );
    for (stream, h, b) in [
        ("stdout", &hostile.stdout, &benign.stdout),
        ("stderr", &hostile.stderr, &benign.stderr),
    ] {
        assert_printable(&format!("{case} ({stream})"), h);
        let (hl, bl): (Vec<&str>, Vec<&str>) = (h.lines().collect(), b.lines().collect());
        assert_eq!(
            hl.len(),
            bl.len(),
            "{case}: {stream} has {} lines where the benign run has {}: {}",
            hl.len(),
            bl.len(),
            diff(&hl, &bl, shape)
        );
        for (i, (h, b)) in hl.iter().zip(&bl).enumerate() {
            assert_eq!(
                shape(h),
                shape(b),
                "{case}: {stream} line {i} begins otherwise than the benign run's:\n{}\n{}",
                short(h),
                short(b)
            );
        }
    }
}

/// Every line printable, bounded, and none forged.
pub fn assert_printable(case: &str, text: &str) {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{case}: the last line is not ended"
    );
    for l in text.lines() {
        assert!(
            !l.chars().any(unprintable),
            "{case}: a control character reaches the terminal: {}",
            short(&format!("{l:?}"))
        );
        assert!(
            l.len() <= LINE_BOUND,
            "{case}: a line of {} bytes: {}",
            l.len(),
            short(l)
        );
        assert!(
            !l.trim_start().starts_with(FORGED),
            "{case}: a forged line: {}",
            short(l)
        );
    }
}

/// A line's indent and the first six characters of its first word.
pub fn shape(line: &str) -> (usize, String) {
    let indent = line.len() - line.trim_start().len();
    let word = line.split_whitespace().next().unwrap_or("");
    (indent, word.chars().take(6).collect())
}

fn short(l: &str) -> String {
    l.chars().take(300).collect()
}

fn diff<S: PartialEq>(h: &[&str], b: &[&str], shape: fn(&str) -> S) -> String {
    let at = h
        .iter()
        .zip(b)
        .position(|(h, b)| shape(h) != shape(b))
        .unwrap_or(h.len().min(b.len()));
    format!(
        "first difference at line {at}:\nhostile: {}\nbenign:  {}",
        h.get(at).map_or("(none)".into(), |l| short(l)),
        b.get(at).map_or("(none)".into(), |l| short(l))
    )
}
