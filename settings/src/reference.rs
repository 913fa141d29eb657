//! The settings reference: every key of imex.toml with its default and
//! what it does, rendered from the table each section keeps beside its
//! struct (`slurm_imex_core::config::Documented`), in the file's order. It
//! is docs/settings.md and what `slurm-imex config --reference` prints; the
//! tests hold that page, the shipped conf-examples/imex.toml and each
//! section's table to the code.

use slurm_imex_core::config::{check_keys, Documented, ImexConfig, Key, NodeConfig, SlurmConfig};
use slurm_imex_domain::config::{AddressesConfig, DaemonConfig, EngineConfig, WatchConfig};
use slurm_imex_gpu::config::{GpuConfig, HealthConfig};
use slurm_imex_jobdb::config::{DatabaseConfig, MetricsConfig};
use slurm_imex_jobview::config::JobViewConfig;

/// One section's part of the reference.
pub struct SectionDoc {
    /// The table, dotted (`imex.daemon`).
    pub table: &'static str,
    /// Which of the table's keys, where two readers share it.
    pub part: &'static str,
    pub read_by: &'static str,
    pub keys: &'static [Key],
    /// The check of its table against its struct.
    pub check: fn() -> Result<(), String>,
}

fn doc<S: Documented>(part: &'static str) -> SectionDoc {
    SectionDoc {
        table: S::TABLE,
        part,
        read_by: S::READ_BY,
        keys: S::KEYS,
        check: check_keys::<S>,
    }
}

/// Every section of the file, in conf-examples/imex.toml's order.
pub fn sections() -> Vec<SectionDoc> {
    vec![
        doc::<NodeConfig>(""),
        doc::<ImexConfig>("the channel keys"),
        doc::<EngineConfig>("the domain engine's keys"),
        doc::<DaemonConfig>(""),
        doc::<WatchConfig>(""),
        doc::<AddressesConfig>(""),
        doc::<SlurmConfig>(""),
        doc::<GpuConfig>(""),
        doc::<HealthConfig>(""),
        doc::<DatabaseConfig>(""),
        doc::<MetricsConfig>(""),
        doc::<JobViewConfig>(""),
    ]
}

/// What docs/settings.md says before the tables.
const PREAMBLE: &str = "# Settings: every key of imex.toml

Every key of `/etc/slurm/imex.toml`, with its default and what it does.
Every key is optional and the file may be absent; a key unset is at its
default. This page is generated from the code, from the table each section
keeps beside its struct: `slurm-imex config --reference` prints it, and
`cargo test -p slurm-imex-settings` fails when this page, or
[conf-examples/imex.toml](../conf-examples/imex.toml), lacks a key the code
reads, names one it does not, or gives another default
(`UPDATE_SETTINGS_REFERENCE=1 cargo test -p slurm-imex-settings reference`
writes this page again). What a bad key does, and where it is found first:
[install.md](install.md#a-bad-key-in-imextoml). The file's trust rule and
the value syntax (durations are `\"500ms\"`, `\"60s\"`, `\"2m\"`, `\"180d\"`
or a number of seconds): [conf-examples/imex.toml](../conf-examples/imex.toml).
";

/// The reference, as Markdown: a heading, who reads it and a table of its
/// keys for each section.
pub fn markdown() -> String {
    let mut out = String::from(PREAMBLE);
    for s in sections() {
        let part = match s.part {
            "" => String::new(),
            part => format!(": {part}"),
        };
        out.push_str(&format!("\n## `[{}]`{part}\n\n", s.table));
        out.push_str(&format!("Read by {}.\n\n", s.read_by));
        out.push_str("| key | default | what it does |\n|---|---|---|\n");
        for k in s.keys {
            let default = k.default.map_or("unset".into(), |d| format!("`{d}`"));
            let about = k.about.replace('|', "\\|");
            out.push_str(&format!("| `{}` | {default} | {about} |\n", k.name));
        }
    }
    out
}

#[cfg(test)]
mod tests;
