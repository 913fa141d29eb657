//! What this node has learned about itself since boot: the NVLink clique it
//! published in its Extra field (so a prolog pays an RPC only when the
//! clique changed), whether it has already said once that Extra holds
//! someone else's text, whether it has said once that a prolog turned NVML
//! accounting mode on, and that it has no NVIDIA GPU at all (so the common
//! CPU job's prolog does not scan the PCI bus and try NVML every time). All
//! on the tmpfs: a reboot learns afresh.

use super::StateDir;
use crate::fsutil::{ensure_dir, write_atomic};

impl StateDir {
    /// The clique we published last, if any, as written. Its one caller
    /// compares it with a valid clique, so a note in any other shape never
    /// matches (and the state directory needs no notion of a clique).
    pub fn published_clique(&self) -> Option<String> {
        let path = self.published_clique_path();
        let text = self.read_text(&path, "published clique note", 256).ok()??;
        Some(text.trim().to_string())
    }

    /// Remember that `clique` is what Slurm has. Best effort: without the
    /// note the next prolog asks Slurm again.
    pub fn note_published_clique(&self, clique: &str) {
        let written = ensure_dir(self.root(), 0o755).and_then(|_| {
            write_atomic(
                &self.published_clique_path(),
                format!("{clique}\n").as_bytes(),
                0o644,
            )
        });
        if let Err(e) = written {
            tracing::debug!("cannot note the published clique: {e}");
        }
    }

    /// True the first time since boot that Extra was found to hold someone
    /// else's text (so that is said once in the log, not at every job).
    pub fn note_extra_left_alone(&self) -> bool {
        self.first_since_boot(&self.extra_left_alone_path())
    }

    /// True the first time since boot that a prolog turned NVML accounting
    /// mode on (said once in the journal, not at every job).
    pub fn note_accounting_turned_on(&self) -> bool {
        self.first_since_boot(&self.accounting_noted_path())
    }

    /// True the first time since boot this is asked about `path`, a marker
    /// on the tmpfs (best effort: without it the thing is said again).
    fn first_since_boot(&self, path: &std::path::Path) -> bool {
        if self.has_marker(path, "note") {
            return false;
        }
        let _ = ensure_dir(self.root(), 0o755).and_then(|_| write_atomic(path, b"", 0o644));
        true
    }

    /// The gate found no NVIDIA GPU here: NVML not loadable and no NVIDIA
    /// device on the PCI bus. A GPU cannot appear without a reboot, which
    /// clears the note.
    pub fn note_no_gpu(&self) {
        let path = self.no_gpu_path();
        if !self.has_marker(&path, "no-GPU note") {
            let _ = ensure_dir(self.root(), 0o755).and_then(|_| write_atomic(&path, b"", 0o644));
        }
    }

    /// Whether a gate since boot found no NVIDIA GPU here.
    pub fn knows_no_gpu(&self) -> bool {
        self.has_marker(&self.no_gpu_path(), "no-GPU note")
    }
}
