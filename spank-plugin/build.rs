//! Stamps the Slurm version this plugin is built for. slurm-spank's bundled
//! bindings (SKIP_SLURM_BINDINGS=1, see .cargo/config.toml) carry 23.11's
//! version number, and Slurm refuses a SPANK plugin whose major.minor differs
//! from its own. Order: $SLURM_VERSION_NUMBER (hex, e.g. 0x170b05 for
//! 23.11.5), else the installed <slurm/slurm_version.h>, else 22.05.8.
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_VERSION_NUMBER");
    println!("cargo:rerun-if-changed=/usr/include/slurm/slurm_version.h");
    let parse = |s: &str| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    let version = env::var("SLURM_VERSION_NUMBER")
        .ok()
        .and_then(|s| parse(&s))
        .or_else(|| {
            fs::read_to_string("/usr/include/slurm/slurm_version.h")
                .ok()
                .and_then(|h| {
                    h.lines()
                        .find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER "))
                        .and_then(parse)
                })
        })
        .unwrap_or(0x160508);
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("slurm_version.rs");
    fs::write(
        out,
        format!("/// Slurm version (0xMMmmpp) this plugin was built for.\npub const TARGET_SLURM_VERSION: u32 = {version:#x};\n"),
    )
    .expect("write slurm_version.rs");
}
