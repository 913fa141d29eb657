//! NVLink cliques as published in Slurm: each node's clique (read from its
//! GPUs by `slurm_imex_gpu::clique`) kept as the `nvlink_clique` key of the
//! node's `Extra` field, where `slurm-imex topology` reads every node's in
//! one `scontrol` call to write the rack map (`crate::rack::map`), and Slurm
//! 23.11+ can select on it (`sbatch --extra=...`). No prolog reads them.
//!
//! Extra is shared with admins and other tools: a JSON object there is
//! merged into (our key set, the rest kept); anything else is left untouched
//! and said once in the log. A published value is trusted only in the shape
//! `<uuid>.<id>` that the GPU side writes (`slurm_imex_core::clique`, the
//! one spelling both sides share, re-exported here).

pub use slurm_imex_core::clique::{canonical, is_clique};
use slurm_imex_core::error::Result;
use slurm_imex_core::slurm::node::NodeRead;
use slurm_imex_core::slurm::Scontrol;
use slurm_imex_core::state::StateDir;
use std::collections::BTreeMap;

/// The key slurm-imex owns in a node's Extra JSON object.
pub const EXTRA_KEY: &str = "nvlink_clique";

/// The clique published in `extra`, if it holds one we can trust, in its
/// [`canonical`] spelling.
pub fn clique_in_extra(extra: Option<&str>) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(extra?).ok()?;
    canonical(value.as_object()?.get(EXTRA_KEY)?.as_str()?)
}

/// `extra` with our key set to `clique`. Err (with the reason) when Extra
/// holds something other than a JSON object: it is someone else's, and is
/// left alone. (The reason is a clause an admin reads inside the caller's
/// line or `Published::LeftAlone`, not a failure: hence a String.)
pub fn merged_extra(extra: Option<&str>, clique: &str) -> std::result::Result<String, String> {
    let mut object = match extra.map(str::trim).filter(|e| !e.is_empty()) {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => {
                return Err(format!(
                    "its Extra is not a JSON object ({}), so slurm-imex leaves it alone",
                    slurm_imex_core::text::cap(text, 80)
                ))
            }
        },
    };
    object.insert(EXTRA_KEY.into(), clique.into());
    Ok(serde_json::Value::Object(object).to_string())
}

/// Every node Slurm knows, in its order, and the trusted clique of each
/// that publishes one: one `scontrol show node` call, for the tools that
/// run off the job path (`slurm-imex topology`, `doctor`).
pub fn published_cluster(scontrol: &Scontrol) -> Result<(Vec<String>, BTreeMap<String, String>)> {
    let nodes = scontrol.nodes(None)?;
    if let Some(at) = nodes.iter().position(|n| n.name.is_empty()) {
        return Err(slurm_imex_core::error::Error::new(format!(
            "scontrol show node printed a node with no NodeName (node {} of {}): no map \
             or list is made from an answer that names no node",
            at + 1,
            nodes.len()
        )));
    }
    let cliques = nodes
        .iter()
        .filter_map(|n| Some((n.name.clone(), clique_in_extra(n.extra.as_deref())?)))
        .collect();
    Ok((nodes.into_iter().map(|n| n.name).collect(), cliques))
}

/// What publishing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Slurm already had it (or we published it last, since boot).
    Unchanged,
    Updated,
    /// Extra holds someone else's text: left alone (the reason).
    LeftAlone(String),
}

