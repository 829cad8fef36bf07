//! The jaccl backend's launch settings (MLX's RDMA over Thunderbolt 5, macOS 26.2 and later),
//! as `mlx.launch --backend jaccl` gives them: every rank reads `MLX_RANK`, where rank 0
//! coordinates the others (`MLX_JACCL_COORDINATOR`, an `ip:port` of rank 0's), and
//! `MLX_IBV_DEVICES`, a file holding for each rank the RDMA device that reaches each other rank
//! (`null` for itself); `MLX_JACCL_RING=1` asks for the ring variant, where each rank needs
//! devices to its two neighbours only.
//!
//! The hostfile is `mlx.launch`'s (what `mlx.distributed_config --backend jaccl` writes):
//! `{"backend": "jaccl", "hosts": [{"ssh": ..., "ips": [...], "rdma": [null, "rdma_en2"]}, ...]}`
//! or the bare list of hosts.

use std::path::Path;

/// One rank's entry: the addresses it is reached at and its RDMA device to each rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JacclHost {
    pub ips: Vec<String>,
    pub rdma: Vec<Option<String>>,
}

/// Every rank of a jaccl group, in rank order, and whether it is the ring variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JacclHosts {
    pub hosts: Vec<JacclHost>,
    pub ring: bool,
}

/// The port rank 0 coordinates on when none is named (`mlx.launch --starting-port`'s default).
pub const DEFAULT_PORT: u16 = 32323;

