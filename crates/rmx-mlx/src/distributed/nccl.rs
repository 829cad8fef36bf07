//! The nccl backend's launch settings for ranks on this machine, one GPU each, as `mlx.launch`
//! gives them: every rank reads `MLX_RANK`, `MLX_WORLD_SIZE`, and where rank 0 listens for
//! the others to find each other (`NCCL_HOST_IP`, `NCCL_PORT`); `CUDA_VISIBLE_DEVICES` leaves
//! each rank one GPU, because MLX's CUDA backend uses the first device it sees and NCCL refuses
//! two ranks of one communicator on the same GPU.
//!
//! The nccl backend has collectives only (MLX's `send`/`recv` throw "Send not supported in
//! NCCL backend"), so what needs point-to-point messages (pipeline parallel) cannot use it.

use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// Where local ranks of an nccl group meet: rank 0's address and port, and how many ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclHosts {
    pub size: usize,
    pub host_ip: Ipv4Addr,
    pub port: u16,
    /// The GPUs the ranks share out, as `CUDA_VISIBLE_DEVICES` lists them; `None`: devices
    /// `0..size`, rank r on device r.
    pub devices: Option<Vec<String>>,
}

impl NcclHosts {
    /// `n` ranks on this machine, meeting on a loopback port that was free a moment ago.
    /// `visible` is the launcher's own `CUDA_VISIBLE_DEVICES`, if set: the ranks take its
    /// devices in order, so a user who picked GPUs keeps them.
    pub fn loopback(n: usize, visible: Option<&str>) -> io::Result<NcclHosts> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let devices = visible
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter(|d| !d.is_empty());
        if let Some(d) = &devices {
            if d.len() < n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "CUDA_VISIBLE_DEVICES lists {} GPU(s) ({}) for {n} ranks: NCCL needs a \
                         GPU per rank; list {n}, or unset it to use GPUs 0..{n}",
                        d.len(),
                        d.join(",")
                    ),
                ));
            }
        }
        Ok(NcclHosts {
            size: n,
            host_ip: Ipv4Addr::LOCALHOST,
            port,
            devices,
        })
    }

    /// The environment MLX's nccl backend (and CUDA) reads in rank `rank`'s process.
    pub fn env(&self, rank: usize) -> [(&'static str, String); 5] {
        let device = match &self.devices {
            Some(d) => d[rank % d.len()].clone(),
            None => rank.to_string(),
        };
        [
            ("MLX_RANK", rank.to_string()),
            ("MLX_WORLD_SIZE", self.size.to_string()),
            ("NCCL_HOST_IP", self.host_ip.to_string()),
            ("NCCL_PORT", self.port.to_string()),
            ("CUDA_VISIBLE_DEVICES", device),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(env: &'a [(&str, String)], k: &str) -> &'a str {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{k} not set: {env:?}"))
    }

    #[test]
    fn each_rank_gets_its_gpu_and_the_shared_meeting_point() {
        let h = NcclHosts::loopback(2, None).expect("a free port");
        let (a, b) = (h.env(0), h.env(1));
        for (env, rank) in [(&a, "0"), (&b, "1")] {
            assert_eq!(value(env, "MLX_RANK"), rank);
            assert_eq!(value(env, "CUDA_VISIBLE_DEVICES"), rank);
            assert_eq!(value(env, "MLX_WORLD_SIZE"), "2");
            assert_eq!(value(env, "NCCL_HOST_IP"), "127.0.0.1");
            assert_eq!(value(env, "NCCL_PORT"), h.port.to_string());
        }
    }

    #[test]
    fn the_users_visible_devices_are_shared_out_and_too_few_refused() {
        let h = NcclHosts::loopback(2, Some("3, 5")).expect("a free port");
        assert_eq!(value(&h.env(0), "CUDA_VISIBLE_DEVICES"), "3");
        assert_eq!(value(&h.env(1), "CUDA_VISIBLE_DEVICES"), "5");
        let err = NcclHosts::loopback(2, Some("4")).unwrap_err().to_string();
        assert!(err.contains("a GPU per rank"), "{err}");
        // Set but empty is as unset.
        let h = NcclHosts::loopback(2, Some("")).expect("a free port");
        assert_eq!(value(&h.env(1), "CUDA_VISIBLE_DEVICES"), "1");
    }
}
