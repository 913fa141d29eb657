//! What a prolog or epilog run ends with: its exit status (non-zero only
//! for a fault of this node, which makes Slurm drain it) and the one-line
//! reports for stderr. The lifecycle builds it step by step; a hook whose
//! config does not load builds it at once (`config_fault`).

/// A hook's exit status and its lines for stderr (and the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub code: u8,
    /// One line each, for stderr (and the log).
    pub errors: Vec<String>,
}

impl Exit {
    pub(crate) fn ok() -> Exit {
        Exit {
            code: 0,
            errors: Vec::new(),
        }
    }

    /// The hook fails, with `line`.
    pub(crate) fn fail(&mut self, line: String) {
        self.code = 1;
        self.errors.push(line);
    }

    /// A line for stderr that does not fail the hook.
    pub(crate) fn note(&mut self, line: String) {
        self.errors.push(line);
    }
}
