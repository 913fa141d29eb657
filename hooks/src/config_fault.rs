//! An imex.toml this node's programs cannot load (a bad key, value or
//! syntax, or a file or program it names that root must not trust): this
//! node's fault, by the one rule for a bad key (docs/blame.md, "A bad key
//! in imex.toml"). The one place that decides what it does to the node:
//!
//! - the prolog and epilog fail with its one line (Slurm drains the node
//!   and requeues the job) and keep our reason, `imex-health: config: <the
//!   line>`, in the node's standing ([`fail_hook`]), so that the next health
//!   check can attribute Slurm's "Prolog error" and show ours; no
//!   controller call is made from a hook here;
//! - `slurm-imex check --drain` on such a file drains the node with that
//!   reason, once, through the drain decision of a finding
//!   (`drain::act_on_check`: nothing asked while the standing says it is
//!   ours and shown) ([`check`]);
//! - `check --undrain` lifts it by itself once the file loads again and the
//!   node passes, as a GPU drain: it is not the IMEX class that waits for an
//!   admin (`drain::awaits_admin`), so deploying the fixed file is the whole
//!   repair.
//!
//! Where the standing lives and which scontrol runs come from what of the
//! file still reads ([`readable_keys`]).

use crate::drain::{self, CheckFlags, DrainAction};
use crate::exit::Exit;
use serde::Deserialize;
use slurm_imex_core::config::{
    self as core, bounds, ConfigFile, Document, NodeConfig, SlurmConfig,
};
use slurm_imex_core::error::{Error, Result};
use slurm_imex_core::hook::Hook;
use slurm_imex_core::slurm::node::NodeRead;
use slurm_imex_core::slurm::Scontrol;
use slurm_imex_core::state::{NodeState, StateDir};
use slurm_imex_core::timespec::now_s;
use slurm_imex_gpu::health::reasons::config_reason;
use std::path::Path;

/// The node's drain reason for a file that does not load:
/// `imex-health: config: <the line>`, printable and capped.
pub fn reason(error: &Error) -> String {
    drain::for_node(&config_reason(&error.to_string()))
}

/// A prolog's or epilog's end on a file it cannot load (`explicit`: the
/// path given, else the one the hook looks for): exit 1 with the line, and
/// the standing keeps our reason, in place of any drain it held before
/// (Slurm gave the node a job, so that one was lifted). Best effort: a
/// standing that cannot be saved is logged, the hook fails all the same.
pub fn fail_hook(hook: Hook, node: &str, explicit: Option<&Path>, error: &Error) -> Exit {
    let state = StateDir::of(&readable_keys(explicit));
    let mut standing = NodeState::load(&state);
    standing.set_drained(None);
    let action = DrainAction::Drain {
        reason: reason(error),
        shown: false,
    };
    action.record(&mut standing, now_s());
    if let Err(e) = standing.save(&state) {
        tracing::warn!("cannot keep the config drain in the node's standing: {e}");
    }
    Exit {
        code: 1,
        errors: vec![format!("{} on {node}: {error}", hook.program())],
    }
}

/// `slurm-imex check` on `node` with a file it cannot load: with `--drain`,
/// drain the node with our reason (unless the standing says it is ours and
/// shown, or an admin's drain holds it: never drained over); without it,
/// nothing (None). The error itself is the caller's (exit 2).
pub fn check(
    node: &str,
    explicit: Option<&Path>,
    error: &Error,
    flags: CheckFlags,
) -> Result<Option<DrainAction>> {
    if !flags.drain {
        return Ok(None);
    }
    let keys = readable_keys(explicit);
    let state = StateDir::of(&keys);
    let scontrol = Scontrol::of(&keys.slurm);
    let told = std::env::var("SLURM_NODE_IS_HEALTHY").ok();
    let slurm = NodeRead::new(&scontrol, node).telling(told.as_deref());
    let mut standing = NodeState::load(&state);
    let drain_only = CheckFlags {
        drain: true,
        undrain: false,
    };
    let action = drain::act_on_check(&slurm, &standing, Some(reason(error)), None, drain_only)?;
    let now = now_s();
    action.record(&mut standing, now);
    if slurm.answered() {
        standing.slurm_read_at = Some(now);
    }
    if let Err(e) = standing.save(&state) {
        tracing::warn!("cannot keep the config drain in the node's standing: {e}");
    }
    Ok(Some(action))
}

