//! GPU access through NVML: loading `libnvidia-ml.so.1` at run time (the
//! path is configurable, so binaries build and run without a GPU), reading
//! one snapshot per GPU, and choosing the GPUs a job owns.

pub mod bounds;
pub mod raw;
pub mod reader;
pub mod snapshot;

pub use reader::{GpuReader, Stage, BUDGET_GATE};
pub use snapshot::{GpuSnapshot, Reading};

use std::path::Path;

/// NVIDIA GPUs on the PCI bus (vendor 0x10de, class 0x0300 VGA or 0x0302
/// 3D controller), counted from sysfs. None when sysfs cannot be read.
pub fn pci_gpu_count(sysfs_devices: &Path) -> Option<u32> {
    let entries = std::fs::read_dir(sysfs_devices).ok()?;
    let mut n = 0;
    for e in entries.flatten() {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).unwrap_or_default();
        let vendor = read("vendor");
        let class = read("class");
        if vendor.trim() == "0x10de" && (class.starts_with("0x0300") || class.starts_with("0x0302"))
        {
            n += 1;
        }
    }
    Some(n)
}

/// The GPU indexes a job owns: `SLURM_JOB_GPUS` on shared nodes, every GPU
/// otherwise (whole-node jobs).
pub fn job_gpus(requested: Option<&[u32]>, device_count: u32) -> Vec<u32> {
    match requested {
        Some(list) => list.iter().copied().filter(|i| *i < device_count).collect(),
        None => (0..device_count).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nvidia_display_and_3d_controllers_only() {
        let d = tempfile::tempdir().unwrap();
        for (name, vendor, class) in [
            ("0000:1a:00.0", "0x10de", "0x030200"),
            ("0000:1b:00.0", "0x10de", "0x030000"),
            ("0000:1c:00.0", "0x10de", "0x068000"), // NVSwitch bridge
            ("0000:1d:00.0", "0x8086", "0x030000"),
        ] {
            let p = d.path().join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(p.join("class"), format!("{class}\n")).unwrap();
        }
        assert_eq!(pci_gpu_count(d.path()), Some(2));
        assert_eq!(pci_gpu_count(&d.path().join("none")), None);
    }

    #[test]
    fn job_gpu_selection() {
        assert_eq!(job_gpus(None, 4), vec![0, 1, 2, 3]);
        assert_eq!(job_gpus(Some(&[1, 3]), 4), vec![1, 3]);
        assert_eq!(job_gpus(Some(&[1, 9]), 4), vec![1]);
    }
}
