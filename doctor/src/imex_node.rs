//! This node's IMEX side: the daemon and its ctl, the admin's base daemon
//! config, the channel device in /proc/devices and the channel directory,
//! the SERVER_PORT span against the ephemeral ports, and the systemd unit.

use crate::check::{Check, CheckName};
use slurm_imex_core::trust::{self, Expect};
use slurm_imex_domain::config::{DaemonManager, DomainScope};
use slurm_imex_domain::imex::daemon_config::{DaemonConfigFile, Origin};
use slurm_imex_settings::Config;
use std::time::Duration;

pub fn programs(config: &Config) -> Vec<Check> {
    let d = &config.engine.daemon;
    [
        (CheckName::ImexDaemon, "[imex.daemon] binary", &d.binary),
        (CheckName::ImexCtl, "[imex.daemon] ctl", &d.ctl),
    ]
    .into_iter()
    .map(
        |(check, what, program)| match trust::trusted_program(program, what) {
            Ok(found) => Check::pass(check, found.display().to_string()),
            Err(e) => Check::fail(
                check,
                e.to_string(),
                format!(
                    "install NVIDIA's nvidia-imex package (the driver's version), or set {what}"
                ),
            ),
        },
    )
    .collect()
}

pub fn base_config(config: &Config) -> Check {
    let path = &config.engine.daemon.base_config;
    let file = match DaemonConfigFile::read_as(path, Origin::Base) {
        Ok(f) => f,
        Err(refused) => return Check::fail(CheckName::ImexConfig, refused.found, refused.fix),
    };
    if file.get("IMEX_CMD_ENABLED") != Some("1") {
        return Check::fail(CheckName::ImexConfig,
            format!("{}: IMEX_CMD_ENABLED is {}: the prolog cannot ask the daemon whether the domain is UP", path.display(), file.get("IMEX_CMD_ENABLED").unwrap_or("unset")),
            format!("set IMEX_CMD_ENABLED=1 in {}", path.display()));
    }
    match file.cmd_port(path) {
        Ok(port) => Check::pass(
            CheckName::ImexConfig,
            format!(
                "{}: IMEX_CMD_ENABLED=1, IMEX_CMD_PORT={port}, SERVER_PORT={}",
                path.display(),
                file.get("SERVER_PORT").unwrap_or("50000")
            ),
        ),
        Err(e) => Check::fail(
            CheckName::ImexConfig,
            e.to_string(),
            format!("set IMEX_CMD_PORT in {}", path.display()),
        ),
    }
}

pub fn channel_device(config: &Config) -> Check {
    match slurm_imex_core::channel::channel_major(&config.imex.proc_devices) {
        Ok(major) => Check::pass(CheckName::ChannelDevice, format!("nvidia-caps-imex-channels is major {major} ({})", config.imex.proc_devices.display())),
        Err(e) => Check::fail(CheckName::ChannelDevice, e.to_string(),
            "load the NVIDIA driver with IMEX channels (modprobe nvidia NVreg_ImexChannelCount=2048, the driver's default)"),
    }
}

pub fn channel_dir(config: &Config) -> Check {
    let dir = &config.imex.channel_dir;
    if std::fs::symlink_metadata(dir).is_err() {
        return crate::node_state::made_on_first_use(
            CheckName::ChannelDir,
            dir,
            "[imex] channel_dir's parent",
            "the prolog makes it",
            "make the parent directory root's, mode 0755",
        );
    }
    match trust::check(dir, Expect::Dir, "[imex] channel_dir") {
        Ok(()) => Check::pass(
            CheckName::ChannelDir,
            format!("{} is root's and only root can write it", dir.display()),
        ),
        Err(e) => Check::fail(
            CheckName::ChannelDir,
            e.to_string(),
            format!("chown root:root {0}; chmod 0755 {0}", dir.display()),
        ),
    }
}