impl JacclHosts {
    /// A hostfile's text, checked as `mlx.launch` checks it: rank 0 has an address, every rank
    /// lists one device per rank, `null` for itself, and one to every rank it talks to (all of
    /// them; its two neighbours in the ring variant, `"backend": "jaccl-ring"`).
    pub fn parse(text: &str) -> Result<JacclHosts, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let (hosts, ring) = match &v {
            serde_json::Value::Object(o) => (
                o.get("hosts").ok_or("no \"hosts\" list")?,
                o.get("backend").and_then(|b| b.as_str()) == Some("jaccl-ring"),
            ),
            _ => (&v, false),
        };
        let hosts = hosts
            .as_array()
            .ok_or("\"hosts\" is not a list")?
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let strings = |key: &str| -> Option<Vec<Option<String>>> {
                    h.get(key)?
                        .as_array()?
                        .iter()
                        .map(|s| match s {
                            serde_json::Value::Null => Some(None),
                            s => s.as_str().map(|s| Some(s.to_string())),
                        })
                        .collect()
                };
                let ips = strings("ips")
                    .unwrap_or_default()
                    .into_iter()
                    .flatten()
                    .collect();
                let rdma = strings("rdma")
                    .ok_or_else(|| format!("host {i} has no \"rdma\" list of device names"))?;
                Ok(JacclHost { ips, rdma })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let n = hosts.len();
        if n < 2 {
            return Err("a jaccl group needs at least 2 hosts".into());
        }
        if hosts[0].ips.is_empty() {
            return Err("rank 0 needs an address (\"ips\") the other ranks reach".into());
        }
        for (i, h) in hosts.iter().enumerate() {
            if h.rdma.len() != n {
                return Err(format!(
                    "host {i} lists {} RDMA devices for {n} hosts (one per host, null for itself)",
                    h.rdma.len()
                ));
            }
            if h.rdma[i].is_some() {
                return Err(format!("host {i}'s RDMA device to itself must be null"));
            }
            let peers: Vec<usize> = match ring {
                true => vec![(i + n - 1) % n, (i + 1) % n],
                false => (0..n).collect(),
            };
            if let Some(j) = peers.into_iter().find(|&j| j != i && h.rdma[j].is_none()) {
                return Err(format!("host {i} lists no RDMA device to host {j}"));
            }
        }
        Ok(JacclHosts { hosts, ring })
    }

    pub fn size(&self) -> usize {
        self.hosts.len()
    }

    /// `MLX_IBV_DEVICES`' file: each rank's devices, in rank order.
    pub fn devices_json(&self) -> String {
        let all: Vec<&Vec<Option<String>>> = self.hosts.iter().map(|h| &h.rdma).collect();
        // Lists of optional strings always serialize.
        serde_json::to_string(&all).unwrap_or_default()
    }

    /// The environment MLX's jaccl backend reads in rank `rank`'s process, its devices file
    /// written at `devices`, rank 0 coordinating on `port`.
    pub fn env(&self, rank: usize, devices: &Path, port: u16) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("MLX_RANK", rank.to_string()),
            (
                "MLX_JACCL_COORDINATOR",
                format!("{}:{port}", self.hosts[0].ips[0]),
            ),
            ("MLX_IBV_DEVICES", devices.display().to_string()),
        ];
        if self.ring {
            env.push(("MLX_JACCL_RING", "1".into()));
        }
        env
    }

    /// Each rank's first address, as a ring hostfile would list them (for `rmx doctor`'s
    /// reachability check).
    pub fn addresses(&self, port: u16) -> Vec<Option<String>> {
        self.hosts
            .iter()
            .map(|h| h.ips.first().map(|ip| format!("{ip}:{port}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"{"backend": "jaccl", "envs": [], "hosts": [
        {"ssh": "mac-a", "ips": ["10.0.0.1"], "rdma": [null, "rdma_en3"]},
        {"ssh": "mac-b", "ips": ["10.0.0.2"], "rdma": ["rdma_en3", null]}]}"#;

    #[test]
    fn mlx_launchs_hostfile_gives_mlx_launchs_environment() {
        let h = JacclHosts::parse(TWO).unwrap();
        assert_eq!(h.size(), 2);
        assert_eq!(h.devices_json(), r#"[[null,"rdma_en3"],["rdma_en3",null]]"#);
        let env = h.env(1, Path::new("/tmp/ibv.json"), DEFAULT_PORT);
        assert_eq!(
            env,
            vec![
                ("MLX_RANK", "1".to_string()),
                ("MLX_JACCL_COORDINATOR", "10.0.0.1:32323".to_string()),
                ("MLX_IBV_DEVICES", "/tmp/ibv.json".to_string()),
            ]
        );
        // The bare list of hosts reads the same.
        let bare = TWO
            .split_once("\"hosts\": ")
            .map(|(_, h)| h.trim_end_matches('}'))
            .unwrap();
        assert_eq!(JacclHosts::parse(bare).unwrap(), h);
        assert_eq!(h.addresses(5000)[1].as_deref(), Some("10.0.0.2:5000"));
    }

    #[test]
    fn malformed_hostfiles_say_what_is_wrong() {
        let bad = |text: &str| JacclHosts::parse(text).unwrap_err();
        assert!(bad("[]").contains("at least 2"));
        let no_ip = r#"[{"rdma": [null, "a"]}, {"ips": ["x"], "rdma": ["a", null]}]"#;
        assert!(bad(no_ip).contains("rank 0 needs an address"));
        let short = r#"[{"ips": ["x"], "rdma": [null]}, {"rdma": ["a", null]}]"#;
        assert!(bad(short).contains("lists 1 RDMA devices for 2 hosts"));
        let self_dev = r#"[{"ips": ["x"], "rdma": ["a", "b"]}, {"rdma": ["a", null]}]"#;
        assert!(bad(self_dev).contains("to itself must be null"));
        let three = r#"[{"ips": ["x"], "rdma": [null, "a", null]},
            {"rdma": ["a", null, "b"]}, {"rdma": ["c", "b", null]}]"#;
        assert!(bad(three).contains("host 0 lists no RDMA device to host 2"));
        // The ring variant needs its neighbours only; with 3 hosts those are all the others.
        let ring = format!(r#"{{"backend": "jaccl-ring", "hosts": {three}}}"#);
        assert!(bad(&ring).contains("no RDMA device"));
        let ok_ring = r#"{"backend": "jaccl-ring", "hosts": [
            {"ips": ["x"], "rdma": [null, "a", "c"]}, {"rdma": ["a", null, "b"]},
            {"rdma": ["c", "b", null]}]}"#;
        let h = JacclHosts::parse(ok_ring).unwrap();
        assert!(h
            .env(0, Path::new("f"), 1)
            .contains(&("MLX_JACCL_RING", "1".into())));
    }
}
