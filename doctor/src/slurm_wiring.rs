//! slurm.conf as the controller runs it: PrologFlags, the Prolog and
//! Epilog programs, HealthCheckProgram, Slurm's own IMEX switch beside our
//! channels mode, and what keeps channels apart in rack-wide domains.

use crate::check::{Check, CheckName};
use crate::slurm_view::SlurmView;
use slurm_imex_core::config::ChannelMode;
use slurm_imex_domain::config::DomainScope;
use slurm_imex_domain::imex::rack_channels;
use slurm_imex_settings::Config;
use std::path::Path;

/// Largest wrapper script read when looking for our program in it.
const MAX_WRAPPER_BYTES: u64 = 1 << 20;

/// PrologFlags that make the prolog run at allocation: `Alloc`, and the
/// flags Slurm turns Alloc on for (src/common/read_config.c,
/// `prolog_str2flags`: Contain, RunInJob, ForceRequeueOnFail and X11;
/// `_validate_and_set_defaults`: NoHold). `scontrol show config` prints
/// Alloc itself, a node's slurm.conf may not.
const IMPLY_ALLOC: [&str; 6] = [
    "Alloc",
    "Contain",
    "RunInJob",
    "ForceRequeueOnFail",
    "X11",
    "NoHold",
];

pub fn prolog_flags(slurm: &SlurmView) -> Check {
    let flags = slurm.get("PrologFlags").unwrap_or("");
    if flags
        .split(',')
        .any(|f| IMPLY_ALLOC.iter().any(|a| f.trim().eq_ignore_ascii_case(a)))
    {
        Check::pass(CheckName::PrologFlags, format!("PrologFlags={flags}"))
    } else {
        Check::fail(CheckName::PrologFlags,
            format!("PrologFlags={} lacks Alloc: the prolog would run at the first step, after the batch script started", if flags.is_empty() { "(none)" } else { flags }),
            "add Alloc to PrologFlags in slurm.conf (keep the flags you have), then restart slurmctld and slurmd")
    }
}

/// `Prolog`/`Epilog` (`which`) runs `program` (slurm-imex-prolog), directly
/// or from a wrapper script that names it.
pub fn hook(slurm: &SlurmView, which: &'static str, program: &str, suggested: &Path) -> Check {
    let remedy = format!(
        "set {which}={} in slurm.conf (or call it from your {which} script), then restart slurmd",
        suggested.display()
    );
    let values = slurm.get_all(which);
    if values.is_empty() {
        return Check::fail(
            which_check(which),
            format!("{which} is unset: slurm-imex never runs on this cluster"),
            remedy,
        );
    }
    let value = values.join(",");
    for entry in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        let path = Path::new(entry);
        if path.file_name().is_some_and(|n| n == program) {
            return match slurm_imex_core::trust::check(
                path,
                slurm_imex_core::trust::Expect::Program,
                which,
            ) {
                Ok(()) => Check::pass(which_check(which), format!("{which}={entry}")),
                Err(e) => Check::fail(
                    which_check(which),
                    e.to_string(),
                    format!("install {program} there, owned by root, or fix {which}"),
                ),
            };
        }
        let script =
            slurm_imex_core::fsutil::read_bounded_text(path, MAX_WRAPPER_BYTES).unwrap_or_default();
        if script.contains(program) {
            return Check::pass(
                which_check(which),
                format!("{which}={entry}, a wrapper that runs {program}"),
            );
        }
    }
    Check::fail(
        which_check(which),
        format!("{which}={value} does not run {program}"),
        remedy,
    )
}

fn which_check(which: &'static str) -> CheckName {
    if which == "Prolog" {
        CheckName::Prolog
    } else {
        CheckName::Epilog
    }
}

pub fn health_check(slurm: &SlurmView) -> Check {
    let Some(program) = slurm.get("HealthCheckProgram") else {
        return Check::warn(CheckName::Healthcheck, "no HealthCheckProgram: an idle node's GPUs are checked only when a job starts",
            "set HealthCheckProgram=<sbin>/slurm-imex-healthcheck and HealthCheckInterval=300 in slurm.conf");
    };
    let script = slurm_imex_core::fsutil::read_bounded_text(Path::new(program), MAX_WRAPPER_BYTES)
        .unwrap_or_default();
    if program.ends_with("slurm-imex-healthcheck")
        || (script.contains("slurm-imex") && script.contains("check"))
    {
        if !Path::new(program).exists() {
            return Check::fail(CheckName::Healthcheck, format!("HealthCheckProgram={program} does not exist: slurmd drains nothing, checks nothing"),
                "install slurm-imex-healthcheck there or fix HealthCheckProgram");
        }
        return Check::pass(
            CheckName::Healthcheck,
            format!(
                "HealthCheckProgram={program} (every {}s)",
                slurm.get("HealthCheckInterval").unwrap_or("0")
            ),
        );
    }
    Check::warn(CheckName::Healthcheck, format!("HealthCheckProgram={program} does not run `slurm-imex check`"),
        "call `slurm-imex check --drain --undrain` from it (e.g. from NHC) so idle nodes are gated too")
}