/// Every per-job SERVER_PORT (or the rack daemon's one) out of the
/// ephemeral range or reserved.
pub fn ports(config: &Config) -> Check {
    if config.engine.domain == DomainScope::Rack {
        return Check::pass(
            CheckName::Ports,
            "[imex] domain = \"rack\": one daemon on the base config's SERVER_PORT",
        );
    }
    let (range, reserved) = slurm_imex_domain::imex::port::port_sysctls();
    let (lo, span) = (config.engine.port_base, config.engine.port_span.0);
    let hi = (u32::from(lo) + u32::from(span) - 1).min(65535) as u16;
    let exposed = slurm_imex_domain::imex::port::exposed_ports(lo, hi, &range, &reserved);
    match exposed.first() {
        None => Check::pass(CheckName::Ports, format!("SERVER_PORT span {lo}-{hi} is reserved or outside the ephemeral range ({})", range.split_whitespace().collect::<Vec<_>>().join("-"))),
        Some(first) => Check::fail(CheckName::Ports,
            format!("{} ports of the SERVER_PORT span {lo}-{hi} are ephemeral and not reserved (first {first}): any outgoing connection can take a job's port", exposed.len()),
            reserve_remedy(&reserved, lo, hi)),
    }
}

/// Add our span to the site's reserved ports, never replace them (the
/// package's maintainer scripts merge the same way: docs/install.md).
fn reserve_remedy(reserved: &str, lo: u16, hi: u16) -> String {
    let site = reserved.trim();
    let merged = if site.is_empty() {
        format!("{lo}-{hi}")
    } else {
        format!("{site},{lo}-{hi}")
    };
    format!(
        "sysctl -w net.ipv4.ip_local_reserved_ports={merged} (the site's ranges kept), and the same in /etc/sysctl.d/90-slurm-imex.conf"
    )
}

/// With `manager = "systemd"`: the unit exists and starts the daemon on
/// our per-job config (the drop-in).
pub fn systemd_unit(config: &Config) -> Check {
    let d = &config.engine.daemon;
    if d.manager == DaemonManager::Process {
        return Check::pass(
            CheckName::Systemd,
            "[imex.daemon] manager = \"process\": slurm-imex runs the daemon itself",
        );
    }
    let systemctl = match trust::trusted_program(&d.systemctl, "[imex.daemon] systemctl") {
        Ok(p) => p,
        Err(e) => {
            return Check::fail(
                CheckName::Systemd,
                e.to_string(),
                "install systemd, or set [imex.daemon] manager = \"process\"",
            )
        }
    };
    let unit = format!("{}.service", d.unit.trim_end_matches(".service"));
    let shown = slurm_imex_core::process::run_bounded(
        &systemctl,
        &["cat", "--", &unit],
        Duration::from_secs(10),
    );
    let text = match shown {
        Ok(out) if out.success() => out.stdout,
        Ok(out) => {
            return Check::fail(
                CheckName::Systemd,
                format!("systemctl cat {unit}: {}", out.one_line()),
                format!("install NVIDIA's {unit} (nvidia-imex package), or set [imex.daemon] unit"),
            )
        }
        Err(e) => {
            return Check::fail(
                CheckName::Systemd,
                e.to_string(),
                "check systemd on this node",
            )
        }
    };
    judge_unit_text(&unit, &text, &d.job_config.display().to_string())
}

