//! Running the real binaries on a bad input, and the assertions every case
//! shares: it ends in time, it never panics, and what it says is one line
//! naming what, where and the fix. The binaries are those `cargo build
//! --workspace` put beside this test (tests/run-all.sh builds them first);
//! where they are missing (a plain `cargo test` on a fresh clone: cargo
//! builds binaries only for their own package's tests), they are built once
//! into target/bad-input-bins by the cargo running this test.

#![allow(dead_code)]

pub mod hostile;

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace binary `name`: target/<profile>/ where cargo put it, else
/// built now (once per test process).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let beside = profile_dir.join(name);
    if beside.exists() {
        return beside;
    }
    let built = built_here(profile_dir).join("debug").join(name);
    assert!(
        built.exists(),
        "{} missing after building it",
        built.display()
    );
    built
}

/// The fake `libnvidia-ml.so` `cargo build --workspace` put beside the
/// binaries; else built once into target/bad-input-bins.
pub fn fake_nvml() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let name = "libnvidia_ml.so";
    let beside = [profile_dir.join(name), profile_dir.join("deps").join(name)];
    if let Some(found) = beside.into_iter().find(|p| p.exists()) {
        return found;
    }
    let target = profile_dir.parent().unwrap().join("bad-input-bins");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let status = Command::new(cargo)
        .args(["build", "--quiet", "-p", "fake-nvml", "--lib"])
        .arg("--manifest-path")
        .arg(manifest)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cannot run cargo to build the fake NVML");
    assert!(status.success(), "building the fake NVML failed");
    target.join("debug").join(name)
}

/// Build the workspace's binaries into target/bad-input-bins (its own
/// target directory, so the build lock of the cargo running this test is
/// not waited on), once; the directory.
fn built_here(profile_dir: &Path) -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = profile_dir.parent().unwrap().join("bad-input-bins");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
            let status = Command::new(cargo)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "slurm-imex-hooks",
                    "-p",
                    "slurm-imex-cli",
                    "--bins",
                ])
                .arg("--manifest-path")
                .arg(manifest)
                .env("CARGO_TARGET_DIR", &target)
                .status()
                .expect("cannot run cargo to build the binaries under test");
            assert!(status.success(), "building the binaries under test failed");
            target
        })
        .clone()
}

/// A hook (`slurm-imex-prolog`, `-epilog`) as [`run`] runs it, but as
/// root in a private mount namespace whose `/run` is a fresh tmpfs: a hook
/// on a config it cannot load keeps its reason in the node's standing, in
/// the default state directory (`/run/slurm-imex`) when the config names
/// none, which must never be this machine's. Without root, as [`run`] (the
/// hook cannot create that directory, and says nothing of it).
pub fn run_hook_privately(program: &Path, args: &[&str], env: &[(&str, OsString)]) -> Ran {
    if !is_root() {
        return run(program, args, env);
    }
    let script = "mount -t tmpfs tmpfs /run && exec \"$0\" \"$@\"";
    let mut all = vec!["-m", "--propagation", "private", "sh", "-c", script];
    all.push(program.to_str().unwrap());
    all.extend_from_slice(args);
    run(Path::new("/usr/bin/unshare"), &all, env)
}

#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Run with exactly `env` (plus a PATH), stdin closed, a 20 s bound.
pub fn run(program: &Path, args: &[&str], env: &[(&str, OsString)]) -> Ran {
    run_with(program, args, env, Stdio::piped())
}

pub fn run_with(program: &Path, args: &[&str], env: &[(&str, OsString)], stdout: Stdio) -> Ran {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} {args:?} hung (killed after 20 s)", program.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ran {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&reader.join().unwrap()).into_owned(),
    }
}

impl Ran {
    /// Exited on its own (no signal) and did not panic.
    pub fn ended_without_panic(&self, case: &str) {
        assert!(
            !self.stderr.contains("panicked") && self.code.is_some() && self.code != Some(101),
            "{case}: panicked or killed ({:?}, signal {:?}): {}",
            self.code,
            self.signal,
            self.stderr
        );
    }

    /// Failed with `code`, saying one line that holds every `needle`.
    pub fn one_line_error(&self, code: i32, needles: &[&str], case: &str) {
        self.ended_without_panic(case);
        assert_eq!(
            self.code,
            Some(code),
            "{case}: exit status; stderr: {}",
            self.stderr
        );
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{case}: want one line, got: {}",
            self.stderr
        );
        assert!(
            lines[0].len() <= 4200,
            "{case}: line of {} bytes",
            lines[0].len()
        );
        for n in needles {
            assert!(lines[0].contains(n), "{case}: {n:?} not in: {}", lines[0]);
        }
    }
}

/// A node for the prolog of an `--imex` job: a scratch directory holding
/// a `/proc/devices` with the channel major, and the state directory.
pub struct ImexNode {
    pub dir: tempfile::TempDir,
}

impl ImexNode {
    pub fn new() -> ImexNode {
        let node = ImexNode { dir: scratch() };
        write_mode(
            &node.path("proc-devices"),
            b"Character devices:\n507 nvidia-caps-imex-channels\n",
            0o644,
        );
        node
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// imex.toml with no GPU gate and `tables` appended (its `[imex]`
    /// keys first, as `imex_keys`).
    pub fn config(&self, imex_keys: &str, tables: &str) -> PathBuf {
        let p = self.path("imex.toml");
        let text = format!(
            "[node]\nstate_dir = \"{}\"\n[imex]\nproc_devices = \"{}\"\nchannels = \"plugin\"\n{imex_keys}\
             [health]\nenabled = false\n{tables}",
            self.path("state").display(),
            self.path("proc-devices").display(),
        );
        write_mode(&p, text.as_bytes(), 0o644);
        p
    }

    /// The prolog of --imex job 7 on n1 of n[1-2] under `config`.
    pub fn prolog(&self, config: &Path) -> Ran {
        self.hook("slurm-imex-prolog", config)
    }

    /// The epilog of the same job.
    pub fn epilog(&self, config: &Path) -> Ran {
        self.hook("slurm-imex-epilog", config)
    }

    fn hook(&self, program: &str, config: &Path) -> Ran {
        run(
            &bin(program),
            &[],
            &[
                ("SLURM_IMEX_CONFIG", os(config.to_str().unwrap())),
                ("SLURM_JOB_ID", os("7")),
                ("SLURMD_NODENAME", os("n1")),
                ("SLURM_JOB_NODELIST", os("n[1-2]")),
                ("SPANK_IMEX", os("1")),
            ],
        )
    }

    /// Job 7 failed, not the node: the prolog exited 0 with one line
    /// holding `needles`, and the job's record holds the cause (with
    /// `file`, the file it names) as the job's fault, for the SPANK plugin
    /// to fail the job with.
    pub fn assert_jobs_fault(&self, ran: &Ran, file: &Path, needles: &[&str], case: &str) {
        let file = file.display().to_string();
        let mut all = vec![file.as_str(), "job 7 cannot use IMEX"];
        all.extend_from_slice(needles);
        ran.one_line_error(0, &all, case);
        let record = std::fs::read_to_string(self.path("state/jobs/7.json")).unwrap_or_default();
        assert!(
            record.contains("\"node_fault\": false") && record.contains(&file),
            "{case}: the job's record must hold the cause as the job's fault: {record}"
        );
        let _ = std::fs::remove_file(self.path("state/jobs/7.json"));
    }
}

/// A root-owned private scratch directory (mode 0755), as a real /etc is.
pub fn scratch() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

pub fn write_mode(path: &Path, text: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn os(s: &str) -> OsString {
    s.into()
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
