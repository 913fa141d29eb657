//! The NVLinks of one GPU: a link that is down drains the node (a job's
//! NVLink traffic would fail or fall back). The fabric they belong to is
//! `fabric`.

use super::{GpuFindings, Hook};
use crate::config::HealthConfig;
use crate::nvml::snapshot::Reading;

pub(super) fn nvlink(f: &mut GpuFindings, _: &HealthConfig, _: Hook) {
    let Reading::Value(links) = &f.gpu.nvlink else {
        return;
    };
    let down: Vec<String> = links
        .iter()
        .filter(|l| !l.active)
        .map(|l| l.link.to_string())
        .collect();
    if !down.is_empty() {
        f.drain(format!(
            "NVLink(s) {} down of {}",
            down.join(","),
            links.len()
        ));
    }
}
