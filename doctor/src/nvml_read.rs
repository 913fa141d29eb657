//! What NVML told the doctor ([`NvmlRead`], its [`Answer`]), read once for the checks that
//! use it (`nvml`, `accounting`, `topology`): the library loaded, the GPU
//! count and driver, and every GPU read through the health gate's reader
//! (`gate::read_gpus`), each stage within the gate's budget for it and the
//! whole read within `[health] gate_timeout`. A call that hangs is named,
//! never waited for: the thread in it is left behind and ends with the
//! process, and the checks that do not read NVML are reported as usual.

use slurm_imex_core::error::Error;
use slurm_imex_core::trust::{self, Expect};
use slurm_imex_gpu::health::gate::{self, Overrun};
use slurm_imex_gpu::nvml::{GpuReader, GpuSnapshot, Stage};
use slurm_imex_settings::Config;
use std::cell::OnceCell;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A read of NVML under way on its own thread, so the checks that do not
/// need it run meanwhile; the first check that needs it waits for its
/// [`Answer`].
pub struct NvmlRead {
    rx: mpsc::Receiver<Answer>,
    /// The call the thread is in before it reads the GPUs.
    call: Arc<Mutex<String>>,
    deadline: Instant,
    limit: Duration,
    answer: OnceCell<Answer>,
}

/// What NVML gave the doctor.
pub enum Answer {
    /// The library is not root's alone, so it was not loaded.
    Untrusted(Error),
    /// nvmlInit or the device count failed.
    Failed(Error),
    /// A call before the GPUs were read (loading, the count, the driver)
    /// had not returned after `limit` (`[health] gate_timeout`).
    Hung {
        call: String,
        limit: Duration,
    },
    Read(Gpus),
}

/// The GPUs NVML lists and what came back of reading them.
pub struct Gpus {
    pub count: u32,
    pub driver: String,
    /// The GPUs read in time, in GPU order.
    pub snapshots: Vec<GpuSnapshot>,
    /// The GPUs whose read ran past its budget.
    pub overruns: Vec<Overrun>,
}

/// How long past the deadline the answer may take to arrive (the GPU read
/// itself ends by the deadline).
const HANDOVER: Duration = Duration::from_secs(1);

impl NvmlRead {
    /// Start reading NVML as `config` says, within `[health] gate_timeout`.
    pub fn start(config: &Config) -> NvmlRead {
        let limit = config.health.gate_timeout.0;
        let deadline = Instant::now() + limit;
        let (tx, rx) = mpsc::channel();
        let library = config.gpu.nvml_library.clone();
        // Before the first NVML call: the library's trust check (a stat
        // that can hang on a dead network filesystem).
        let call = Arc::new(Mutex::new(format!(
            "the trust check of [gpu] nvml_library {}",
            library.display()
        )));
        let running = call.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read(&library, deadline, limit, &running));
        });
        NvmlRead {
            rx,
            call,
            deadline,
            limit,
            answer: OnceCell::new(),
        }
    }

    /// What was read, or the call still running when the gate's timeout
    /// (plus the moment the answer takes to arrive) ran out; waited for
    /// once.
    pub fn answer(&self) -> &Answer {
        self.answer.get_or_init(|| {
            let left = (self.deadline + HANDOVER).saturating_duration_since(Instant::now());
            self.rx.recv_timeout(left).unwrap_or_else(|_| Answer::Hung {
                call: self.call.lock().map(|c| c.clone()).unwrap_or_default(),
                limit: self.limit,
            })
        })
    }

    /// The GPUs read in time; None when NVML was not read.
    pub fn snapshots(&self) -> Option<&[GpuSnapshot]> {
        match self.answer() {
            Answer::Read(gpus) => Some(&gpus.snapshots),
            _ => None,
        }
    }

    /// This node's NVLink clique as the GPUs read in time report it.
    pub fn clique(&self) -> Option<String> {
        slurm_imex_gpu::clique::node_clique(self.snapshots()?)
    }

    /// The NVML calls that hung, in one phrase; None when none did.
    pub fn hung(&self) -> Option<String> {
        match self.answer() {
            Answer::Hung { call, limit } => Some(format!(
                "NVML call hung: {call} did not return within {limit:?} ([health] gate_timeout)"
            )),
            Answer::Read(gpus) if !gpus.overruns.is_empty() => Some(overran(&gpus.overruns)),
            _ => None,
        }
    }
}

