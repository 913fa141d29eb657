//! Loading a SPANK plugin the way slurmd does (dlopen) and reading the
//! Slurm version it was stamped for (`plugin_version`, 0xMMmmuu) and its
//! `plugin_type` ("spank"). The spank_* functions a plugin calls live in
//! Slurm's libslurmfull.so (in PluginDir), which is loaded first with its
//! symbols global, as in slurmd: a plugin linked with immediate binding
//! (Rust's default) cannot load without them.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// "24.11.5" for a plugin stamped 0x180b05; `plugin_dirs` is where
/// libslurmfull.so is looked for. Err is the reason (dlopen's words),
/// which the plugstack check puts in its line.
pub fn read(path: &Path, plugin_dirs: &[PathBuf]) -> Result<String, String> {
    if let Some(lib) = plugin_dirs
        .iter()
        .map(|d| d.join("libslurmfull.so"))
        .find(|l| l.is_file())
    {
        slurm_imex_core::trust::check(
            &lib,
            slurm_imex_core::trust::Expect::File,
            "Slurm's library",
        )
        .map_err(|e| e.to_string())?;
        open_global(&lib)?;
    }
    let c_path =
        CString::new(path.as_os_str().as_bytes()).map_err(|_| "a NUL in the path".to_string())?;
    // SAFETY: dlopen with a valid C string; RTLD_LOCAL keeps its symbols to itself.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(dl_error());
    }
    let stamp = read_symbols(handle);
    // SAFETY: the handle came from dlopen above and nothing of it is kept.
    unsafe { libc::dlclose(handle) };
    stamp
}

/// Load Slurm's own library for good, its symbols visible to what follows.
fn open_global(lib: &Path) -> Result<(), String> {
    let c_path =
        CString::new(lib.as_os_str().as_bytes()).map_err(|_| "a NUL in the path".to_string())?;
    // SAFETY: dlopen with a valid C string; the handle is kept for the process's life.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(format!(
            "Slurm's {} does not load: {}",
            lib.display(),
            dl_error()
        ));
    }
    Ok(())
}

fn read_symbols(handle: *mut libc::c_void) -> Result<String, String> {
    // SAFETY: dlsym on a live handle with static C strings.
    let version = unsafe { libc::dlsym(handle, c"plugin_version".as_ptr()) } as *const u32;
    let kind = unsafe { libc::dlsym(handle, c"plugin_type".as_ptr()) } as *const libc::c_char;
    if version.is_null() {
        return Err("no plugin_version symbol: not a Slurm plugin".into());
    }
    if !kind.is_null() {
        // SAFETY: SPANK's plugin_type is a NUL-terminated `const char[]` ("spank").
        let kind = unsafe { CStr::from_ptr(kind) }.to_str().unwrap_or("");
        if kind != "spank" {
            return Err(format!("plugin_type is \"{kind}\", not \"spank\""));
        }
    }
    // SAFETY: plugin_version is a `const uint32_t` in every Slurm plugin.
    let v = unsafe { *version };
    Ok(format!(
        "{}.{:02}.{}",
        (v >> 16) & 0xff,
        (v >> 8) & 0xff,
        v & 0xff
    ))
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local message or NULL.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        return "dlopen failed".into();
    }
    let text = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    slurm_imex_core::text::cap(&text, 300)
}
