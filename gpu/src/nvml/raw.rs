//! Raw NVML calls that nvml-wrapper 0.13 does not wrap
//! (`unwrapped_functions.txt`): GPU fabric info (v4 where the driver has
//! it, else v3) and remapped rows. v3 and remapped rows go through the
//! symbol table nvml-wrapper already loaded; v4 (R615), which nvml-wrapper
//! does not know, is looked up in the same loaded library (`FabricV4`). A
//! driver without a symbol yields NotSupported (or v3) instead of a crash.

use super::snapshot::{FabricClique, FabricInfo, Reading, RemappedRows};
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlGpuFabricState_t, nvmlReturn_t};
use std::os::raw::{c_uchar, c_uint};
use std::path::Path;

/// The `nvmlGpuFabricInfo_v3` version word: struct size | (3 << 24).
const FABRIC_INFO_V3: u32 =
    std::mem::size_of::<nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v3_t>() as u32 | (3 << 24);

fn reading<T>(r: Result<T, NvmlError>) -> Reading<T> {
    match r {
        Ok(v) => Reading::Value(v),
        Err(NvmlError::NotSupported) | Err(NvmlError::FunctionNotFound) => Reading::NotSupported,
        Err(e) => Reading::Failed(e.to_string()),
    }
}

/// `NVML_GPU_FABRIC_CLIQUE_MAX`.
const CLIQUE_MAX: usize = 64;

/// `nvmlGpuFabricClique_v1_t` (docs.nvidia.com/deploy/nvml-api, R615).
#[repr(C)]
#[derive(Clone, Copy)]
struct CliqueV1 {
    kind: c_uchar,
    id: c_uint,
}

/// `nvmlGpuFabricInfo_v4_t` (R615): v3 with a flat array of typed cliques
/// in place of `cliqueId`, and no version word (its getter is a function
/// of its own, `nvmlDeviceGetGpuFabricInfo_v4`).
#[repr(C)]
struct FabricInfoV4 {
    cluster_uuid: [c_uchar; 16],
    status: nvmlReturn_t,
    cliques: [CliqueV1; CLIQUE_MAX],
    num_cliques: c_uint,
    state: nvmlGpuFabricState_t,
    health_mask: c_uint,
    health_summary: c_uchar,
}

type FabricV4Fn = unsafe extern "C" fn(nvmlDevice_t, *mut FabricInfoV4) -> nvmlReturn_t;

/// `nvmlDeviceGetGpuFabricInfo_v4` in the NVML library already loaded from
/// `library`, when the driver has it (R615+).
#[derive(Clone, Copy)]
pub struct FabricV4(FabricV4Fn);

impl FabricV4 {
    /// Look the symbol up in the library nvml-wrapper loaded: `dlopen` with
    /// RTLD_NOLOAD opens nothing new, it finds the loaded one by the same
    /// name. None on a driver without v4.
    pub fn find(library: &Path) -> Option<FabricV4> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(library.as_os_str().as_bytes()).ok()?;
        // SAFETY: both strings are NUL-terminated; RTLD_NOLOAD never runs a
        // library's constructors; the symbol, when present, has NVML's
        // documented signature, which FabricV4Fn spells.
        unsafe {
            let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            if handle.is_null() {
                return None;
            }
            let sym = libc::dlsym(handle, c"nvmlDeviceGetGpuFabricInfo_v4".as_ptr());
            (!sym.is_null())
                .then(|| FabricV4(std::mem::transmute::<*mut libc::c_void, FabricV4Fn>(sym)))
        }
    }
}

/// The documented clique types in their documented order (NVML publishes
/// no numbers for them; entries come sorted by type, and CUDA's
/// `CUcliqueType` numbers the same names 0 to 3 in this order).
const CLIQUE_KINDS: [&str; 4] = [
    "UNICAST_POINTER",
    "MULTICAST_POINTER",
    "UNICAST_LOGICAL_ENDPOINT",
    "MULTICAST_LOGICAL_ENDPOINT",
];

fn clique_kind(kind: u8) -> String {
    CLIQUE_KINDS
        .get(kind as usize)
        .map(|k| k.to_string())
        .unwrap_or_else(|| format!("TYPE_{kind}"))
}

fn state_name(state: u32) -> &'static str {
    match state {
        0 => "NOT_SUPPORTED",
        1 => "NOT_STARTED",
        2 => "IN_PROGRESS",
        3 => "COMPLETED",
        _ => "UNKNOWN",
    }
}

fn summary_name(summary: u32) -> &'static str {
    match summary {
        0 => "NOT_SUPPORTED",
        1 => "HEALTHY",
        2 => "UNHEALTHY",
        3 => "LIMITED_CAPACITY",
        _ => "UNKNOWN",
    }
}

