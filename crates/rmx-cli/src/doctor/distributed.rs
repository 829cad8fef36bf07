//! `rmx doctor`'s checks of the distributed set-up (docs/distributed.md): which of MLX's
//! communication backends this build has, whether a ring hostfile's hosts answer, a model
//! folder's fingerprint, and, under `rmx launch`, whether every rank runs the same rmx, MLX and
//! model files as rank 0.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use rmx_engine::checkup::RankReport;
use rmx_mlx::distributed::{CommBackend, JacclHosts, RingHosts, JACCL_DEFAULT_PORT};

use super::{fail, pass, warn, Finding};

const CHECK: &str = "cluster";

/// How long a host gets to answer a connection. A host on the LAN answers (or refuses) in
/// milliseconds; one that does not within this is down, or a firewall drops the packets.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The backends this build of MLX has, and the NVIDIA GPUs the driver sees (nccl runs one rank
/// a GPU). None of it is needed to run a model on one process, so nothing here fails.
pub fn backends() -> Vec<Finding> {
    let backends = [
        CommBackend::Ring,
        CommBackend::Jaccl,
        CommBackend::Mpi,
        CommBackend::Nccl,
    ];
    let (have, lack): (Vec<_>, Vec<_>) = backends.iter().partition(|b| b.is_available());
    let names = |bs: &[&CommBackend]| bs.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ");
    let mut out = vec![if have.is_empty() {
        pass(
            CHECK,
            "this MLX has no distributed backend: models run on one process only \
             (rmx launch needs ring, or nccl on NVIDIA GPUs)",
        )
    } else {
        pass(
            CHECK,
            format!(
                "distributed backends: {}{}",
                names(&have),
                if lack.is_empty() {
                    String::new()
                } else {
                    format!(" (not in this build: {})", names(&lack))
                }
            ),
        )
    }];
    if let Some(gpus) = nvidia_gpus() {
        let nccl = if CommBackend::Nccl.is_available() {
            format!("rmx launch -n {gpus} --backend nccl runs a rank on each")
        } else {
            "this MLX has no nccl backend: ranks over them use --backend ring".into()
        };
        out.push(pass(
            CHECK,
            format!("{gpus} NVIDIA GPU(s) seen by the driver; {nccl}"),
        ));
    }
    out
}

/// The GPUs the NVIDIA driver lists (Linux: a folder each in /proc/driver/nvidia/gpus); `None`
/// where there is no such driver.
fn nvidia_gpus() -> Option<usize> {
    let entries = std::fs::read_dir("/proc/driver/nvidia/gpus").ok()?;
    Some(entries.flatten().count()).filter(|&n| n > 0)
}

/// What a TCP connection to a rank's address found.
#[derive(Debug, PartialEq)]
enum Reach {
    /// Something accepted the connection.
    Listening,
    /// The host answered that nothing listens on the port: it is up.
    Refused,
    /// No answer, or no route to it.
    Unreachable(String),
    /// The name does not resolve.
    Unresolved(String),
}

fn probe(address: &str, timeout: Duration) -> Reach {
    let addr = match address.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        Ok(None) => return Reach::Unresolved("no address for it".into()),
        Err(e) => return Reach::Unresolved(e.to_string()),
    };
    match TcpStream::connect_timeout(&addr, timeout) {
        Ok(_) => Reach::Listening,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Reach::Refused,
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            Reach::Unreachable(format!("no answer within {} s", timeout.as_secs_f32()))
        }
        Err(e) => Reach::Unreachable(e.to_string()),
    }
}

/// A ring hostfile's text, or mlx.launch's jaccl hostfile's as a ring of its hosts' first
/// addresses at the coordinator's default port (what is reached there is the host).
fn ring_or_jaccl(text: &str) -> Result<RingHosts, String> {
    RingHosts::parse(text).or_else(|ring| match JacclHosts::parse(text) {
        Ok(j) => Ok(RingHosts {
            ranks: j
                .addresses(JACCL_DEFAULT_PORT)
                .into_iter()
                .map(|a| a.into_iter().collect())
                .collect(),
        }),
        // Not jaccl's either: the ring's complaint, the likelier intent.
        Err(_) => Err(ring),
    })
}

/// Every address of the ring hostfile `path` (or a jaccl hostfile's hosts), tried at once (so
/// the whole check takes one timeout at most): one finding each.
pub fn hosts(path: &Path) -> Vec<Finding> {
    let hosts = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| ring_or_jaccl(&text))
    {
        Ok(h) => h,
        Err(e) => {
            return vec![fail(
                CHECK,
                format!("hostfile {}: {e}", path.display()),
                "write it as MLX's ring hostfile: a JSON list with one entry per rank, each a \
                 list of \"ip:port\" addresses, e.g. [[\"10.0.0.1:5000\"], [\"10.0.0.2:5000\"]]",
            )]
        }
    };
    let probes: Vec<(usize, String, std::thread::JoinHandle<Reach>)> = hosts
        .ranks
        .iter()
        .enumerate()
        .flat_map(|(rank, addrs)| addrs.iter().map(move |a| (rank, a.clone())))
        .map(|(rank, a)| {
            let to = a.clone();
            (
                rank,
                a,
                std::thread::spawn(move || probe(&to, CONNECT_TIMEOUT)),
            )
        })
        .collect();
    let mut out = vec![pass(
        CHECK,
        format!("hostfile {}: {} ranks", path.display(), hosts.size()),
    )];
    for (rank, address, probe) in probes {
        let reach = probe
            .join()
            .unwrap_or_else(|_| Reach::Unreachable("the check itself failed".into()));
        out.push(judge(rank, &address, reach));
    }
    out
}

