//! What the fake driver keeps between NVML clients, as the kernel driver
//! does: each GPU's accounting mode (since when it is on) and the processes
//! that ran on each GPU, written by the fake workload (`fake-gpu-job`, the
//! stand-in for a CUDA program). The real driver's rules, from NVML's
//! `nvmlDeviceSetAccountingMode` documentation and the H100 capture
//! (tests/data/samples/SOURCES.md):
//! - the mode is off after every driver load; setting it needs root;
//! - "This setting is not persistent and will default to disabled after
//!   driver unloads. Enable persistence mode to be sure the setting doesn't
//!   switch off": with persistence mode off, every NVML client is a fresh
//!   driver load here, so what an earlier client set is gone;
//! - only processes that start while the mode is on are accounted (DCGM
//!   #19: "No data" for processes started before), and disabling it clears
//!   every accounted process;
//! - the buffer keeps the newest `accounting_buffer` processes (4000 on the
//!   H100), running or ended; a running process reports time 0.
//!
//! The directory is `$FAKE_NVML_DRIVER_DIR`, else `nvml-driver` beside the
//! scenario file. `procs/` is writable by every user (mode 1777), as
//! /dev/nvidia* are: any user's program can use a GPU.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One process that ran (or runs) on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ran {
    pub pid: u32,
    pub start_us: u64,
    #[serde(default)]
    pub end_us: Option<u64>,
    pub gpu_util: u32,
    pub mem_util: u32,
    pub max_memory: u64,
}

impl Ran {
    /// Still running: not ended, and its pid is alive.
    pub fn running(&self) -> bool {
        self.end_us.is_none() && pid_alive(self.pid)
    }

    /// NVML's `time`: how long the compute context was active, ms; 0 while
    /// the process runs.
    pub fn time_ms(&self) -> u64 {
        match self.end_us {
            Some(end) => end.saturating_sub(self.start_us) / 1000,
            None => 0,
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

pub struct Driver {
    dir: PathBuf,
}

impl Driver {
    /// The driver beside `scenario` (or `$FAKE_NVML_DRIVER_DIR`).
    pub fn of(scenario: &Path) -> Driver {
        let dir = std::env::var_os("FAKE_NVML_DRIVER_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                scenario
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .join("nvml-driver")
            });
        Driver { dir }
    }

    fn mode_path(&self, uuid: &str) -> PathBuf {
        self.dir.join(format!("accounting-{uuid}"))
    }

    fn procs_dir(&self) -> PathBuf {
        self.dir.join("procs")
    }

    /// The accounting mode an earlier client left on `uuid`: None when
    /// none set it since the driver loaded; Some(None) off; Some(Some(t))
    /// on since t (µs).
    pub fn accounting(&self, uuid: &str) -> Option<Option<u64>> {
        let text = std::fs::read_to_string(self.mode_path(uuid)).ok()?;
        match text.trim() {
            "off" => Some(None),
            since => since.parse().ok().map(Some),
        }
    }

    /// Keep the mode for later clients (with persistence mode on).
    pub fn keep_accounting(&self, uuid: &str, since: Option<u64>) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        // One temporary file per writer: prologs turn the mode on concurrently.
        let tmp = self
            .dir
            .join(format!(".accounting-{uuid}.{}.tmp", std::process::id()));
        let text = since.map_or("off".to_string(), |t| t.to_string());
        std::fs::write(&tmp, format!("{text}\n"))?;
        std::fs::rename(tmp, self.mode_path(uuid))
    }

    /// Every process that ran on `uuid`, oldest first.
    pub fn processes(&self, uuid: &str) -> Vec<Ran> {
        let prefix = format!("{uuid}.");
        let Ok(entries) = std::fs::read_dir(self.procs_dir()) else {
            return Vec::new();
        };
        let mut ran: Vec<Ran> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|text| toml::from_str(&text).ok())
            .collect();
        ran.sort_by_key(|r| (r.start_us, r.pid));
        ran
    }

    /// Record (or update) a process on `uuid`: the workload's side.
    pub fn record(&self, uuid: &str, ran: &Ran) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.procs_dir();
        if !dir.exists() {
            std::fs::create_dir_all(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777))?;
        }
        let text = toml::to_string(ran).map_err(std::io::Error::other)?;
        let name = format!("{uuid}.{}", ran.pid);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, dir.join(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_mode_and_the_processes_between_clients() {
        let d = tempfile::tempdir().unwrap();
        let driver = Driver::of(&d.path().join("nvml.toml"));
        assert_eq!(driver.accounting("GPU-a"), None);
        driver.keep_accounting("GPU-a", Some(42)).unwrap();
        assert_eq!(driver.accounting("GPU-a"), Some(Some(42)));
        driver.keep_accounting("GPU-a", None).unwrap();
        assert_eq!(driver.accounting("GPU-a"), Some(None));
        let ran = Ran {
            pid: std::process::id(),
            start_us: 5,
            end_us: None,
            gpu_util: 80,
            mem_util: 10,
            max_memory: 1 << 30,
        };
        driver.record("GPU-a", &ran).unwrap();
        let seen = driver.processes("GPU-a");
        assert_eq!(seen, vec![ran]);
        assert!(seen[0].running() && seen[0].time_ms() == 0);
        driver
            .record(
                "GPU-a",
                &Ran {
                    end_us: Some(2_000_005),
                    ..ran
                },
            )
            .unwrap();
        let ended = driver.processes("GPU-a")[0];
        assert!(!ended.running());
        assert_eq!(ended.time_ms(), 2000);
        assert!(driver.processes("GPU-b").is_empty());
    }
}
