//! IMEX channels: which channel a job gets, the channel device's major number
//! from /proc/devices, and the private channel directory built inside a
//! task's own mount namespace.

use crate::error::{Error, Result};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::unistd::{chown, Gid, Uid};
use std::path::{Path, PathBuf};

/// The character device name the driver registers.
pub const CHANNEL_DEVICE_NAME: &str = "nvidia-caps-imex-channels";

/// Contract: `1 + job_id mod (channel_count - 1)`. Channel 0 is never handed
/// out (the driver may create it world-accessible). Needs channel_count >= 2,
/// which the config guarantees.
pub fn channel_for_job(job_id: u32, channel_count: u32) -> u32 {
    1 + job_id % (channel_count - 1)
}

/// Find the major of `nvidia-caps-imex-channels` in /proc/devices text.
/// Only the "Character devices:" section counts when headers are present;
/// grep excerpts without headers are accepted too. Text after the name (as
/// in NVIDIA's published "(major number)" annotation) is tolerated.
pub fn parse_channel_major(proc_devices: &str) -> Option<u32> {
    let mut in_block_section = false;
    for line in proc_devices.lines() {
        let t = line.trim();
        if t.eq_ignore_ascii_case("Block devices:") {
            in_block_section = true;
            continue;
        }
        if t.eq_ignore_ascii_case("Character devices:") {
            in_block_section = false;
            continue;
        }
        if in_block_section {
            continue;
        }
        let mut words = t.split_whitespace();
        if let (Some(major), Some(name)) = (words.next(), words.next()) {
            if name == CHANNEL_DEVICE_NAME {
                if let Ok(m) = major.parse::<u32>() {
                    return Some(m);
                }
            }
        }
    }
    None
}

/// Read the channel major from the configured /proc/devices path.
pub fn channel_major(proc_devices: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(proc_devices).map_err(|e| {
        Error::new(format!(
            "cannot read {} ([imex] proc_devices): {e}",
            proc_devices.display()
        ))
    })?;
    parse_channel_major(&text).ok_or_else(|| {
        Error::new(format!(
            "{} lists no {CHANNEL_DEVICE_NAME} device: the NVIDIA driver is not loaded \
             or IMEX is disabled (NVreg_ImexChannelCount=0)",
            proc_devices.display()
        ))
    })
}

/// The one channel a task may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelGrant {
    pub channel: u32,
    pub major: u32,
    pub uid: u32,
    pub gid: u32,
}

impl ChannelGrant {
    pub fn device_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!("channel{}", self.channel))
    }
}

/// Give the calling process (a task, before it drops privileges) its own
/// mount namespace in which `dir` is a fresh tmpfs holding only the granted
/// channel device (mode 0600, owned by the job's user), or nothing at all
/// when `grant` is None. The host's view is untouched: mounts in the new
/// namespace do not propagate back.
pub fn isolate_channel_dir(dir: &Path, grant: Option<&ChannelGrant>) -> Result<()> {
    if grant.is_none() && !dir.is_dir() {
        return Ok(()); // nothing to hide
    }
    if !dir.is_dir() {
        crate::fsutil::ensure_dir(dir, 0o755)?;
    }
    unshare(CloneFlags::CLONE_NEWNS)
        .map_err(|e| Error::new(format!("unshare(CLONE_NEWNS) for the task failed: {e}")))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_SLAVE | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| {
        Error::new(format!(
            "cannot make / a slave mount in the task namespace: {e}"
        ))
    })?;
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=4k,nr_inodes=16"),
    )
    .map_err(|e| {
        Error::new(format!(
            "cannot mount a private tmpfs on {}: {e}",
            dir.display()
        ))
    })?;
    if let Some(g) = grant {
        let path = g.device_path(dir);
        mknod(
            &path,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o600),
            makedev(g.major as u64, g.channel as u64),
        )
        .map_err(|e| Error::new(format!("mknod {} failed: {e}", path.display())))?;
        chown(
            &path,
            Some(Uid::from_raw(g.uid)),
            Some(Gid::from_raw(g.gid)),
        )
        .map_err(|e| Error::new(format!("chown {} failed: {e}", path.display())))?;
        // mknod honours the umask; set the mode explicitly.
        nix::sys::stat::fchmodat(
            None,
            &path,
            Mode::from_bits_truncate(0o600),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| Error::new(format!("chmod {} failed: {e}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_formula_never_gives_zero_and_stays_in_range() {
        assert_eq!(channel_for_job(0, 2048), 1);
        assert_eq!(channel_for_job(1, 2048), 2);
        assert_eq!(channel_for_job(2046, 2048), 2047);
        assert_eq!(channel_for_job(2047, 2048), 1);
        for job in [0, 1, 5, 2047, 4094, u32::MAX] {
            let c = channel_for_job(job, 2048);
            assert!((1..2048).contains(&c), "{job} -> {c}");
        }
        assert_eq!(channel_for_job(12345, 2), 1);
    }

    #[test]
    fn parses_published_proc_devices_samples() {
        let one = include_str!("../../tests/data/samples/proc-devices-1.txt");
        let two = include_str!("../../tests/data/samples/proc-devices-2.txt");
        assert_eq!(parse_channel_major(one), Some(234));
        assert_eq!(parse_channel_major(two), Some(234));
    }

    #[test]
    fn only_character_devices_count() {
        let full = "Character devices:\n  1 mem\n195 nvidia\n\nBlock devices:\n  7 nvidia-caps-imex-channels\n";
        assert_eq!(parse_channel_major(full), None);
        let full = "Character devices:\n  1 mem\n511 nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n";
        assert_eq!(parse_channel_major(full), Some(511));
        assert_eq!(parse_channel_major("x nvidia-caps-imex-channels\n"), None);
        assert_eq!(
            parse_channel_major("234 nvidia-caps-imex-channels-x\n"),
            None
        );
        assert_eq!(parse_channel_major(""), None);
    }

    #[test]
    fn missing_device_error_says_what_to_do() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("devices");
        std::fs::write(&p, "Character devices:\n195 nvidia\n").unwrap();
        let e = channel_major(&p).unwrap_err().to_string();
        assert!(
            e.contains("NVreg_ImexChannelCount") && e.contains("devices"),
            "{e}"
        );
        assert!(channel_major(&d.path().join("none"))
            .unwrap_err()
            .to_string()
            .contains("proc_devices"));
    }
}