fn judge(rank: usize, address: &str, reach: Reach) -> Finding {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let port = address.rsplit_once(':').map_or("", |(_, p)| p);
    match reach {
        Reach::Refused => pass(
            CHECK,
            format!(
                "rank {rank} {address}: host up, nothing listens on port {port} (a rank \
                 listens there only while rmx launch runs)"
            ),
        ),
        Reach::Listening => warn(
            CHECK,
            format!("rank {rank} {address}: something listens on port {port} now"),
            format!(
                "fine while rmx launch runs that rank; otherwise another program holds the port \
                 the rank needs: stop it, or give rank {rank} another port in the hostfile"
            ),
        ),
        Reach::Unreachable(why) => fail(
            CHECK,
            format!("rank {rank} {address}: unreachable ({why})"),
            format!(
                "check that {host} is this rank's machine's address (ip addr there), that the \
                 machine is up (ping {host}), and that no firewall drops TCP port {port}"
            ),
        ),
        Reach::Unresolved(why) => fail(
            CHECK,
            format!("rank {rank} {address}: cannot resolve {host} ({why})"),
            "write the rank's IP address in the hostfile, or fix the name's DNS / /etc/hosts \
             entry",
        ),
    }
}

/// This machine's fingerprint of a model folder, to compare by hand with another machine's.
pub fn model(dir: &Path) -> Finding {
    match rmx_engine::checkup::model_fingerprint(dir) {
        Ok(print) => pass(
            "model",
            format!(
                "{}: fingerprint {print} (the same on every machine when their files are)",
                dir.display()
            ),
        ),
        Err(e) => fail(
            "model",
            format!("cannot fingerprint the model folder: {e}"),
            "give --model a model folder (config.json, tokenizer and .safetensors files)",
        ),
    }
}

/// What differs between the ranks' reports and rank 0's, a finding each; one PASS when nothing.
pub fn compare(reports: &[RankReport]) -> Vec<Finding> {
    const RANKS: &str = "ranks";
    let Some(first) = reports.first() else {
        return vec![fail(RANKS, "no rank answered", "run it again")];
    };
    let mut out = Vec::new();
    for r in reports.iter().filter(|r| r.model_error.is_some()) {
        let e = r.model_error.as_deref().unwrap_or_default();
        out.push(fail(
            RANKS,
            format!("rank {} ({}) cannot read the model: {e}", r.rank, r.host),
            "copy the model folder to the same path on that rank's machine",
        ));
    }
    type Field = fn(&RankReport) -> Option<&str>;
    let fields: [(&str, Field, &str); 5] = [
        (
            "rmx version",
            |r| Some(&r.rmx_version),
            "install the same rmx on every machine",
        ),
        (
            "MLX version",
            |r| Some(&r.mlx_version),
            "install the same MLX on every machine and rebuild rmx against it",
        ),
        (
            "communication backend",
            |r| Some(&r.comm),
            "start every rank with the same rmx launch --backend",
        ),
        (
            "device",
            |r| Some(&r.device),
            "none needed to run (ranks on other devices run together at the slowest one's \
             pace); for speed, give every rank the same kind of device and an MLX built for it",
        ),
        (
            "model fingerprint",
            |r| r.model.as_deref(),
            "copy rank 0's model folder to the same path on the differing machines",
        ),
    ];
    for (what, get, fix) in fields {
        let model = what == "model fingerprint";
        let differ: Vec<String> = reports
            .iter()
            .skip(1)
            // A rank that cannot read the model has its own finding above.
            .filter(|r| !(model && (r.model_error.is_some() || first.model_error.is_some())))
            .filter(|r| get(r) != get(first))
            .map(|r| format!("{} ({})", r.rank, get(r).unwrap_or("none")))
            .collect();
        // Only the device may differ and still compute the same thing.
        let finding = if what == "device" { warn } else { fail };
        if !differ.is_empty() {
            out.push(finding(
                RANKS,
                format!(
                    "{what} differs from rank 0's ({}): rank(s) {}",
                    get(first).unwrap_or("none"),
                    differ.join(", ")
                ),
                fix,
            ));
        }
    }
    if out.is_empty() {
        out.push(pass(
            RANKS,
            format!(
                "{} ranks run the same rmx, MLX and backends{}",
                reports.len(),
                if first.model.is_some() {
                    " and have the same model files"
                } else {
                    ""
                }
            ),
        ));
    }
    out
}

