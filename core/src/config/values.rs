//! The value types a config key is written in, whatever its section: a
//! duration (`"60s"`, `"500ms"`, or seconds) and a path that may also be
//! "auto" or "none".

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::path::PathBuf;
use std::time::Duration;

/// A path that may also be "auto" (found the way Slurm finds it) or "none".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoPath {
    Auto,
    None,
    Path(PathBuf),
}

/// As the config writes it: "auto", "none" or the path.
impl Serialize for AutoPath {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            AutoPath::Auto => s.serialize_str("auto"),
            AutoPath::None => s.serialize_str("none"),
            AutoPath::Path(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for AutoPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "auto" => Ok(AutoPath::Auto),
            "none" => Ok(AutoPath::None),
            p if p.starts_with('/') => Ok(AutoPath::Path(PathBuf::from(p))),
            other => Err(de::Error::custom(format!(
                "\"{other}\" is neither \"auto\", \"none\" nor an absolute path"
            ))),
        }
    }
}

/// A duration written as `"60s"`, `"500ms"`, `"2m"`, or a number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

/// As the config writes it: `30s`, `1m 30s`, `500ms`.
impl std::fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// As the config writes it, a string (`"1m"`).
impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Secs(i64),
            Text(String),
            Other(toml::Value),
        }
        match Raw::deserialize(d)? {
            Raw::Secs(s) if s < 0 => Err(de::Error::custom(format!(
                "{s} is negative: write a duration such as \"60s\""
            ))),
            Raw::Secs(s) => Ok(HumanDuration(Duration::from_secs(s as u64))),
            Raw::Text(t) => humantime::parse_duration(t.trim())
                .map(HumanDuration)
                .map_err(|e| {
                    de::Error::custom(format!(
                        "\"{t}\" is not a duration ({e}): write e.g. \"60s\", \"500ms\" or \"2m\""
                    ))
                }),
            Raw::Other(v) => Err(de::Error::custom(format!(
                "a {} is not a duration: write e.g. \"60s\", \"500ms\" or \"2m\"",
                v.type_str()
            ))),
        }
    }
}