/// The GPU's fabric info: v4 where the driver has it, else v3.
pub fn fabric_info(nvml: &Nvml, device: &Device, v4: Option<FabricV4>) -> Reading<FabricInfo> {
    match v4.map(|v4| fabric_info_v4(v4, device)) {
        Some(Reading::Failed(e)) => Reading::Failed(e),
        Some(Reading::Value(info)) => Reading::Value(info),
        Some(Reading::NotSupported) | None => fabric_info_v3(nvml, device),
    }
}

fn fabric_info_v4(v4: FabricV4, device: &Device) -> Reading<FabricInfo> {
    // SAFETY: plain C data, zero is a valid bit pattern; the handle comes
    // from a live Device of the library the symbol was found in.
    let result = unsafe {
        let mut info: FabricInfoV4 = std::mem::zeroed();
        nvml_try((v4.0)(device.handle(), &mut info)).map(|_| info)
    };
    reading(result).and_then_value(|info| {
        let state = state_name(info.state as u32);
        if state == "NOT_SUPPORTED" {
            return Reading::NotSupported;
        }
        let count = (info.num_cliques as usize).min(CLIQUE_MAX);
        let cliques: Vec<FabricClique> = info.cliques[..count]
            .iter()
            .map(|c| FabricClique {
                kind: clique_kind(c.kind),
                id: c.id,
            })
            .collect();
        let unicast = cliques
            .iter()
            .find(|c| c.kind == CLIQUE_KINDS[0])
            .map_or(0, |c| c.id);
        Reading::Value(FabricInfo {
            state: state.into(),
            status: info.status,
            clique_id: unicast,
            cluster_uuid: format_uuid(&info.cluster_uuid),
            health_mask: info.health_mask,
            health_summary: summary_name(info.health_summary as u32).into(),
            cliques,
            transitional_ms: None,
        })
    })
}

fn fabric_info_v3(nvml: &Nvml, device: &Device) -> Reading<FabricInfo> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref() else {
        return Reading::NotSupported; // driver older than 550
    };
    // SAFETY: the struct is plain C data, zero is a valid bit pattern; the
    // version word tells the driver which layout we pass; the handle comes
    // from a live Device of this Nvml.
    let result = unsafe {
        let mut info: nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v3_t = std::mem::zeroed();
        info.version = FABRIC_INFO_V3;
        nvml_try(sym(device.handle(), &mut info)).map(|_| info)
    };
    reading(result).and_then_value(|info| {
        let state = state_name(info.state as u32);
        if state == "NOT_SUPPORTED" {
            return Reading::NotSupported; // single-GPU / non-NVLink systems
        }
        Reading::Value(FabricInfo {
            state: state.into(),
            status: info.status,
            clique_id: info.cliqueId,
            cluster_uuid: format_uuid(&info.clusterUuid),
            health_mask: info.healthMask,
            health_summary: summary_name(info.healthSummary as u32).into(),
            cliques: Vec::new(),
            transitional_ms: None,
        })
    })
}

pub fn remapped_rows(nvml: &Nvml, device: &Device) -> Reading<RemappedRows> {
    let Ok(sym) = nvml.lib().nvmlDeviceGetRemappedRows.as_ref() else {
        return Reading::NotSupported;
    };
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: four valid out-pointers to u32 and a live device handle.
    let result = unsafe {
        nvml_try(sym(
            device.handle(),
            &mut corr,
            &mut unc,
            &mut pending,
            &mut failure,
        ))
    };
    reading(result.map(|_| RemappedRows {
        correctable: corr as u64,
        uncorrectable: unc as u64,
        pending: pending != 0,
        failure: failure != 0,
    }))
}

fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

trait AndThenValue<T> {
    fn and_then_value<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U>;
}

impl<T> AndThenValue<T> for Reading<T> {
    fn and_then_value<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U> {
        match self {
            Reading::Value(v) => f(v),
            Reading::NotSupported => Reading::NotSupported,
            Reading::Failed(e) => Reading::Failed(e),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clique_kinds_are_named_in_the_documented_order() {
        assert_eq!(super::clique_kind(0), "UNICAST_POINTER");
        assert_eq!(super::clique_kind(3), "MULTICAST_LOGICAL_ENDPOINT");
        assert_eq!(super::clique_kind(9), "TYPE_9");
        // The v4 layout as NVML's docs give it: 16 + 4 + 64 x 8 + 4 + 1
        // (+ 3 padding) + 4 + 1 (+ 3 padding).
        assert_eq!(std::mem::size_of::<super::FabricInfoV4>(), 548);
    }

    #[test]
    fn uuid_format() {
        let b = [
            0xdc, 0x6e, 0x40, 0xc4, 0xd7, 0x22, 0x43, 0x57, 0x9b, 0xa6, 0x52, 0x91, 0xdd, 0x46,
            0x12, 0x78,
        ];
        assert_eq!(
            super::format_uuid(&b),
            "dc6e40c4-d722-4357-9ba6-5291dd461278"
        );
    }
}
