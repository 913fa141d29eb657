// A build script's failure is a build error, never a panic in Slurm.
#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Stamps the Slurm version this plugin is built for, read from the same
//! Slurm headers the build uses, and says whether slurm-spank generated its
//! bindings from them.
//!
//! Slurm refuses a SPANK plugin whose major.minor differs from its own. The
//! headers are `$SLURM_INCLUDE_DIR/slurm/slurm_version.h` (default
//! /usr/include; scripts/build-plugins.sh points it at another Slurm's
//! headers). `$SLURM_VERSION_NUMBER` (hex, e.g. 0x180b05) overrides them;
//! without either, 22.05.8.
//!
//! With `SKIP_SLURM_BINDINGS` (set in .cargo/config.toml, needed for Slurm
//! < 23.11) slurm-spank uses its bundled 23.11 bindings, so the stamp is the
//! only version information. Without it the bindings come from the headers,
//! and lib.rs checks at compile time that both agree.
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_VERSION_NUMBER");
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=SKIP_SLURM_BINDINGS");
    println!("cargo::rustc-check-cfg=cfg(generated_bindings)");
    let include = PathBuf::from(env::var("SLURM_INCLUDE_DIR").unwrap_or("/usr/include".into()));
    let header = include.join("slurm/slurm_version.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let parse = |s: &str| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    let version = env::var("SLURM_VERSION_NUMBER")
        .ok()
        .and_then(|s| parse(&s))
        .or_else(|| {
            fs::read_to_string(&header).ok().and_then(|h| {
                h.lines()
                    .find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER "))
                    .and_then(parse)
            })
        })
        .unwrap_or(0x160508);
    if env::var_os("SKIP_SLURM_BINDINGS").is_none() && env::var_os("DOCS_RS").is_none() {
        println!("cargo:rustc-cfg=generated_bindings");
    }
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("slurm_version.rs");
    fs::write(
        out,
        format!("/// Slurm version (0xMMmmpp) this plugin was built for.\npub const TARGET_SLURM_VERSION: u32 = {version:#x};\n"),
    )
    .expect("write slurm_version.rs");
}
