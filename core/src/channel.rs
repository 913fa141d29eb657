//! IMEX channels: which channel a job gets, the channel device's major number
//! from /proc/devices, the private channel directory built inside a task's
//! own mount namespace (channels = "plugin"), and handing the channel that
//! Slurm's switch/nvidia_imex created to the job's user (channels = "slurm").

use crate::error::{Error, Result};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use nix::unistd::{Gid, Uid};
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
    detach_stacked_tmpfs(dir)?;
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
        // mknod honours the umask; the helper sets the mode explicitly.
        hand_to_user(&path, g.uid, g.gid)?;
    }
    Ok(())
}

/// Most tmpfs mounts detached from one directory; more means a loop.
const MAX_STACKED_MOUNTS: usize = 8;

/// In the task's own namespace (made a slave first, so nothing propagates
/// back), detach every tmpfs stacked on `dir`: Slurm's switch/nvidia_imex
/// mounts one per step before our hook runs. The task then sees only ours.
fn detach_stacked_tmpfs(dir: &Path) -> Result<()> {
    for _ in 0..MAX_STACKED_MOUNTS {
        if mounts_at(dir)?.last().map(String::as_str) != Some("tmpfs") {
            return Ok(());
        }
        nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH).map_err(|e| {
            Error::new(format!(
                "cannot detach the tmpfs stacked on {} in the task namespace: {e}",
                dir.display()
            ))
        })?;
    }
    Err(Error::new(format!(
        "more than {MAX_STACKED_MOUNTS} tmpfs mounts are stacked on {}",
        dir.display()
    )))
}

/// The file system types mounted exactly on `dir` in this process's mount
/// namespace, bottom first (/proc/self/mountinfo order).
pub fn mounts_at(dir: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::new(format!("cannot read /proc/self/mountinfo: {e}")))?;
    let want = dir.to_string_lossy();
    Ok(parse_mountinfo(&text)
        .filter(|(point, _)| *point == want)
        .map(|(_, fstype)| fstype.to_string())
        .collect())
}

/// (mount point, fs type) of each mountinfo line. Hand-rolled: the format is
/// a fixed kernel ABI (proc(5)), and only two fields with octal escapes are
/// needed; a crate such as procfs would pull in far more than it saves.
fn parse_mountinfo(text: &str) -> impl Iterator<Item = (String, &str)> {
    text.lines().filter_map(|line| {
        let mut fields = line.split(' ');
        let point = fields.nth(4)?;
        let fstype = fields.skip_while(|f| *f != "-").nth(1)?;
        Some((unescape_mount_field(point), fstype))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// channels = "slurm": the one channel Slurm's switch/nvidia_imex created
/// for this step, handed to the job's user with mode 0600. `Ok(None)` when
/// Slurm gave this step no channel (before 25.11 the batch and interactive
/// steps get none). Anything but Slurm's private tmpfs holding exactly one
/// `channel<M>` device of the right major and minor (M >= 1), owned by root
/// with mode 0666 or already handed over, is refused untouched: the node's
/// own channel directory is never changed.
pub fn adopt_slurm_channel(dir: &Path, major: u32, uid: u32, gid: u32) -> Result<Option<u32>> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if mounts_at(dir)?.last().map(String::as_str) != Some("tmpfs") {
        return Ok(None);
    }
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::new(format!("cannot list {}: {e}", dir.display())))?
        .take(MAX_STACKED_MOUNTS + 1)
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let name = match names.as_slice() {
        [] => return Ok(None),
        [one] => one,
        many => {
            return Err(Error::new(format!(
                "{} holds {} entries ({}), but switch/nvidia_imex gives a step exactly one \
                 channel; refusing to hand any of them to the job",
                dir.display(),
                many.len(),
                many.join(", ")
            )))
        }
    };
    let path = dir.join(name);
    let refuse = |why: String| {
        Error::new(format!(
            "{}: {why}; it is not a channel switch/nvidia_imex made for this step, so it is \
             left as it is",
            path.display()
        ))
    };
    let channel: u32 = name
        .strip_prefix("channel")
        .and_then(|n| n.parse().ok())
        .filter(|c| (1..crate::config::MAX_CHANNEL_COUNT).contains(c))
        .ok_or_else(|| refuse("not named channel<N> with N >= 1".into()))?;
    let meta = std::fs::symlink_metadata(&path).map_err(|e| refuse(e.to_string()))?;
    let dev = meta.rdev();
    if !meta.file_type().is_char_device()
        || nix::sys::stat::major(dev) != major as u64
        || nix::sys::stat::minor(dev) != channel as u64
    {
        return Err(refuse(format!(
            "expected character device {major}:{channel}"
        )));
    }
    let mode = meta.mode() & 0o7777;
    let from_slurm = meta.uid() == 0 && mode == 0o666;
    let handed_over = meta.uid() == uid && meta.gid() == gid && mode == 0o600;
    if !(from_slurm || handed_over) {
        return Err(refuse(format!(
            "owner {} mode {mode:o} (switch/nvidia_imex makes root-owned 0666 channels)",
            meta.uid()
        )));
    }
    hand_to_user(&path, uid, gid)?;
    Ok(Some(channel))
}

/// Make a channel device the job user's, mode 0600. The device was just
/// made, or checked to be one, in a tmpfs only root can write.
fn hand_to_user(path: &Path, uid: u32, gid: u32) -> Result<()> {
    nix::unistd::fchownat(
        None,
        path,
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(gid)),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(|e| Error::new(format!("chown {} failed: {e}", path.display())))?;
    nix::sys::stat::fchmodat(
        None,
        path,
        Mode::from_bits_truncate(0o600),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
    .map_err(|e| Error::new(format!("chmod {} failed: {e}", path.display())))
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

    #[test]
    fn mountinfo_fields_and_escapes() {
        let text = "36 35 98:0 / /dev/nvidia-caps-imex-channels rw,relatime master:1 - ext4 /dev/vda rw\n\
                    40 36 0:50 / /dev/nvidia-caps-imex-channels rw,nosuid,noexec - tmpfs tmpfs rw,mode=755\n\
                    41 36 0:51 / /mnt/with\\040space rw shared:3 master:2 - tmpfs tmpfs rw\n\
                    bad line\n";
        let got: Vec<(String, &str)> = parse_mountinfo(text).collect();
        assert_eq!(
            got,
            vec![
                ("/dev/nvidia-caps-imex-channels".to_string(), "ext4"),
                ("/dev/nvidia-caps-imex-channels".to_string(), "tmpfs"),
                ("/mnt/with space".to_string(), "tmpfs"),
            ]
        );
        assert_eq!(unescape_mount_field("a\\134b\\011"), "a\\b\t");
        assert_eq!(unescape_mount_field("trailing\\04"), "trailing\\04");
    }

    #[test]
    fn adopt_leaves_a_directory_that_is_not_its_own_tmpfs_alone() {
        // A plain directory (the node's own): Slurm mounted nothing here.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("channel5"), "").unwrap();
        assert_eq!(
            adopt_slurm_channel(d.path(), 507, 1000, 1000).unwrap(),
            None
        );
        assert!(std::fs::metadata(d.path().join("channel5")).is_ok());
    }
}
