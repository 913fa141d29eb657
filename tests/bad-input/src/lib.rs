//! Test-only crate; the suite lives in tests/.