/// What `systemctl cat <unit>` says: the daemon must start on the per-job
/// config, and the start limit must be off (every job restarts the unit).
fn judge_unit_text(unit: &str, text: &str, job_config: &str) -> Check {
    let drop_in = format!("install conf-examples/nvidia-imex.service.d/slurm-imex.conf as /etc/systemd/system/{unit}.d/slurm-imex.conf, then systemctl daemon-reload");
    let setting = |l: &str| l.trim_start().to_string();
    if !text
        .lines()
        .map(setting)
        .any(|l| l.starts_with("ExecStart=") && l.contains(job_config))
    {
        return Check::fail(CheckName::Systemd, format!("{unit} does not start the daemon with -c {job_config}: it would serve the base config, not the job's domain"), drop_in);
    }
    if !text
        .lines()
        .map(setting)
        .any(|l| l == "StartLimitIntervalSec=0")
    {
        return Check::warn(CheckName::Systemd, format!("{unit} keeps systemd's start limit (5 starts in 10 s): a 6th back-to-back restart is refused and fails that prolog"), drop_in);
    }
    Check::pass(
        CheckName::Systemd,
        format!("{unit} starts the daemon with -c {job_config}, no start limit"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    #[test]
    fn the_unit_must_run_the_job_config_without_a_start_limit() {
        let cfg = "/run/slurm-imex/nvidia-imex.cfg";
        let nvidia = "[Service]\nType=forking\nExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg\n";
        let f = judge_unit_text("nvidia-imex.service", nvidia, cfg);
        assert_eq!(f.verdict, Status::Fail);
        assert!(
            f.remedy.contains("nvidia-imex.service.d/slurm-imex.conf"),
            "{}",
            f.remedy
        );
        let shipped = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../conf-examples/nvidia-imex.service.d/slurm-imex.conf"
        ))
        .unwrap();
        let old_drop_in = shipped.replace("StartLimitIntervalSec=0", "");
        assert_eq!(
            judge_unit_text(
                "nvidia-imex.service",
                &format!("{nvidia}{old_drop_in}"),
                cfg
            )
            .verdict,
            Status::Warn
        );
        let f = judge_unit_text("nvidia-imex.service", &format!("{nvidia}{shipped}"), cfg);
        assert_eq!(f.verdict, Status::Pass, "{}", f.line());
    }

    #[test]
    fn systemd_without_systemctl_or_unit_fails() {
        let mut config = Config::default();
        config.engine.daemon.manager = DaemonManager::Systemd;
        config.engine.daemon.systemctl = "/nonexistent/systemctl".into();
        let f = systemd_unit(&config);
        assert_eq!((f.check, f.verdict), (CheckName::Systemd, Status::Fail));
        config.engine.daemon.manager = DaemonManager::Process;
        assert_eq!(systemd_unit(&config).verdict, Status::Pass);
    }

    #[test]
    fn missing_daemon_programs_and_base_config_fail() {
        let mut config = Config::default();
        config.engine.daemon.binary = "/nonexistent/nvidia-imex".into();
        config.engine.daemon.ctl = "/nonexistent/nvidia-imex-ctl".into();
        config.engine.daemon.base_config = "/nonexistent/config.cfg".into();
        let found = programs(&config);
        assert!(found.iter().all(|f| f.verdict == Status::Fail), "{found:?}");
        assert_eq!(found[0].check, CheckName::ImexDaemon);
        assert_eq!(base_config(&config).verdict, Status::Fail);
    }

    #[test]
    fn base_config_needs_the_command_interface() {
        let d = tempfile::tempdir().unwrap();
        let cfg = d.path().join("config.cfg");
        std::fs::write(
            &cfg,
            "SERVER_PORT=50000\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=0\n",
        )
        .unwrap();
        let mut config = Config::default();
        config.engine.daemon.base_config = cfg.clone();
        let f = base_config(&config);
        assert_eq!(f.verdict, Status::Fail);
        assert!(f.remedy.contains("IMEX_CMD_ENABLED=1"), "{}", f.remedy);
        std::fs::write(
            &cfg,
            "SERVER_PORT=50000\nIMEX_CMD_PORT=50005\nIMEX_CMD_ENABLED=1\n",
        )
        .unwrap();
        assert_eq!(
            base_config(&config).verdict,
            Status::Pass,
            "{}",
            base_config(&config).line()
        );
    }

    #[test]
    fn a_base_config_that_is_not_text_fails_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let cfg = d.path().join("config.cfg");
        let mut config = Config::default();
        config.engine.daemon.base_config = cfg.clone();
        for (bytes, says) in [
            (
                &b"IMEX_CMD_ENABLED=1\n\0\0\0\n"[..],
                "line 2 holds a NUL byte",
            ),
            (
                &b"IMEX_CMD_ENABLED=1\n\xff\xfe\n"[..],
                "byte 0xff on line 2 is not UTF-8",
            ),
            (
                &b"\x07IMEX_CMD_ENABLED=1\n"[..],
                "line 1 holds the control byte 0x07",
            ),
        ] {
            std::fs::write(&cfg, bytes).unwrap();
            let f = base_config(&config);
            assert_eq!(f.verdict, Status::Fail, "{}", f.line());
            assert!(
                f.found.contains(&format!(
                    "{} ([imex.daemon] base_config) is not text: {says}",
                    cfg.display()
                )) && f.remedy.starts_with("install NVIDIA's config.cfg there"),
                "{}",
                f.line()
            );
        }
    }
}