/// Our channels mode against Slurm's SwitchType.
pub fn switch(slurm: &SlurmView, config: &Config) -> Check {
    let switch = slurm.get("SwitchType").unwrap_or("switch/none");
    let slurm_channels = switch.eq_ignore_ascii_case("switch/nvidia_imex");
    match (config.imex.channels, slurm_channels) {
        (ChannelMode::Slurm, false) => Check::fail(CheckName::Switch,
            format!("[imex] channels = \"slurm\" but SwitchType={switch}: no job would get a channel"),
            "set SwitchType=switch/nvidia_imex in slurm.conf, or [imex] channels = \"auto\""),
        (ChannelMode::Plugin, true) => Check::pass(CheckName::Switch,
            format!("SwitchType={switch}, [imex] channels = \"plugin\": slurm-imex replaces Slurm's channel in --imex jobs")),
        (mode, _) => Check::pass(CheckName::Switch, format!("SwitchType={switch}, [imex] channels = \"{}\"{}", mode.as_str(),
            if mode == ChannelMode::Auto { if slurm_channels { " (Slurm's channels)" } else { " (slurm-imex's channels)" } } else { "" })),
    }
}

/// Processes that enter a job through `pam_slurm_adopt` (ssh into one of its
/// nodes: pdsh or mpirun-over-ssh launchers) get no slurm-imex channel:
/// they are no task, so no SPANK callback makes one for them, and the only
/// mount namespace they join is the job container's (docs/guide.md,
/// "Processes adopted by pam_slurm_adopt"). Slurm's switch/nvidia_imex
/// makes the extern step's channel in that container under
/// namespace/tmpfs or job_container/tmpfs, which adopted processes join.
/// WARN when `pam_dir` configures pam_slurm_adopt without that.
pub fn adopted_processes(slurm: &SlurmView, pam_dir: &Path) -> Check {
    let adopts = std::fs::read_dir(pam_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| slurm_imex_core::fsutil::read_bounded_text(&e.path(), 1 << 20).ok())
        .any(|text| {
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default())
                .any(|l| l.contains("pam_slurm_adopt"))
        });
    if !adopts {
        return Check::pass(
            CheckName::Adopt,
            format!(
                "no pam_slurm_adopt in {}: every process of a job is a task of a step",
                pam_dir.display()
            ),
        );
    }
    let switch = slurm.get("SwitchType").unwrap_or_default();
    let container = [slurm.get("NamespaceType"), slurm.get("JobContainerType")]
        .into_iter()
        .flatten()
        .any(|t| t.to_ascii_lowercase().ends_with("/tmpfs"));
    if switch.eq_ignore_ascii_case("switch/nvidia_imex") && container {
        return Check::pass(CheckName::Adopt, "pam_slurm_adopt joins the job container, where switch/nvidia_imex made the job's channel");
    }
    Check::warn(CheckName::Adopt,
        format!("pam_slurm_adopt is configured in {}: a process that enters a job by ssh (pdsh, mpirun over ssh) is no task and gets no IMEX channel", pam_dir.display()),
        "launch every rank with srun (mpirun through Slurm's PMIx, DeepSpeed --launcher slurm), or use SwitchType=switch/nvidia_imex with a tmpfs job container (docs/guide.md)")
}

