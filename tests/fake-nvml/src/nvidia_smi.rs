//! A fake-NVML scenario from a real `nvidia-smi -q` capture, so the fake
//! plays exactly what a real GPU reported (tests/data/samples/
//! nvidia-smi-q-h100.txt) and the production NVML path can be checked
//! against it. Only what the scenario models is taken: identity, modes,
//! ECC, remapped rows, PCIe replays, accounting mode and buffer, and the
//! accounted processes.
//!
//! Hand-rolled: `nvidia-smi -q` is an indented `Key : Value` report with
//! repeated sections (one `Process ID` block per process) that no crate
//! parses; its XML form (`-x`) was not what was captured.

/// Every `section/…/key` with its value, in order, for one GPU block.
fn entries(text: &str) -> Vec<(String, String)> {
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() || line.starts_with('#') || line.starts_with('=') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        path.retain(|(depth, _)| *depth < indent);
        let (key, value) = match line.split_once(" : ") {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line.trim().trim_end_matches(':').trim(), None),
        };
        let mut full: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        full.push(key);
        if let Some(v) = value {
            out.push((full.join("/"), v.to_string()));
        }
        // A key is the parent of what is indented below it, valued
        // (`Process ID : 420`, then its fields) or not (a section).
        path.push((indent, key.to_string()));
    }
    out
}

fn yes(v: &str) -> bool {
    matches!(v, "Enabled" | "Yes" | "1")
}

/// The number at the start of `v` ("746 MiB", "78 %", "6882 ms").
fn number(v: &str) -> Option<u64> {
    v.split_whitespace().next()?.parse().ok()
}

/// TOML for one `[[gpu]]` of a scenario from the `nvidia-smi -q` reports in
/// `text` (a later report of the same GPU overrides an earlier one, as
/// `-q -d ACCOUNTING` after `nvidia-smi -am 1` does).
pub fn scenario_gpu(text: &str) -> Result<String, String> {
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut processes: Vec<Vec<(String, String)>> = Vec::new();
    let mut set = |k: &str, v: String| match keys.iter_mut().find(|(key, _)| key == k) {
        Some(slot) => slot.1 = v,
        None => keys.push((k.to_string(), v)),
    };
    let mut accounted_seen = false;
    for (path, value) in entries(text) {
        let q = |v: &str| format!("{v:?}");
        let short = path.split_once('/').map_or(path.as_str(), |(_, rest)| rest);
        match short {
            "Product Name" => set("name", q(&value)),
            "Serial Number" => set("serial", q(&value)),
            "GPU UUID" => set("uuid", q(&value)),
            "PCI/Bus Id" => set("pci_bus_id", q(&value)),
            "Persistence Mode" => set("persistence", yes(&value).to_string()),
            "MIG Mode/Current" => set("mig", yes(&value).to_string()),
            "ECC Mode/Current" => set("ecc_enabled", yes(&value).to_string()),
            "Accounting Mode" => set("accounting", yes(&value).to_string()),
            "Accounting Mode Buffer Size" => set("accounting_buffer", value),
            "ECC Errors/Volatile/DRAM Correctable" => set("ecc_volatile_sbe", value),
            "ECC Errors/Volatile/DRAM Uncorrectable" => set("ecc_volatile_dbe", value),
            "ECC Errors/Aggregate/DRAM Correctable" => set("ecc_aggregate_sbe", value),
            "ECC Errors/Aggregate/DRAM Uncorrectable" => set("ecc_aggregate_dbe", value),
            "Remapped Rows/Correctable Error" => set("remap_correctable", value),
            "Remapped Rows/Uncorrectable Error" => set("remap_uncorrectable", value),
            "Remapped Rows/Pending" => set("remap_pending", yes(&value).to_string()),
            "Remapped Rows/Remapping Failure Occurred" => {
                set("remap_failure", yes(&value).to_string())
            }
            "PCI/Replays Since Reset" => set("pcie_replays", value),
            "Accounted Processes/Process ID" => {
                if !accounted_seen {
                    processes.clear(); // a later report lists them all again
                    accounted_seen = true;
                }
                processes.push(vec![("pid".into(), value)]);
            }
            p if p.starts_with("Accounted Processes/Process ID/") => {
                let Some(process) = processes.last_mut() else {
                    continue;
                };
                let field = &p["Accounted Processes/Process ID/".len()..];
                let key = match field {
                    "GPU Utilization" => "gpu_util",
                    "Memory Utilization" => "mem_util",
                    "Max memory usage" => "max_memory",
                    "Time" => "time_ms",
                    "Is Running" => "running",
                    _ => continue,
                };
                let n = number(&value).ok_or_else(|| format!("{path}: not a number: {value}"))?;
                let v = match key {
                    "max_memory" => (n << 20).to_string(),
                    "running" => (n != 0).to_string(),
                    _ => n.to_string(),
                };
                process.push((key.to_string(), v));
            }
            _ => {}
        }
    }
    for needed in ["uuid", "pci_bus_id"] {
        if !keys.iter().any(|(k, _)| k == needed) {
            return Err(format!("nvidia-smi -q: no {needed} found"));
        }
    }
    let mut toml = String::from("[[gpu]]\n");
    for (k, v) in keys {
        toml.push_str(&format!("{k} = {v}\n"));
    }
    for p in processes {
        toml.push_str("[[gpu.process]]\n");
        for (k, v) in p {
            toml.push_str(&format!("{k} = {v}\n"));
        }
    }
    Ok(toml)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::Path;

    const H100: &str = include_str!("../../data/samples/nvidia-smi-q-h100.txt");

    #[test]
    fn the_h100_capture_becomes_a_scenario() {
        let blocks: Vec<&str> = H100.split("\n----\n").collect();
        // The fresh boot: accounting off, nothing accounted.
        let fresh = Scenario::parse(&scenario_gpu(blocks[0]).unwrap(), Path::new("h100")).unwrap();
        assert!(!fresh.gpus[0].accounting && fresh.gpus[0].processes.is_empty());
        let gpu = scenario_gpu(&format!("{}\n{}", blocks[0], blocks[1])).unwrap();
        let s = Scenario::parse(&gpu, Path::new("h100")).unwrap();
        let g = &s.gpus[0];
        assert_eq!(g.uuid, "GPU-00000000-1111-2222-3333-444444444444");
        assert_eq!(g.serial, "1650000000001");
        assert_eq!(g.pci_bus_id, "00000000:00:06.0");
        assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
        assert!(g.persistence && g.ecc_enabled && !g.mig);
        // The second report: after nvidia-smi -am 1 and a 3 s CUDA job.
        assert!(g.accounting);
        assert_eq!(g.accounting_buffer, 4000);
        assert_eq!((g.remap_correctable, g.remap_uncorrectable), (Some(0), 0));
        assert_eq!(g.processes.len(), 1);
        let p = &g.processes[0];
        assert_eq!(
            (
                p.pid,
                p.gpu_util,
                p.mem_util,
                p.max_memory,
                p.time_ms,
                p.running
            ),
            (420, 78, 4, 746 << 20, 6882, false)
        );
    }

    #[test]
    fn a_report_without_identity_is_refused() {
        assert!(scenario_gpu("    Product Name : X\n").is_err());
    }
}
