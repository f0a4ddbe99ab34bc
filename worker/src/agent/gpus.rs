//! Which GPUs a node has: the ids its tasks are told (`CUDA_VISIBLE_DEVICES`).
//!
//! In order: the ids given (`starling worker --gpu-ids`), else those in the agent's own
//! `CUDA_VISIBLE_DEVICES` (a node started inside a slice of a host, as Ray reads it), else the
//! indexes `nvidia-smi -L` lists. With none of these a node declaring `--num-gpus n` has GPUs
//! `0..n`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `nvidia-smi -L` may take before detection gives up (a wedged driver can hang it).
const DETECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The GPUs this host shows this process, by id: `CUDA_VISIBLE_DEVICES` if set, else what
/// `nvidia-smi -L` lists (none if it is missing, fails or takes over 10 s).
pub fn detect() -> Vec<String> {
    if let Some(v) = std::env::var_os(starling_proto::env::CUDA_VISIBLE_DEVICES) {
        // Set, even empty: this process was given exactly these GPUs.
        return parse_list(&v.to_string_lossy()).unwrap_or_default();
    }
    nvidia_smi().unwrap_or_default()
}

/// Parses `0,1,GPU-8f2e...`: ids separated by commas, each a plain name (an index or a
/// `GPU-`/`MIG-` uuid), none twice.
pub fn parse_list(s: &str) -> Result<Vec<String>, String> {
    let ids: Vec<String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect();
    starling_proto::check_gpu_ids(&ids)?;
    Ok(ids)
}

/// `nvidia-smi -L` prints `GPU 0: NVIDIA H200 (UUID: GPU-...)`, one line per GPU.
fn nvidia_smi() -> Option<Vec<String>> {
    let mut child = Command::new("nvidia-smi")
        .arg("-L")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + DETECT_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    Some(parse_nvidia_smi(&out))
}

fn parse_nvidia_smi(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("GPU "))
        .filter_map(|l| l.split_once(':'))
        .map(|(index, _)| index.trim())
        .filter(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_give_indexes() {
        let out = "GPU 0: NVIDIA H200 (UUID: GPU-1b2c)\n\
                   GPU 1: NVIDIA H200 (UUID: GPU-3d4e)\n  MIG 1g.18gb Device 0: (UUID: MIG-9)\n";
        assert_eq!(parse_nvidia_smi(out), ["0", "1"]);
        assert!(parse_nvidia_smi("").is_empty());
    }

    #[test]
    fn id_lists_are_plain_names_given_once() {
        assert_eq!(
            parse_list(" 0, 2 ,GPU-ab12,").unwrap(),
            ["0", "2", "GPU-ab12"]
        );
        assert!(parse_list("").unwrap().is_empty());
        assert!(parse_list("0,0").unwrap_err().contains("twice"));
        assert!(parse_list("0;rm -rf").unwrap_err().contains("not an index"));
    }
}
