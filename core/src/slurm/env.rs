//! What a prolog or epilog learns from Slurm's environment: job id, node,
//! node list, user, whether `--imex` was requested, and the job's GPUs.

use crate::error::{Error, Result};

/// The job as seen by Prolog/Epilog (slurmd sets these variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnv {
    pub job_id: u32,
    /// This node's Slurm name (`SLURMD_NODENAME`).
    pub node_name: String,
    /// The job's hostlist expression (`SLURM_JOB_NODELIST`).
    pub node_list: String,
    pub uid: Option<u32>,
    pub user: Option<String>,
    /// `SPANK_IMEX=1`, set by the plugin with job_control_setenv.
    pub imex_requested: bool,
    /// `SLURM_JOB_GPUS` (GPU indexes on this node), when Slurm set it.
    pub gpus: Option<Vec<u32>>,
}

/// The variable the plugin sets through `spank_job_control_setenv("IMEX")`.
pub const IMEX_REQUEST_VAR: &str = "SPANK_IMEX";

impl JobEnv {
    /// Read from a variable lookup (the process environment in production).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<JobEnv> {
        let required = |name: &str| {
            get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                Error::new(format!(
                    "{name} is not set: run this program as Slurm's Prolog/Epilog (slurm.conf)"
                ))
            })
        };
        let job_id_text = required("SLURM_JOB_ID")?;
        let job_id = job_id_text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|id| *id > 0)
            .ok_or_else(|| {
                Error::new(format!(
                    "SLURM_JOB_ID=\"{}\" is not a job id",
                    shown(&job_id_text)
                ))
            })?;
        let node_name = required("SLURMD_NODENAME")?;
        match crate::slurm::hostlist::expand(&node_name, 1) {
            Ok(names) if names == [node_name.as_str()] => {}
            _ => {
                return Err(Error::new(format!(
                    "SLURMD_NODENAME=\"{}\" is not a host name",
                    shown(&node_name)
                )))
            }
        }
        let node_list = get("SLURM_JOB_NODELIST")
            .or_else(|| get("SLURM_NODELIST"))
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| node_name.clone());
        let uid = match get("SLURM_JOB_UID").filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(v.trim().parse::<u32>().map_err(|_| {
                Error::new(format!("SLURM_JOB_UID=\"{}\" is not a uid", shown(&v)))
            })?),
        };
        let gpus = match get("SLURM_JOB_GPUS").filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(v) => Some(parse_gpu_indexes(&v)?),
        };
        Ok(JobEnv {
            job_id,
            node_name,
            node_list,
            uid,
            user: match get("SLURM_JOB_USER").filter(|v| !v.is_empty()) {
                Some(u) if u.len() > 256 || u.chars().any(char::is_control) => {
                    return Err(Error::new(format!(
                        "SLURM_JOB_USER=\"{}\" is not a user name",
                        shown(&u)
                    )))
                }
                u => u,
            },
            imex_requested: get(IMEX_REQUEST_VAR).is_some_and(|v| v.trim() == "1"),
            gpus,
        })
    }

    /// From this process's environment; a variable that is set but not
    /// UTF-8 is named as such, never taken for "not set".
    pub fn from_process_env() -> Result<JobEnv> {
        for name in [
            "SLURM_JOB_ID",
            "SLURMD_NODENAME",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
            "SLURM_JOB_UID",
            "SLURM_JOB_USER",
            "SLURM_JOB_GPUS",
            IMEX_REQUEST_VAR,
        ] {
            if let Some(v) = std::env::var_os(name) {
                if v.to_str().is_none() {
                    return Err(Error::new(format!(
                        "{name}=\"{}\" is not valid UTF-8",
                        shown(&v.to_string_lossy())
                    )));
                }
            }
        }
        JobEnv::from_lookup(|k| std::env::var(k).ok())
    }
}

/// An outside value as an error line shows it: escaped and capped.
fn shown(v: &str) -> String {
    crate::text::cap(&v.escape_debug().to_string(), 128)
}

/// Most GPU indexes one job may list (far above any node's GPU count).
const MAX_JOB_GPUS: usize = 1024;

/// `SLURM_JOB_GPUS` is a comma list of indexes ("0,1,3"); Slurm may also
/// write ranges ("0-3").
fn parse_gpu_indexes(v: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let num = |s: &str| {
            s.parse::<u32>().map_err(|_| {
                Error::new(format!(
                    "SLURM_JOB_GPUS=\"{}\": \"{}\" is not a GPU index",
                    shown(v),
                    shown(item)
                ))
            })
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 1024 {
                    return Err(Error::new(format!(
                        "SLURM_JOB_GPUS=\"{}\": bad range \"{}\"",
                        shown(v),
                        shown(item)
                    )));
                }
                out.extend(a..=b);
            }
            None => out.push(num(item)?),
        }
        if out.len() > MAX_JOB_GPUS {
            return Err(Error::new(format!(
                "SLURM_JOB_GPUS=\"{}\" lists more than {MAX_JOB_GPUS} GPUs",
                shown(v)
            )));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> Result<JobEnv> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        JobEnv::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn reads_a_prolog_environment() {
        let e = env(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURMD_NODENAME", "n2"),
            ("SLURM_JOB_NODELIST", "n[1-3]"),
            ("SLURM_JOB_UID", "1001"),
            ("SPANK_IMEX", "1"),
            ("SLURM_JOB_GPUS", "0,2-3"),
        ])
        .unwrap();
        assert_eq!(e.job_id, 42);
        assert_eq!(e.node_list, "n[1-3]");
        assert_eq!(e.uid, Some(1001));
        assert!(e.imex_requested);
        assert_eq!(e.gpus, Some(vec![0, 2, 3]));
    }

    #[test]
    fn defaults_and_bad_values() {
        let e = env(&[("SLURM_JOB_ID", "7"), ("SLURMD_NODENAME", "n1")]).unwrap();
        assert!(!e.imex_requested);
        assert_eq!(e.node_list, "n1");
        assert_eq!(e.gpus, None);
        let err = env(&[("SLURMD_NODENAME", "n1")]).unwrap_err().to_string();
        assert!(err.contains("SLURM_JOB_ID is not set"), "{err}");
        let err = env(&[("SLURM_JOB_ID", "x1"), ("SLURMD_NODENAME", "n1")]).unwrap_err();
        assert!(err.to_string().contains("SLURM_JOB_ID=\"x1\""));
        let err = env(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURMD_NODENAME", "n"),
            ("SLURM_JOB_GPUS", "0,x"),
        ]);
        assert!(err.unwrap_err().to_string().contains("SLURM_JOB_GPUS"));
        let e = env(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURMD_NODENAME", "n"),
            ("SPANK_IMEX", "0"),
        ]);
        assert!(!e.unwrap().imex_requested);
    }
}