/// Who may read a job's summary (`slurm-imex job`: the AdminComment
/// through sacct, docs/guide.md) is Slurm's `PrivateData` to decide: the
/// CLI runs as the user, so its own refusal is no control. WARN unless it
/// names `jobs`. Matched as Slurm matches it: any word holding "job"
/// (src/common/read_config.c). sacct answers from slurmdbd, whose own
/// slurmdbd.conf PrivateData the doctor cannot see: the PASS line says so.
pub fn private_data(slurm: &SlurmView) -> Check {
    let value = slurm.get("PrivateData").unwrap_or("none");
    if value.to_ascii_lowercase().contains("job") {
        return Check::pass(
            CheckName::PrivateData,
            format!("PrivateData={value}: squeue and scontrol show a user only their own jobs; slurmdbd.conf's PrivateData must say jobs too for sacct and the slurm-imex summaries"),
        );
    }
    Check::warn(CheckName::PrivateData,
        format!("PrivateData={value}: any user can read any job's slurm-imex summary (sacct -o AdminComment) and so its nodes' GPU health"),
        "add jobs to PrivateData in slurm.conf and slurmdbd.conf, unless your users may see each other's jobs")
}

/// `[imex] domain = "rack"`: two running jobs of a rack never share a
/// channel (`imex::rack_channels`), or every --imex job fails.
pub fn rack_channels(config: &Config) -> Check {
    if config.engine.domain == DomainScope::Job {
        return Check::pass(
            CheckName::RackChannels,
            "[imex] domain = \"job\": every --imex job has an IMEX domain of its own",
        );
    }
    let ctx = slurm_imex_domain::context::HookContext::new(config);
    match rack_channels::guarantee(&ctx) {
        Ok(g) => Check::pass(
            CheckName::RackChannels,
            format!("[imex] domain = \"rack\": {}", g.describe()),
        ),
        Err(why) => Check::fail(
            CheckName::RackChannels,
            why.to_string(),
            "every --imex job fails until then; doctor reads slurm.conf as this node does",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use std::os::unix::fs::PermissionsExt;

    fn view(lines: &str) -> SlurmView {
        SlurmView::parse(lines)
    }

    #[test]
    fn adopted_processes_are_warned_about_only_where_they_get_no_channel() {
        let d = tempfile::tempdir().unwrap();
        let none = adopted_processes(&view("SwitchType = switch/none\n"), d.path());
        assert_eq!(none.verdict, Status::Pass);
        std::fs::write(
            d.path().join("sshd"),
            "# account required pam_slurm_adopt.so\n",
        )
        .unwrap();
        assert_eq!(adopted_processes(&view(""), d.path()).verdict, Status::Pass);
        std::fs::write(
            d.path().join("sshd"),
            "account    required     pam_slurm_adopt.so\n",
        )
        .unwrap();
        let w = adopted_processes(&view("SwitchType = switch/none\n"), d.path());
        assert_eq!(w.verdict, Status::Warn);
        assert!(w.line().contains("gets no IMEX channel"), "{}", w.line());
        let joined = adopted_processes(
            &view("SwitchType = switch/nvidia_imex\nNamespaceType = namespace/tmpfs\n"),
            d.path(),
        );
        assert_eq!(joined.verdict, Status::Pass);
    }

    #[test]
    fn prolog_flags_without_alloc_fail() {
        assert_eq!(
            prolog_flags(&view("PrologFlags = Alloc,Contain\n")).verdict,
            Status::Pass
        );
        // Contain (and RunInJob, NoHold, …) turn Alloc on in Slurm itself.
        for implied in [
            "Contain",
            "contain,X11",
            "RunInJob",
            "NoHold",
            "ForceRequeueOnFail",
        ] {
            let f = prolog_flags(&view(&format!("PrologFlags = {implied}\n")));
            assert_eq!(f.verdict, Status::Pass, "{implied}");
        }
        let f = prolog_flags(&view("PrologFlags = Serial,DeferBatch\n"));
        assert_eq!(f.verdict, Status::Fail);
        assert!(
            f.line()
                .starts_with("FAIL  prolog-flags    PrologFlags=Serial,DeferBatch lacks Alloc"),
            "{}",
            f.line()
        );
        assert!(f.remedy.contains("add Alloc to PrologFlags"));
        assert_eq!(
            prolog_flags(&view("PrologFlags = (null)\n")).verdict,
            Status::Fail
        );
    }

    #[test]
    fn prolog_unset_other_program_wrapper_and_missing_binary() {
        let d = tempfile::tempdir().unwrap();
        let sbin = d.path().join("slurm-imex-prolog");
        let suggested = Path::new("/usr/sbin/slurm-imex-prolog");
        let unset = hook(
            &view("Prolog = (null)\n"),
            "Prolog",
            "slurm-imex-prolog",
            suggested,
        );
        assert_eq!(
            (unset.check, unset.verdict),
            (CheckName::Prolog, Status::Fail)
        );
        assert!(
            unset.remedy.contains("Prolog=/usr/sbin/slurm-imex-prolog"),
            "{}",
            unset.remedy
        );

        let other = d.path().join("site-prolog.sh");
        std::fs::write(&other, "#!/bin/sh\nexit 0\n").unwrap();
        let f = hook(
            &view(&format!("Prolog = {}\n", other.display())),
            "Prolog",
            "slurm-imex-prolog",
            suggested,
        );
        assert_eq!(f.verdict, Status::Fail);
        assert!(
            f.found.contains("does not run slurm-imex-prolog"),
            "{}",
            f.found
        );

        std::fs::write(&other, "#!/bin/sh\n/usr/sbin/slurm-imex-prolog || exit 1\n").unwrap();
        let f = hook(
            &view(&format!("Prolog = /x/a.sh,{}\n", other.display())),
            "Prolog",
            "slurm-imex-prolog",
            suggested,
        );
        assert_eq!(f.verdict, Status::Pass, "{}", f.line());

        let missing = hook(
            &view(&format!("Prolog = {}\n", sbin.display())),
            "Prolog",
            "slurm-imex-prolog",
            suggested,
        );
        assert_eq!(missing.verdict, Status::Fail);
        assert!(
            missing.found.contains("does not exist"),
            "{}",
            missing.found
        );
        std::fs::write(&sbin, "").unwrap();
        std::fs::set_permissions(&sbin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let present = hook(
            &view(&format!("Prolog = {}\n", sbin.display())),
            "Prolog",
            "slurm-imex-prolog",
            suggested,
        );
        assert_eq!(present.verdict, Status::Pass, "{}", present.line());
    }

    #[test]
    fn channels_slurm_without_the_switch_fails() {
        let mut config = Config::default();
        config.imex.channels = ChannelMode::Slurm;
        let f = switch(&view("SwitchType = switch/none\n"), &config);
        assert_eq!(f.verdict, Status::Fail);
        assert!(f.remedy.contains("SwitchType=switch/nvidia_imex"));
        assert_eq!(
            switch(&view("SwitchType = switch/nvidia_imex\n"), &config).verdict,
            Status::Pass
        );
    }

    #[test]
    fn rack_domains_need_channels_that_cannot_collide() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=x\n").unwrap();
        let mut config = Config::default();
        config.slurm.config = slurm_imex_core::config::AutoPath::Path(conf.clone());
        assert_eq!(rack_channels(&config).verdict, Status::Pass);
        config.engine.domain = DomainScope::Rack;
        let f = rack_channels(&config);
        assert_eq!(f.verdict, Status::Fail);
        assert!(f.found.contains("set MaxJobId=2047"), "{}", f.found);
        std::fs::write(&conf, "MaxJobId=2047\n").unwrap();
        let f = rack_channels(&config);
        assert_eq!(f.verdict, Status::Pass, "{}", f.line());
        assert!(f.found.contains("job ids 1..2047"), "{}", f.found);
        // An inverted range slurmctld refuses is a FAIL naming it, not a PASS.
        std::fs::write(&conf, "FirstJobId=0x1000\nMaxJobId=2047\n").unwrap();
        let f = rack_channels(&config);
        assert_eq!(f.verdict, Status::Fail, "{}", f.line());
        assert!(
            f.found.contains("FirstJobId 4096 is above MaxJobId 2047")
                && f.found.contains("slurmctld refuses this slurm.conf"),
            "{}",
            f.found
        );
    }

    #[test]
    fn private_data_without_jobs_warns() {
        for (conf, verdict) in [
            ("PrivateData = none\n", Status::Warn),
            ("", Status::Warn),
            ("PrivateData = accounts,usage\n", Status::Warn),
            ("PrivateData = usage,jobs\n", Status::Pass),
            ("PrivateData = Jobs\n", Status::Pass),
            ("PrivateData = job\n", Status::Pass),
        ] {
            let check = private_data(&view(conf));
            assert_eq!(check.verdict, verdict, "{conf:?}: {}", check.line());
        }
        assert!(private_data(&view(""))
            .line()
            .contains("any user can read any job's slurm-imex summary"));
    }

    #[test]
    fn health_check_unset_warns_and_a_missing_wrapper_fails() {
        assert_eq!(
            health_check(&view("HealthCheckProgram = (null)\n")).verdict,
            Status::Warn
        );
        let f = health_check(&view(
            "HealthCheckProgram = /nonexistent/slurm-imex-healthcheck\n",
        ));
        assert_eq!(f.verdict, Status::Fail, "{}", f.line());
    }
}
