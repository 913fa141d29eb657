//! Raw NVML calls that nvml-wrapper 0.13 does not wrap
//! (`unwrapped_functions.txt`): GPU fabric info V3 and remapped rows. Each
//! goes through the symbol table nvml-wrapper already loaded, so a driver
//! without the symbol yields NotSupported instead of a crash.

use super::snapshot::{FabricInfo, Reading, RemappedRows};
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};

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

pub fn fabric_info(nvml: &Nvml, device: &Device) -> Reading<FabricInfo> {
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
        let state = match info.state as u32 {
            0 => "NOT_SUPPORTED",
            1 => "NOT_STARTED",
            2 => "IN_PROGRESS",
            3 => "COMPLETED",
            _ => "UNKNOWN",
        };
        if state == "NOT_SUPPORTED" {
            return Reading::NotSupported; // single-GPU / non-NVLink systems
        }
        let summary = match info.healthSummary as u32 {
            0 => "NOT_SUPPORTED",
            1 => "HEALTHY",
            2 => "UNHEALTHY",
            3 => "LIMITED_CAPACITY",
            _ => "UNKNOWN",
        };
        Reading::Value(FabricInfo {
            state: state.into(),
            status: info.status,
            clique_id: info.cliqueId,
            cluster_uuid: format_uuid(&info.clusterUuid),
            health_mask: info.healthMask,
            health_summary: summary.into(),
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
