//! The ring backend's launch settings: the hostfile MLX reads (`MLX_HOSTFILE`: a JSON list with
//! one entry per rank, each the list of `"ip:port"` addresses that rank listens on) and the
//! environment a launcher gives each rank. Kept beside the bindings so the format is written in
//! one place, for `rmx launch` and for the tests that start ranks themselves.

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;

/// Where each rank of a ring listens, in rank order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingHosts {
    pub ranks: Vec<Vec<String>>,
}

impl RingHosts {
    /// `n` ranks on this machine, each on a port of 127.0.0.1 that was free a moment ago (the
    /// OS picks it; MLX binds it again with `SO_REUSEADDR` when the rank starts).
    pub fn loopback(n: usize) -> io::Result<RingHosts> {
        // Hold every listener until all ports are known, so no two ranks get the same one.
        let listeners = (0..n)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<io::Result<Vec<_>>>()?;
        let ranks = listeners
            .iter()
            .map(|l| Ok(vec![l.local_addr()?.to_string()]))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(RingHosts { ranks })
    }

    /// A hostfile's text (as [`RingHosts::to_json`] writes it, or `mlx.launch` for the ring).
    pub fn parse(text: &str) -> Result<RingHosts, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let rank = |h: &serde_json::Value| -> Option<Vec<String>> {
            h.as_array()?
                .iter()
                .map(|a| a.as_str().filter(|a| a.contains(':')).map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .filter(|a| !a.is_empty())
        };
        let ranks = v
            .as_array()
            .ok_or("not a list of ranks")?
            .iter()
            .map(rank)
            .collect::<Option<Vec<_>>>()
            .ok_or("each rank must be a non-empty list of \"ip:port\" addresses")?;
        if ranks.is_empty() {
            return Err("no ranks".into());
        }
        Ok(RingHosts { ranks })
    }

    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The hostfile's text.
    pub fn to_json(&self) -> String {
        // A list of lists of strings always serializes.
        let mut text = serde_json::to_string(&self.ranks).unwrap_or_default();
        text.push('\n');
        text
    }

    pub fn write(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.to_json())
    }

    /// The environment MLX's ring reads in rank `rank`'s process.
    pub fn env(rank: usize, hostfile: &Path) -> [(&'static str, String); 2] {
        [
            ("MLX_RANK", rank.to_string()),
            ("MLX_HOSTFILE", hostfile.display().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfile_is_the_json_mlx_reads() {
        let h = RingHosts {
            ranks: vec![vec!["127.0.0.1:5000".into()], vec!["10.0.0.2:5001".into()]],
        };
        assert_eq!(h.to_json(), "[[\"127.0.0.1:5000\"],[\"10.0.0.2:5001\"]]\n");
    }

    #[test]
    fn a_hostfile_reads_back_and_bad_ones_say_why() {
        let h = RingHosts::loopback(3).expect("free ports");
        assert_eq!(RingHosts::parse(&h.to_json()), Ok(h));
        let err = RingHosts::parse("[[\"10.0.0.1\"]]").unwrap_err();
        assert!(err.contains("\"ip:port\""), "{err}");
        assert!(RingHosts::parse("{}").is_err());
        assert!(RingHosts::parse("[]").is_err());
    }

    #[test]
    fn loopback_ports_differ() {
        let h = RingHosts::loopback(4).expect("free ports");
        let mut all: Vec<&String> = h.ranks.iter().flatten().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4, "{h:?}");
        assert!(all.iter().all(|a| a.starts_with("127.0.0.1:")));
    }
}