/// The ranks side by side, a `*` on what differs from rank 0.
pub fn table(reports: &[RankReport]) -> String {
    let Some(first) = reports.first() else {
        return String::new();
    };
    let mark = |mine: &str, theirs: &str| {
        if mine == theirs {
            mine.to_string()
        } else {
            format!("{mine} *")
        }
    };
    let model = |r: &RankReport| match (&r.model, &r.model_error) {
        (Some(m), _) => m.clone(),
        (None, Some(_)) => "unreadable".into(),
        (None, None) => "-".into(),
    };
    let mut rows = vec![[
        "rank".to_string(),
        "host".into(),
        "rmx".into(),
        "mlx".into(),
        "device".into(),
        "comm".into(),
        "model".into(),
    ]];
    for r in reports {
        rows.push([
            r.rank.to_string(),
            r.host.clone(),
            mark(&r.rmx_version, &first.rmx_version),
            mark(&r.mlx_version, &first.mlx_version),
            mark(&r.device, &first.device),
            mark(&r.comm, &first.comm),
            mark(&model(r), &model(first)),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    if reports.iter().any(|r| table_differs(r, first, &model)) {
        text.push_str("* differs from rank 0\n");
    }
    text
}

fn table_differs(
    r: &RankReport,
    first: &RankReport,
    model: &dyn Fn(&RankReport) -> String,
) -> bool {
    r.rmx_version != first.rmx_version
        || r.mlx_version != first.mlx_version
        || r.device != first.device
        || r.comm != first.comm
        || model(r) != model(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Level;

    #[test]
    fn a_jaccl_hostfile_is_checked_by_its_hosts_addresses() {
        let jaccl = r#"{"backend": "jaccl", "hosts": [
            {"ips": ["10.0.0.1"], "rdma": [null, "rdma_en3"]},
            {"ips": ["10.0.0.2"], "rdma": ["rdma_en3", null]}]}"#;
        let ring = ring_or_jaccl(jaccl).unwrap();
        assert_eq!(
            ring.ranks,
            vec![
                vec!["10.0.0.1:32323".to_string()],
                vec!["10.0.0.2:32323".to_string()]
            ]
        );
        assert_eq!(
            ring_or_jaccl("[[\"10.0.0.1:5000\"]]").unwrap().ranks,
            vec![vec!["10.0.0.1:5000".to_string()]]
        );
        // Neither: the ring's complaint.
        assert!(ring_or_jaccl("[[\"10.0.0.1\"]]")
            .unwrap_err()
            .contains("\"ip:port\""));
    }

    fn report(rank: i32, model: &str) -> RankReport {
        RankReport {
            rank,
            host: "h".into(),
            rmx_version: "0.1.0".into(),
            mlx_version: "0.29.1".into(),
            device: "cpu".into(),
            comm: "ring".into(),
            model: Some(model.into()),
            model_error: None,
        }
    }

    #[test]
    fn equal_ranks_pass_and_each_difference_is_named_with_its_rank() {
        let same = [report(0, "aa"), report(1, "aa")];
        let found = compare(&same);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].level, Level::Pass);
        assert!(!table(&same).contains('*'));

        let mut other = [report(0, "aa"), report(1, "bb"), report(2, "aa")];
        other[2].mlx_version = "0.30.0".into();
        let found = compare(&other);
        let text: Vec<&str> = found.iter().map(|f| f.message.as_str()).collect();
        assert!(found.iter().all(|f| f.level == Level::Fail), "{text:?}");
        assert_eq!(found.len(), 2, "{text:?}");
        assert!(
            text.iter()
                .any(|t| t.contains("MLX version") && t.contains("rank(s) 2 (0.30.0)")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("model fingerprint") && t.contains("rank(s) 1 (bb)")),
            "{text:?}"
        );
        let table = table(&other);
        assert!(
            table.contains("bb *") && table.contains("0.30.0 *"),
            "{table}"
        );
        assert!(table.contains("* differs from rank 0"), "{table}");

        let mut missing = [report(0, "aa"), report(1, "aa")];
        missing[1].model = None;
        missing[1].model_error = Some("/m: No such file".into());
        let found = compare(&missing);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .contains("rank 1 (h) cannot read the model"),
            "{found:?}"
        );

        let mut devices = [report(0, "aa"), report(1, "aa")];
        devices[1].device = "cuda".into();
        let found = compare(&devices);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].level, Level::Warn, "{found:?}");
    }

    #[test]
    fn a_refused_port_is_an_up_host_and_no_answer_an_unreachable_one() {
        assert_eq!(judge(0, "127.0.0.1:9", Reach::Refused).level, Level::Pass);
        let down = judge(
            1,
            "10.0.0.2:5000",
            Reach::Unreachable("no answer within 2 s".into()),
        );
        assert_eq!(down.level, Level::Fail);
        assert!(down.fix.unwrap_or_default().contains("port 5000"));
        // A port bound here but not accepted from is refused, not unreachable.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        assert_eq!(
            probe(&format!("127.0.0.1:{port}"), CONNECT_TIMEOUT),
            Reach::Listening
        );
        drop(listener);
        assert_eq!(
            probe(&format!("127.0.0.1:{port}"), CONNECT_TIMEOUT),
            Reach::Refused
        );
    }
}
