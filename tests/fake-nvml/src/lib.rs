//! Fake `libnvidia-ml.so.1` (test double, never shipped): exports the NVML C
//! ABI calls slurm-imex makes, with NVIDIA's own struct layouts (from
//! nvml-wrapper-sys, generated from NVIDIA's nvml.h), and answers from a
//! scenario file (`scenario`). Production code loads it through exactly the
//! path it uses for the real library: nvml-wrapper's dlopen of
//! `[gpu] nvml_library`.
#![allow(non_snake_case, non_upper_case_globals, clippy::missing_safety_doc)]

pub mod driver;
pub mod nvidia_smi;
pub mod scenario;

use driver::{Driver, Ran};
use nvml_wrapper_sys::bindings::*;
use scenario::{Gpu, Scenario};
use std::ffi::c_char;
use std::os::raw::{c_int, c_uint, c_ulonglong};
use std::sync::Mutex;

static STATE: Mutex<Option<Scenario>> = Mutex::new(None);

const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
const UNINITIALIZED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
const INVALID_ARGUMENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
const INSUFFICIENT_SIZE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
const GPU_IS_LOST: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
const CORRUPTED_INFOROM: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_CORRUPTED_INFOROM;
const UNKNOWN: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNKNOWN;
const NO_PERMISSION: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NO_PERMISSION;
const ARGUMENT_VERSION_MISMATCH: nvmlReturn_t =
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;

fn handle_of(index: usize) -> nvmlDevice_t {
    (index + 1) as *mut nvmlDevice_st
}

/// Run `f` on the GPU behind `device`, after the scenario's faults: a lost
/// GPU answers GPU_IS_LOST, a hanging call sleeps (without holding the lock).
fn with_gpu(
    device: nvmlDevice_t,
    call: &str,
    f: impl FnOnce(&Gpu, &Scenario) -> nvmlReturn_t,
) -> nvmlReturn_t {
    let (gpu, scenario) = {
        let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = guard.as_ref() else {
            return UNINITIALIZED;
        };
        let index = (device as usize).wrapping_sub(1);
        let Some(g) = s.gpus.get(index) else {
            return INVALID_ARGUMENT;
        };
        (g.clone(), s.clone())
    };
    if gpu.hang_in.as_deref() == Some(call) {
        std::thread::sleep(std::time::Duration::from_millis(gpu.hang_ms));
    }
    if gpu.lost {
        return GPU_IS_LOST;
    }
    f(&gpu, &scenario)
}

unsafe fn write_str(s: &str, buf: *mut c_char, len: c_uint) -> nvmlReturn_t {
    if buf.is_null() {
        return INVALID_ARGUMENT;
    }
    let bytes = s.as_bytes();
    if bytes.len() + 1 > len as usize {
        return INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, buf, bytes.len());
    *buf.add(bytes.len()) = 0;
    SUCCESS
}

unsafe fn set<T>(out: *mut T, v: T) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    *out = v;
    SUCCESS
}

/// NVML's list convention: with too small a buffer, report the size needed.
unsafe fn write_list<T: Copy>(items: &[T], count: *mut c_uint, out: *mut T) -> nvmlReturn_t {
    if count.is_null() {
        return INVALID_ARGUMENT;
    }
    let room = *count as usize;
    *count = items.len() as c_uint;
    if items.is_empty() {
        return SUCCESS;
    }
    if room < items.len() || out.is_null() {
        return INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(items.as_ptr(), out, items.len());
    SUCCESS
}

fn enable(b: bool) -> nvmlEnableState_t {
    if b {
        nvmlEnableState_enum_NVML_FEATURE_ENABLED
    } else {
        nvmlEnableState_enum_NVML_FEATURE_DISABLED
    }
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    match Scenario::load() {
        Ok(s) => {
            if s.init_delay_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(
                    s.init_delay_ms.min(600_000),
                ));
            }
            if let Some(code) = s.init_error {
                return code;
            }
            let mut s = s;
            load_accounting(&mut s);
            *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
            SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            UNKNOWN
        }
    }
}