/// What of a file the programs refuse still says where the node's standing
/// lives and which scontrol runs: the plugin's keys when they load (old
/// names included), else `[node]` and `[slurm]` each alone when it reads
/// (`[node] state_dir` only when absolute, `[slurm] scontrol_timeout`
/// only within its bounds), else their defaults; a file
/// that cannot be read at all (missing, refused by the trust rule, not
/// TOML): the defaults.
pub fn readable_keys(explicit: Option<&Path>) -> core::Config {
    let Ok(ConfigFile {
        path,
        text: Some((_, text)),
    }) = ConfigFile::read(explicit)
    else {
        return core::Config::default();
    };
    let Ok(doc) = Document::parse(&text, &path) else {
        return core::Config::default();
    };
    if let Ok(keys) = core::Config::read(&doc) {
        return keys;
    }
    #[derive(Deserialize)]
    struct NodeAlone {
        #[serde(default)]
        node: NodeConfig,
    }
    #[derive(Deserialize)]
    struct SlurmAlone {
        #[serde(default)]
        slurm: SlurmConfig,
    }
    let mut keys = core::Config::default();
    if let Ok(NodeAlone { node }) = doc.read() {
        if node.state_dir.is_absolute() {
            keys.node = node;
        }
    }
    if let Ok(SlurmAlone { slurm }) = doc.read() {
        let mut with = core::Config::default();
        with.slurm = slurm;
        if bounds::first_violation(bounds::durations(&with), Vec::new()).is_none() {
            keys.slurm = with.slurm;
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("imex.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Where the standing lives and which scontrol runs, from what of a
    /// refused file reads: the plugin's keys, else [node] and [slurm] each
    /// alone, else the defaults.
    #[test]
    fn what_still_reads_of_a_refused_file_says_where_the_standing_is() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        let node = format!("[node]\nstate_dir = \"{}\"\n", state.display());
        let slurm = "[slurm]\nscontrol = \"/opt/slurm/bin/scontrol\"\n";
        // An engine key refused by the programs: the plugin's keys read.
        let p = file(
            d.path(),
            &format!("{node}{slurm}[imex.watch]\ninterval = \"0s\"\n"),
        );
        let keys = readable_keys(Some(&p));
        assert_eq!(keys.node.state_dir, state);
        assert_eq!(keys.slurm.scontrol, Path::new("/opt/slurm/bin/scontrol"));
        // A plugin key refused: [node] and [slurm] each alone.
        let p = file(
            d.path(),
            &format!("{node}{slurm}[imex]\nchannel_count = 1\n"),
        );
        let keys = readable_keys(Some(&p));
        assert_eq!(keys.node.state_dir, state);
        assert_eq!(keys.slurm.scontrol, Path::new("/opt/slurm/bin/scontrol"));
        // [node] itself refused, [slurm] out of its bounds: the defaults.
        let p = file(
            d.path(),
            "[node]\nstate_dir = \"run\"\n[slurm]\nscontrol_timeout = \"0s\"\n",
        );
        let keys = readable_keys(Some(&p));
        assert_eq!(keys.node, NodeConfig::default());
        assert_eq!(keys.slurm, SlurmConfig::default());
        // Not TOML, or no file at all: the defaults.
        let p = file(d.path(), "[node\n");
        assert_eq!(readable_keys(Some(&p)), core::Config::default());
        let missing = d.path().join("absent.toml");
        assert_eq!(readable_keys(Some(&missing)), core::Config::default());
    }

    #[test]
    fn the_reason_is_ours_the_config_class_and_bounded() {
        let e = Error::invalid(format!("bad config /e/imex.toml:3: {}", "x".repeat(5000)));
        let r = reason(&e);
        assert!(
            r.starts_with(&config_reason("bad config /e/imex.toml:3: ")),
            "{r}"
        );
        assert!(r.len() <= 300, "{}", r.len());
        let standing = NodeState {
            drained_since: Some(1),
            drained_for: Some(r),
            ..NodeState::default()
        };
        assert_eq!(drain::awaits_admin(&standing), None);
    }
}