/// Publish `clique` as `node`'s, merging into its Extra. Slurm is asked
/// only when `clique` differs from the state directory's note of what we
/// published last (a reboot clears it), so neither a job's prolog nor a
/// health check pays an RPC for a clique Slurm already has.
pub fn publish(state: &StateDir, slurm: &NodeRead, clique: &str) -> Result<Published> {
    if state.published_clique().as_deref() == Some(clique) {
        return Ok(Published::Unchanged);
    }
    let extra = slurm.get()?.extra.clone();
    if clique_in_extra(extra.as_deref()).as_deref() == Some(clique) {
        state.note_published_clique(clique);
        return Ok(Published::Unchanged);
    }
    let node = slurm.node();
    match merged_extra(extra.as_deref(), clique) {
        Ok(text) => {
            slurm.scontrol().set_extra(node, &text)?;
            state.note_published_clique(clique);
            Ok(Published::Updated)
        }
        Err(why) => {
            if state.note_extra_left_alone() {
                tracing::warn!("not publishing the NVLink clique of {node}: {why}");
            }
            Ok(Published::LeftAlone(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    #[test]
    fn every_spelling_of_a_clique_has_one_canonical_form() {
        for spelling in [
            C,
            "DC6E40C4-D722-4357-9BA6-5291DD461278.2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.0002",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.+2",
            "Dc6e40c4-d722-4357-9ba6-5291dd461278.+002",
        ] {
            assert_eq!(canonical(spelling).as_deref(), Some(C), "{spelling}");
            let extra = format!("{{\"nvlink_clique\":\"{spelling}\"}}");
            assert_eq!(clique_in_extra(Some(&extra)).as_deref(), Some(C));
        }
        assert!(is_clique(C));
        assert!(!is_clique("dc6e40c4-d722-4357-9ba6-5291dd461278.02"));
        for bad in [
            "x.2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.-2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278. 2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.0x2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.++2",
        ] {
            assert_eq!(canonical(bad), None, "{bad}");
        }
    }

    /// A stand-in scontrol that logs each call and answers `show node` with
    /// `extra` as the node's Extra.
    fn scontrol(dir: &std::path::Path, extra: &str) -> Scontrol {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("scontrol");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> {}/calls\n[ \"$1\" = show ] && echo 'NodeName=n1 State=IDLE Extra={extra} Partitions=p'\nexit 0\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scontrol::new(&script, std::time::Duration::from_secs(15))
    }

    #[test]
    fn a_clique_slurm_has_costs_no_call_after_the_first() {
        let d = tempfile::tempdir().unwrap();
        let cfg = scontrol(d.path(), r#"{"rack":"r7"}"#);
        let state = StateDir::new(&d.path().join("state"));
        let calls = || std::fs::read_to_string(d.path().join("calls")).unwrap_or_default();
        // Since boot, nothing noted: one read, one merge-write.
        let first = publish(&state, &NodeRead::new(&cfg, "n1"), C).unwrap();
        assert_eq!(first, Published::Updated);
        assert_eq!(calls().lines().count(), 2, "{}", calls());
        assert!(
            calls().contains(r#"Extra={"nvlink_clique":"#),
            "{}",
            calls()
        );
        // The same clique again: Slurm is not asked.
        let slurm = NodeRead::new(&cfg, "n1");
        assert_eq!(publish(&state, &slurm, C).unwrap(), Published::Unchanged);
        assert!(!slurm.asked());
        assert_eq!(calls().lines().count(), 2);
        // A new clique (the tray moved): asked again.
        let other = "dc6e40c4-d722-4357-9ba6-5291dd461278.3";
        assert_eq!(
            publish(&state, &NodeRead::new(&cfg, "n1"), other).unwrap(),
            Published::Updated
        );
        assert_eq!(calls().lines().count(), 4);
    }

    #[test]
    fn extra_is_merged_when_it_is_a_json_object_and_left_alone_otherwise() {
        assert_eq!(
            merged_extra(None, C).unwrap(),
            format!("{{\"nvlink_clique\":\"{C}\"}}")
        );
        let merged = merged_extra(Some(r#"{"rack":"r7","nvlink_clique":"old"}"#), C).unwrap();
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v["rack"], "r7");
        assert_eq!(v["nvlink_clique"], C);
        let e = merged_extra(Some("spare node, ask Bob"), C).unwrap_err();
        assert!(
            e.contains("not a JSON object") && e.contains("ask Bob"),
            "{e}"
        );
        assert!(merged_extra(Some("[1,2]"), C).is_err());
        assert_eq!(clique_in_extra(Some(&merged)).as_deref(), Some(C));
        assert_eq!(clique_in_extra(Some("spare")), None);
        assert_eq!(clique_in_extra(Some(r#"{"nvlink_clique":"rack1"}"#)), None);
        assert_eq!(clique_in_extra(None), None);
    }
}