#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static [u8] = match result {
        SUCCESS => b"Success\0",
        UNINITIALIZED => b"Uninitialized\0",
        INVALID_ARGUMENT => b"Invalid Argument\0",
        NOT_SUPPORTED => b"Not Supported\0",
        INSUFFICIENT_SIZE => b"Insufficient Size\0",
        GPU_IS_LOST => b"GPU is lost\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr() as *const c_char
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(s) => write_str(&s.driver_version, version, length),
        None => UNINITIALIZED,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(s) => set(count, s.gpus.len() as c_uint),
        None => UNINITIALIZED,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(s) = guard.as_ref() else {
        return UNINITIALIZED;
    };
    match s.gpus.get(index as usize) {
        None => INVALID_ARGUMENT,
        Some(g) if g.lost => GPU_IS_LOST,
        Some(_) => set(device, handle_of(index as usize)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(
    device: nvmlDevice_t,
    index: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "index", |_, _| {
        set(index, (device as usize - 1) as c_uint)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "uuid", |g, _| write_str(&g.uuid, uuid, length))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSerial(
    device: nvmlDevice_t,
    serial: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "serial", |g, _| {
        if g.serial.is_empty() {
            NOT_SUPPORTED
        } else {
            write_str(&g.serial, serial, length)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "name", |g, _| write_str(&g.name, name, length))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with_gpu(device, "pci", |g, _| {
        if pci.is_null() {
            return INVALID_ARGUMENT;
        }
        let mut info: nvmlPciInfo_t = std::mem::zeroed();
        let parts: Vec<u32> = g
            .pci_bus_id
            .split([':', '.'])
            .map(|p| u32::from_str_radix(p, 16).unwrap_or(0))
            .collect();
        info.domain = *parts.first().unwrap_or(&0);
        info.bus = *parts.get(1).unwrap_or(&0);
        info.device = *parts.get(2).unwrap_or(&0);
        info.pciDeviceId = 0x2941_10de;
        let r = write_str(&g.pci_bus_id, info.busId.as_mut_ptr(), 32);
        if r != SUCCESS {
            return r;
        }
        let legacy = format!("{:04X}:{:02X}:{:02X}.0", info.domain, info.bus, info.device);
        let _ = write_str(&legacy, info.busIdLegacy.as_mut_ptr(), 16);
        *pci = info;
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    count: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_gpu(device, "ecc", |g, _| {
        if !g.ecc_enabled {
            return NOT_SUPPORTED;
        }
        let v = match (error_type, counter_type) {
            (0, 0) => g.ecc_volatile_sbe,
            (1, 0) => g.ecc_volatile_dbe,
            (0, 1) => g.ecc_aggregate_sbe,
            (1, 1) => g.ecc_aggregate_dbe,
            _ => return INVALID_ARGUMENT,
        };
        set(count, v)
    })
}

fn retired(g: &Gpu, cause: nvmlPageRetirementCause_t) -> Option<Vec<c_ulonglong>> {
    let n = match cause {
        0 => g.retired_sbe,
        1 => g.retired_dbe,
        _ => return None,
    };
    Some((0..n as u64).map(|i| 0x1000 * (i + 1)).collect())
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_gpu(device, "retired_pages", |g, _| match retired(g, cause) {
        Some(pages) => write_list(&pages, count, addresses),
        None => INVALID_ARGUMENT,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: nvmlPageRetirementCause_t,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> nvmlReturn_t {
    let r = nvmlDeviceGetRetiredPages(device, cause, count, addresses);
    if r == SUCCESS && !timestamps.is_null() && !count.is_null() {
        for i in 0..*count as usize {
            *timestamps.add(i) = 1_700_000_000_000_000;
        }
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_gpu(device, "retired_pages", |g, _| {
        set(pending, enable(g.retired_pending))
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "remap", |g, _| {
        let Some(c) = g.remap_correctable else {
            return NOT_SUPPORTED;
        };
        if corr.is_null() || unc.is_null() || pending.is_null() || failure.is_null() {
            return INVALID_ARGUMENT;
        }
        *corr = c;
        *unc = g.remap_uncorrectable;
        *pending = g.remap_pending as c_uint;
        *failure = g.remap_failure as c_uint;
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    count: c_int,
    values: *mut nvmlFieldValue_t,
) -> nvmlReturn_t {
    with_gpu(device, "fields", |g, s| {
        if values.is_null() || count < 0 {
            return INVALID_ARGUMENT;
        }
        for i in 0..count as usize {
            let v = &mut *values.add(i);
            v.timestamp = 0;
            v.latencyUsec = 1;
            match v.fieldId {
                230 => {
                    v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                    v.value.ullVal = s.recovery_action_now(g);
                    v.nvmlReturn = SUCCESS;
                }
                _ => v.nvmlReturn = NOT_SUPPORTED,
            }
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: nvmlDevice_t,
    info: *mut nvmlGpuFabricInfoV_t,
) -> nvmlReturn_t {
    with_gpu(device, "fabric", |g, s| {
        if info.is_null() {
            return INVALID_ARGUMENT;
        }
        let version = (*info).version >> 24;
        if version != 3 && version != 2 {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let out = &mut *info;
        match &g.fabric {
            None => out.state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED as _,
            Some(f) => {
                out.state = fabric_state(f.state_now(s));
                out.status = f.status;
                out.cliqueId = f.clique_id;
                out.healthMask = f.health_mask;
                out.clusterUuid = uuid_bytes(&f.cluster_uuid);
                if version == 3 {
                    out.healthSummary = health_summary(&f.health_summary);
                }
            }
        }
        SUCCESS
    })
}

fn fabric_state(state: &str) -> nvmlGpuFabricState_t {
    (match state {
        "not_started" => NVML_GPU_FABRIC_STATE_NOT_STARTED,
        "in_progress" => NVML_GPU_FABRIC_STATE_IN_PROGRESS,
        "completed" => NVML_GPU_FABRIC_STATE_COMPLETED,
        _ => NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
    }) as nvmlGpuFabricState_t
}

fn health_summary(summary: &str) -> u8 {
    (match summary {
        "healthy" => NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY,
        "unhealthy" => NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY,
        "limited_capacity" => NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY,
        _ => NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED,
    }) as u8
}

fn uuid_bytes(uuid: &str) -> [u8; 16] {
    let hex: String = uuid.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = hex
            .get(i * 2..i * 2 + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

/// `nvmlGpuFabricClique_v1_t` (NVML R615 docs, docs.nvidia.com/deploy/nvml-api).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FabricCliqueV1 {
    pub kind: u8,
    pub id: c_uint,
}

/// `nvmlGpuFabricInfo_v4_t` as NVML's R615 documentation lists its members:
/// no version word; 64 typed cliques in place of v3's `cliqueId`.
#[repr(C)]
pub struct FabricInfoV4 {
    pub cluster_uuid: [u8; 16],
    pub status: nvmlReturn_t,
    pub cliques: [FabricCliqueV1; 64],
    pub num_cliques: c_uint,
    pub state: nvmlGpuFabricState_t,
    pub health_mask: c_uint,
    pub health_summary: u8,
}

/// The driver that first has v4 (NVML change log, v610 to v615).
const FABRIC_V4_DRIVER: u32 = 615;

/// `nvmlDeviceGetGpuFabricInfo_v4` (R615). A real older driver has no such
/// symbol; the fake always exports it, and for a scenario driver before
/// 615 answers FUNCTION_NOT_FOUND, which callers must take as "no v4".
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo_v4(
    device: nvmlDevice_t,
    info: *mut FabricInfoV4,
) -> nvmlReturn_t {
    with_gpu(device, "fabric", |g, s| {
        if s.driver_major() < FABRIC_V4_DRIVER {
            return nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND;
        }
        if info.is_null() {
            return INVALID_ARGUMENT;
        }
        let out = &mut *info;
        let Some(f) = &g.fabric else {
            out.state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED as _;
            return SUCCESS;
        };
        out.state = fabric_state(f.state_now(s));
        out.status = f.status;
        out.health_mask = f.health_mask;
        out.health_summary = health_summary(&f.health_summary);
        out.cluster_uuid = uuid_bytes(&f.cluster_uuid);
        let default = [scenario::Clique {
            kind: 0,
            id: f.clique_id,
        }];
        let cliques = f.cliques.as_deref().unwrap_or(&default);
        out.num_cliques = cliques.len().min(64) as c_uint;
        for (slot, c) in out.cliques.iter_mut().zip(cliques) {
            *slot = FabricCliqueV1 {
                kind: c.kind,
                id: c.id,
            };
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_gpu(device, "nvlink", |g, _| {
        if g.nvlinks == 0 {
            NOT_SUPPORTED
        } else if link >= g.nvlinks {
            INVALID_ARGUMENT
        } else {
            set(active, enable(!g.nvlinks_down.contains(&link)))
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: nvmlNvLinkErrorCounter_t,
    value: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_gpu(device, "nvlink", |g, _| {
        if g.nvlinks == 0 {
            return NOT_SUPPORTED;
        }
        if link >= g.nvlinks {
            return INVALID_ARGUMENT;
        }
        // Errors are reported on link 0 only.
        let v = match (link, counter) {
            (0, nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_CRC_FLIT) => g.nvlink_crc_flit,
            (0, nvmlNvLinkErrorCounter_enum_NVML_NVLINK_ERROR_DL_REPLAY) => g.nvlink_replay,
            _ => 0,
        };
        set(value, v)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with_gpu(device, "processes", |g, _| {
        let info = |pid, used| nvmlProcessInfo_t {
            pid,
            usedGpuMemory: used,
            gpuInstanceId: u32::MAX,
            computeInstanceId: u32::MAX,
        };
        let workloads = Driver::of(&Scenario::path()).processes(&g.uuid);
        let running: Vec<nvmlProcessInfo_t> = g
            .processes
            .iter()
            .filter(|p| p.running)
            .map(|p| info(p.pid, p.used_memory))
            .chain(
                workloads
                    .iter()
                    .filter(|r| r.running())
                    .map(|r| info(r.pid, r.max_memory)),
            )
            .collect();
        write_list(&running, count, infos)
    })
}

/// Each GPU's accounting mode as this client finds it: what an earlier
/// client set, when persistence mode kept the driver loaded in between;
/// otherwise the driver's default after loading (`driver`).
fn load_accounting(s: &mut Scenario) {
    let driver = Driver::of(&Scenario::path());
    for g in &mut s.gpus {
        let at_load = g.accounting.then_some(0);
        g.accounting_since = match g.persistence {
            true => driver.accounting(&g.uuid).unwrap_or(at_load),
            false => at_load,
        };
    }
}

/// The processes the accounting buffer holds for `g`: the scenario's, then
/// those that ran since accounting was turned on, the newest
/// `accounting_buffer` of them. Empty while accounting is off.
fn accounted(g: &Gpu) -> Vec<Ran> {
    let Some(since) = g.accounting_since else {
        return Vec::new();
    };
    let listed = g.processes.iter().map(|p| Ran {
        pid: p.pid,
        start_us: p.start_us,
        end_us: (!p.running).then_some(p.start_us + p.time_ms * 1000),
        gpu_util: p.gpu_util,
        mem_util: p.mem_util,
        max_memory: p.max_memory,
    });
    let ran = Driver::of(&Scenario::path()).processes(&g.uuid);
    let mut all: Vec<Ran> = listed
        .chain(ran.into_iter().filter(|r| r.start_us >= since))
        .collect();
    let keep = g.accounting_buffer as usize;
    if all.len() > keep {
        all.drain(..all.len() - keep);
    }
    all
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_gpu(device, "accounting", |g, _| {
        set(mode, enable(g.accounting_since.is_some()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceSetAccountingMode(
    device: nvmlDevice_t,
    mode: nvmlEnableState_t,
) -> nvmlReturn_t {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return NO_PERMISSION; // "Requires root/admin permissions."
    }
    let on = mode == nvmlEnableState_enum_NVML_FEATURE_ENABLED;
    let checked = with_gpu(device, "accounting", |_, _| SUCCESS);
    if checked != SUCCESS {
        return checked;
    }
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(g) = guard
        .as_mut()
        .and_then(|s| s.gpus.get_mut((device as usize).wrapping_sub(1)))
    else {
        return INVALID_ARGUMENT;
    };
    // Turning it on again keeps what it holds; off clears every process.
    g.accounting_since = match (on, g.accounting_since) {
        (true, Some(since)) => Some(since),
        (true, None) => Some(driver::now_us()),
        (false, _) => None,
    };
    if g.persistence {
        if let Err(e) = Driver::of(&Scenario::path()).keep_accounting(&g.uuid, g.accounting_since) {
            eprintln!("fake-nvml: cannot keep the accounting mode: {e}");
            return UNKNOWN;
        }
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingBufferSize(
    device: nvmlDevice_t,
    size: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "accounting", |g, _| set(size, g.accounting_buffer))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingPids(
    device: nvmlDevice_t,
    count: *mut c_uint,
    pids: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "accounting", |g, _| {
        if g.accounting_since.is_none() {
            return NOT_SUPPORTED;
        }
        // A pid used twice is one process to NVML: only the latest is kept.
        let mut list: Vec<c_uint> = Vec::new();
        for p in accounted(g) {
            if !list.contains(&p.pid) {
                list.push(p.pid);
            }
        }
        write_list(&list, count, pids)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAccountingStats(
    device: nvmlDevice_t,
    pid: c_uint,
    stats: *mut nvmlAccountingStats_t,
) -> nvmlReturn_t {
    with_gpu(device, "accounting", |g, _| {
        if g.accounting_since.is_none() {
            return NOT_SUPPORTED;
        }
        // With a pid used twice, the one that ended last (NVML's rule: "in
        // case of pid collision stats of only the latest process (that
        // terminated last) will be reported"); one still running is latest.
        let Some(p) = accounted(g)
            .into_iter()
            .filter(|p| p.pid == pid)
            .max_by_key(|p| p.end_us.unwrap_or(u64::MAX))
        else {
            return nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
        };
        let mut s: nvmlAccountingStats_t = std::mem::zeroed();
        s.gpuUtilization = p.gpu_util;
        s.memoryUtilization = p.mem_util;
        s.maxMemoryUsage = p.max_memory;
        s.time = p.time_ms();
        s.startTime = p.start_us;
        s.isRunning = p.running() as c_uint;
        set(stats, s)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(
    device: nvmlDevice_t,
    mode: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_gpu(device, "modes", |g, _| set(mode, enable(g.persistence)))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut nvmlEnableState_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with_gpu(device, "modes", |g, _| {
        let r = set(current, enable(g.ecc_enabled));
        if r != SUCCESS {
            return r;
        }
        set(pending, enable(g.ecc_enabled))
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "modes", |g, _| {
        let r = set(current, g.mig as c_uint);
        if r != SUCCESS {
            return r;
        }
        set(pending, g.mig as c_uint)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceValidateInforom(device: nvmlDevice_t) -> nvmlReturn_t {
    with_gpu(device, "modes", |g, _| {
        if g.inforom_valid {
            SUCCESS
        } else {
            CORRUPTED_INFOROM
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: nvmlDevice_t,
    energy: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_gpu(device, "energy", |g, s| match g.energy_mj {
        Some(e) => set(energy, e + (g.power_mw as f64 * s.elapsed_s()) as u64),
        None => NOT_SUPPORTED,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(
    device: nvmlDevice_t,
    value: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "pcie", |g, _| set(value, g.pcie_replays))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(
    device: nvmlDevice_t,
    width: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "pcie", |g, _| set(width, g.pcie_width))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(
    device: nvmlDevice_t,
    width: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "pcie", |g, _| set(width, g.pcie_max_width))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    with_gpu(device, "throttle", |g, _| set(reasons, g.throttle_reasons))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    with_gpu(device, "temperature", |g, _| {
        if sensor != nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
            return INVALID_ARGUMENT;
        }
        if g.temperature == 0 {
            return NOT_SUPPORTED;
        }
        set(temp, g.temperature)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    device: nvmlDevice_t,
    policy: nvmlPerfPolicyType_t,
    time: *mut nvmlViolationTime_t,
) -> nvmlReturn_t {
    with_gpu(device, "violations", |g, s| {
        let name = match policy {
            0 => "power",
            1 => "thermal",
            2 => "sync_boost",
            3 => "board_limit",
            4 => "low_utilization",
            5 => "reliability",
            _ => return NOT_SUPPORTED,
        };
        let mut ns = g.violation_ns.get(name).copied().unwrap_or(0);
        if name == "power" {
            ns += (g.power_violation_ns_per_s as f64 * s.elapsed_s()) as u64;
        }
        set(
            time,
            nvmlViolationTime_t {
                referenceTime: 1_700_000_000_000_000,
                violationTime: ns,
            },
        )
    })
}