/// Load the library (past the trust boundary), count the GPUs, read the
/// driver, then read every GPU by `deadline`; `call` names the call under
/// way until the GPUs are read.
fn read(
    library: &std::path::Path,
    deadline: Instant,
    limit: Duration,
    call: &Mutex<String>,
) -> Answer {
    // Root loads only a library root alone can change (a bare soname is
    // the loader's search path, as in the hooks).
    if library.is_absolute() && library.exists() {
        if let Err(e) = trust::check(library, Expect::File, "[gpu] nvml_library") {
            return Answer::Untrusted(e);
        }
    }
    let set = |name: String| {
        if let Ok(mut c) = call.lock() {
            *c = name;
        }
    };
    set(format!("nvmlInit_v2 (loading {})", library.display()));
    let reader = match GpuReader::open(library) {
        Ok(r) => r,
        Err(e) => return Answer::Failed(e),
    };
    set("nvmlDeviceGetCount_v2".into());
    let count = match reader.device_count() {
        Ok(n) => n,
        Err(e) => return Answer::Failed(e),
    };
    set("nvmlSystemGetDriverVersion".into());
    let driver = reader.driver_version().unwrap_or_else(|| "unknown".into());
    set("reading the GPUs".into());
    let gpus: Vec<u32> = (0..count).collect();
    let (snapshots, overruns) = gate::read_gpus(&reader, &gpus, deadline, limit);
    Answer::Read(Gpus {
        count,
        driver,
        snapshots,
        overruns,
    })
}

/// "nvmlDeviceGetAccountingMode, … did not return on gpu0,gpu1 within
/// 500ms", one clause per stage that overran.
fn overran(overruns: &[Overrun]) -> String {
    let mut stages: Vec<Stage> = overruns.iter().map(|o| o.stage).collect();
    stages.sort();
    stages.dedup();
    let clauses: Vec<String> = stages
        .into_iter()
        .map(|stage| {
            let of_stage = overruns.iter().filter(|o| o.stage == stage);
            let gpus: Vec<String> = of_stage.clone().map(|o| format!("gpu{}", o.gpu)).collect();
            let limit = of_stage.map(|o| o.limit).max().unwrap_or_default();
            format!(
                "NVML call hung: one of {} did not return on {} within {limit:?}",
                calls(stage),
                slurm_imex_core::text::summarize_list(&gpus, 80)
            )
        })
        .collect();
    clauses.join("; ")
}

/// The NVML calls `GpuReader::snapshot` makes in each stage (as the doctor
/// reads: accounting neither turned on nor its stats read).
fn calls(stage: Stage) -> &'static str {
    match stage {
        Stage::Identity => "nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetSerial, nvmlDeviceGetName, nvmlDeviceGetPciInfo_v3",
        Stage::Memory => "nvmlDeviceGetTotalEccErrors, nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRemappedRows",
        Stage::Recovery => "nvmlDeviceGetFieldValues (recovery action)",
        Stage::Fabric | Stage::FabricWait => "nvmlDeviceGetGpuFabricInfo_v4 or nvmlDeviceGetGpuFabricInfoV",
        Stage::NvLink => "nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkErrorCounter",
        Stage::Processes => "nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetAccountingMode, nvmlDeviceGetAccountingPids",
        Stage::Modes => "nvmlDeviceGetPersistenceMode, nvmlDeviceGetEccMode, nvmlDeviceGetMigMode, nvmlDeviceValidateInforom",
        Stage::Counters => "nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetPcieReplayCounter, nvmlDeviceGetCurrentClocksThrottleReasons, nvmlDeviceGetTemperature, nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth, nvmlDeviceGetViolationStatus",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overruns_name_the_stages_calls_and_every_gpu_once_per_stage() {
        let at = |gpu, stage, ms| Overrun {
            gpu,
            stage,
            limit: Duration::from_millis(ms),
        };
        let text = overran(&[
            at(0, Stage::Processes, 500),
            at(1, Stage::Processes, 500),
            at(3, Stage::Fabric, 2500),
        ]);
        assert_eq!(text.matches("NVML call hung").count(), 2, "{text}");
        assert!(text.contains("nvmlDeviceGetAccountingMode"), "{text}");
        assert!(text.contains("on gpu0,gpu1 within 500ms"), "{text}");
        assert!(
            text.contains("nvmlDeviceGetGpuFabricInfoV did not return on gpu3 within 2.5s"),
            "{text}"
        );
    }

    #[test]
    fn a_read_that_does_not_answer_names_the_call_it_is_in() {
        let (_tx, rx) = mpsc::channel();
        let read = NvmlRead {
            rx,
            call: Arc::new(Mutex::new("nvmlDeviceGetCount_v2".into())),
            deadline: Instant::now(),
            limit: Duration::from_secs(3),
            answer: OnceCell::new(),
        };
        let started = Instant::now();
        assert!(started.elapsed() < HANDOVER + Duration::from_secs(1));
        let hung = read.hung().expect("a hung call");
        assert!(
            hung.contains("nvmlDeviceGetCount_v2 did not return within 3s"),
            "{hung}"
        );
        assert!(read.snapshots().is_none());
    }
}
