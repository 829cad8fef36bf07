//! The engines of a group in step, for a model split over ranks (rmx-models' parallel.rs):
//! rank 0 leads — its engine takes the requests — and every other rank follows, running the
//! same scheduler on the same inputs, so every forward pass (and each collective in it) happens
//! on every rank in the same order.
//!
//! The scheduler's decisions follow from its inputs alone: which requests arrive at which turn
//! of the loop, and which are cancelled at which turn. So at the top of each turn the lead
//! broadcasts a [`Turn`] — the requests it admits, the sequences whose clients went away, or
//! that it stops — and the followers apply exactly that, never reading a channel or a client of
//! their own. What would differ between processes is fixed by the lead: an unseeded request's
//! seed is drawn once, there; the disk prefix cache (each machine its own disk) is off.
//!
//! The broadcast is MLX's own `all_sum` (the lead contributes the bytes, followers zeros): an
//! `int32` length, then, only when something happened, the JSON bytes as `uint8`. A decode turn
//! with nothing new costs one 4-byte collective.
//!
//! docs/distributed.md describes the whole design.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use rmx_mlx::distributed::Group;
use rmx_mlx::Array;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::engine::Command;
use crate::error::{EngineError, Result};
use crate::request::{Event, GenerateRequest, SamplingParams};

/// This engine's place in its group.
pub(crate) enum Role {
    /// A model of its own.
    Alone,
    /// Rank 0: takes the requests and broadcasts each turn.
    Lead(Group),
    /// Another rank: runs the turns rank 0 broadcasts.
    Follow(Group),
}

impl Role {
    pub fn for_rank(group: Group) -> Role {
        if group.rank() == 0 {
            Role::Lead(group)
        } else {
            Role::Follow(group)
        }
    }

    pub fn in_group(&self) -> bool {
        !matches!(self, Role::Alone)
    }

    pub fn group(&self) -> Option<&Group> {
        match self {
            Role::Alone => None,
            Role::Lead(g) | Role::Follow(g) => Some(g),
        }
    }
}

impl Mirror {
    /// What a failed step tells its sequences: in a group, a failed collective is the group's
    /// loss (a 503 to retry once `rmx launch` has restarted it), not the model's error.
    pub fn step_failure(&self, e: &dyn std::fmt::Display) -> String {
        let text = e.to_string();
        if self.role.in_group() && crate::group::is_collective_failure(&text) {
            crate::group::lost(text)
        } else {
            crate::error::explain_device_error(text)
        }
    }
}

/// The engine loop's inputs, turn by turn, and in a group what keeps the ranks' loops alike.
///
/// In a group a sequence never holds its client's channel: it sends into one of the engine's
/// (`clients`), which [`Mirror::relay`] forwards on the lead and drains on a follower. A client
/// going away is then seen by the lead alone, announced in a turn, and becomes the sequence's
/// cancellation on every rank at the same point of the same turn (its channel is dropped).
pub(crate) struct Mirror {
    role: Role,
    next_id: u64,
    clients: HashMap<u64, Client>,
}

struct Client {
    from_sequence: UnboundedReceiver<Event>,
    /// The caller's channel, on the lead; `None` on a follower.
    to_client: Option<UnboundedSender<Event>>,
}

impl Mirror {
    pub fn new(role: Role) -> Mirror {
        Mirror {
            role,
            next_id: 0,
            clients: HashMap::new(),
        }
    }

    /// This turn's commands; `None` when the engine stops (its handles are gone, or in a
    /// group the lead stopped or the group failed). Blocks for the next request when `idle`.
    pub fn turn(&mut self, rx: &Receiver<Command>, idle: bool) -> Option<Vec<Command>> {
        match &self.role {
            Role::Alone => received(rx, idle),
            Role::Lead(_) => self.lead_turn(rx, idle),
            Role::Follow(_) => self.follow_turn(rx),
        }
    }

    fn lead_turn(&mut self, rx: &Receiver<Command>, idle: bool) -> Option<Vec<Command>> {
        stamp_turn();
        let commands = self.lead_turn_inner(rx, idle);
        if commands.is_none() {
            stamp_idle();
        }
        commands
    }

    fn lead_turn_inner(&mut self, rx: &Receiver<Command>, idle: bool) -> Option<Vec<Command>> {
        self.relay();
        let Role::Lead(group) = &self.role else {
            unreachable!("lead_turn runs on the lead")
        };
        let group = group.clone();
        let got = if idle && crate::doorbell::is_on() {
            // Said before blocking, so that the followers wait on the bell (doorbell.rs)
            // instead of spinning in the next collective for as long as no request comes.
            let sleep = Turn {
                sleep: true,
                ..Turn::default()
            };
            if let Err(e) = lead(&group, &sleep) {
                self.fail_all(&crate::group::lost(e));
                return None;
            }
            stamp_idle();
            let got = received(rx, true);
            stamp_turn();
            crate::doorbell::ring();
            got
        } else if idle {
            stamp_idle();
            let got = received(rx, true);
            stamp_turn();
            got
        } else {
            received(rx, false)
        };
        let mut turn = Turn {
            stop: got.is_none(),
            ..Turn::default()
        };
        let mut commands = Vec::new();
        for cmd in got.unwrap_or_default() {
            let Command::Generate(mut req, tx, at) = cmd else {
                // Embeddings and reranking are refused by a chat model without running it.
                commands.push(cmd);
                continue;
            };
            let Some(wire) = WireRequest::new(&mut req) else {
                let _ = tx.send(Event::Error(
                    "constrained output is not supported yet on a model split over several \
                     ranks"
                        .into(),
                ));
                continue;
            };
            let id = self.next_id;
            self.next_id += 1;
            turn.admit.push((id, wire));
            commands.push(Command::Generate(req, self.watch(id, Some(tx)), at));
        }
        turn.cancel = self
            .clients
            .iter()
            .filter(|(_, c)| c.to_client.as_ref().is_some_and(|t| t.is_closed()))
            .map(|(id, _)| *id)
            .collect();
        turn.cancel.sort_unstable();
        if let Err(e) = lead(&group, &turn) {
            self.fail_all(&crate::group::lost(e));
            return None;
        }
        self.drop_cancelled(&turn.cancel);
        (!turn.stop).then_some(commands)
    }

    fn follow_turn(&mut self, rx: &Receiver<Command>) -> Option<Vec<Command>> {
        self.relay();
        // Requests belong to rank 0: refuse any sent to this rank's handle.
        while let Ok(cmd) = rx.try_recv() {
            if let Command::Generate(_, tx, _) = cmd {
                let _ = tx.send(Event::Error(
                    "this rank follows rank 0's engine; send requests to rank 0".into(),
                ));
            }
        }
        let Role::Follow(group) = &self.role else {
            unreachable!("follow_turn runs on a follower")
        };
        let turn = match follow(group).and_then(|t| {
            if !t.sleep {
                return Ok(t);
            }
            // The lead idles: wait for its bell, then for the turn it rang for.
            crate::doorbell::wait()?;
            follow(group)
        }) {
            Ok(t) => t,
            Err(e) => {
                eprintln!(
                    "rmx: rank {} stops: {}",
                    group.rank(),
                    crate::group::lost(e)
                );
                return None;
            }
        };
        if turn.stop {
            return None;
        }
        let mut commands = Vec::new();
        for (id, wire) in turn.admit {
            let tx = self.watch(id, None);
            commands.push(Command::Generate(wire.into_request(), tx, Instant::now()));
        }
        self.drop_cancelled(&turn.cancel);
        Some(commands)
    }

    /// The channel sequence `id` sends into.
    fn watch(
        &mut self,
        id: u64,
        to_client: Option<UnboundedSender<Event>>,
    ) -> UnboundedSender<Event> {
        if let Some(t) = &to_client {
            let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
            running.retain(|t| !t.is_closed());
            running.push(t.clone());
        }
        let (tx, from_sequence) = unbounded_channel();
        self.clients.insert(
            id,
            Client {
                from_sequence,
                to_client,
            },
        );
        tx
    }

    /// Dropping a sequence's channel is its cancellation (`Sequence::is_cancelled`).
    fn drop_cancelled(&mut self, ids: &[u64]) {
        for id in ids {
            self.clients.remove(id);
        }
    }

    fn fail_all(&mut self, message: &str) {
        for (_, c) in self.clients.drain() {
            if let Some(t) = c.to_client {
                let _ = t.send(Event::Error(message.to_string()));
            }
        }
    }

    /// Passes the sequences' events on to their clients (lead) or drops them (follower), and
    /// forgets the sequences that ended.
    pub fn relay(&mut self) {
        self.clients.retain(|_, c| loop {
            match c.from_sequence.try_recv() {
                Ok(ev) => {
                    let last = matches!(ev, Event::Done { .. } | Event::Error(_));
                    if let Some(t) = &c.to_client {
                        let _ = t.send(ev);
                    }
                    if last {
                        return false;
                    }
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => return true,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return false,
            }
        });
    }
}

/// When the lead's current turn began (ms since [`EPOCH`], plus 1), or 0 while it waits for a
/// request or runs no engine. A turn is one pass of the engine loop (a prefill chunk, a decode
/// step) and its collectives; one that never ends is a rank or link that stalls without
/// closing its sockets, on which MLX's collectives wait for ever ([`in_turn_for`]).
static TURN_SINCE: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn stamp_turn() {
    let ms = EPOCH.get_or_init(Instant::now).elapsed().as_millis();
    TURN_SINCE.store(
        u64::try_from(ms).unwrap_or(u64::MAX - 1) + 1,
        Ordering::SeqCst,
    );
}

fn stamp_idle() {
    TURN_SINCE.store(0, Ordering::SeqCst);
}

/// How long this process's lead has been in its current turn; `None` while it waits for a
/// request (or leads no engine).
pub(crate) fn in_turn_for() -> Option<std::time::Duration> {
    let since = TURN_SINCE.load(Ordering::SeqCst).checked_sub(1)?;
    let now = EPOCH.get_or_init(Instant::now).elapsed();
    Some(now.saturating_sub(std::time::Duration::from_millis(since)))
}

/// The lead's clients, reachable from outside its engine thread: when a peer dies, MLX's ring
/// can leave that thread waiting inside a collective for ever (measured: a rank SIGKILLed
/// mid-decode left rank 0's step hanging after "[ring] Too many send/recv errors"), so the
/// clients are failed from another thread ([`fail_clients`]). Process-wide, as MLX's group
/// is; a client's entry goes when its answer ends (its receiver is dropped).
static RUNNING: Mutex<Vec<UnboundedSender<Event>>> = Mutex::new(Vec::new());

/// Ends every running answer of this process's group with `message`.
pub(crate) fn fail_clients(message: &str) -> usize {
    let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    let mut failed = 0;
    for t in running.drain(..) {
        if t.send(Event::Error(message.to_string())).is_ok() {
            failed += 1;
        }
    }
    failed
}

/// The channel's commands for this turn: blocking for the first when `idle`; `None` once every
/// handle is gone.
fn received(rx: &Receiver<Command>, idle: bool) -> Option<Vec<Command>> {
    let mut out = Vec::new();
    if idle {
        out.push(rx.recv().ok()?);
    }
    loop {
        match rx.try_recv() {
            Ok(c) => out.push(c),
            Err(TryRecvError::Empty) => return Some(out),
            // Finish what was admitted; the next idle wait ends the loop.
            Err(TryRecvError::Disconnected) => return Some(out),
        }
    }
}

/// What changes at one turn of the engine loop.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Turn {
    /// New requests, with the id each sequence has on every rank.
    pub admit: Vec<(u64, WireRequest)>,
    /// Sequences to drop (their client went away).
    pub cancel: Vec<u64>,
    /// The lead's engine is stopping: so do the followers'.
    pub stop: bool,
    /// The lead idles until a request comes: wait for its doorbell before the next turn.
    #[serde(default)]
    pub sleep: bool,
}

impl Turn {
    fn is_empty(&self) -> bool {
        self.admit.is_empty() && self.cancel.is_empty() && !self.stop && !self.sleep
    }
}

/// A [`GenerateRequest`] as it crosses to the followers. Built by destructuring, so a field
/// added to the request cannot be forgotten here.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct WireRequest {
    prompt: Vec<u32>,
    sampling: SamplingParams,
    max_tokens: usize,
    stop: Vec<String>,
    stop_token_ids: Vec<u32>,
    top_logprobs: Option<usize>,
    keep_special_tokens: bool,
    ignore_eos: bool,
    kv_quant: Option<rmx_models::cache::KvQuant>,
    no_prefix_cache: bool,
    #[serde(default)]
    thought_budget: Option<crate::ThoughtBudget>,
}

impl WireRequest {
    /// The request as every rank runs it; `None` when a group cannot run it (a grammar
    /// constraint: its compiled form lives in the lead's process only).
    pub fn new(req: &mut GenerateRequest) -> Option<WireRequest> {
        let GenerateRequest {
            prompt,
            sampling,
            max_tokens,
            stop,
            stop_token_ids,
            top_logprobs,
            keep_special_tokens,
            ignore_eos,
            constraint,
            kv_quant,
            no_prefix_cache,
            images,
            thought_budget,
            // A group does not speculate (speculative::Off::Group): the lead's engine turns it
            // off and says so, and the followers never hear of it.
            speculative: _,
        } = req;
        // Images: the pixels do not travel to the ranks yet.
        if constraint.is_some() || !images.is_empty() {
            return None;
        }
        // Every rank samples with the same key: draw the clock's seed once, here.
        if sampling.seed.is_none() {
            sampling.seed = Some(crate::sampler::clock_seed());
        }
        Some(WireRequest {
            prompt: prompt.clone(),
            sampling: sampling.clone(),
            max_tokens: *max_tokens,
            stop: stop.clone(),
            stop_token_ids: stop_token_ids.clone(),
            top_logprobs: *top_logprobs,
            keep_special_tokens: *keep_special_tokens,
            ignore_eos: *ignore_eos,
            kv_quant: *kv_quant,
            no_prefix_cache: *no_prefix_cache,
            thought_budget: thought_budget.clone(),
        })
    }

    pub fn into_request(self) -> GenerateRequest {
        let mut r = GenerateRequest::new(self.prompt, self.max_tokens);
        r.sampling = self.sampling;
        r.stop = self.stop;
        r.stop_token_ids = self.stop_token_ids;
        r.top_logprobs = self.top_logprobs;
        r.keep_special_tokens = self.keep_special_tokens;
        r.ignore_eos = self.ignore_eos;
        r.kv_quant = self.kv_quant;
        r.no_prefix_cache = self.no_prefix_cache;
        r.thought_budget = self.thought_budget;
        r
    }
}

fn failed(e: impl std::fmt::Display) -> EngineError {
    EngineError::Invalid(format!("the ranks' engines lost step: {e}"))
}

/// The lead's turn, sent to every follower.
pub(crate) fn lead(group: &Group, turn: &Turn) -> Result<()> {
    let bytes = if turn.is_empty() {
        Vec::new()
    } else {
        serde_json::to_vec(turn).map_err(failed)?
    };
    broadcast(group, &bytes).map(|_| ())
}

/// The lead's turn, on a follower (blocks until the lead sends it).
pub(crate) fn follow(group: &Group) -> Result<Turn> {
    let bytes = broadcast(group, &[])?;
    if bytes.is_empty() {
        return Ok(Turn::default());
    }
    serde_json::from_slice(&bytes).map_err(failed)
}

/// Rank 0's `bytes` on every rank (the others pass an empty slice).
pub(crate) fn broadcast(group: &Group, bytes: &[u8]) -> Result<Vec<u8>> {
    let len = i32::try_from(bytes.len()).map_err(failed)?;
    let n = group
        .all_sum(&Array::from_slice(&[len], &[1])?)?
        .item::<i32>()?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let zeros;
    let mine = if bytes.is_empty() {
        zeros = vec![0u8; n as usize];
        &zeros
    } else {
        bytes
    };
    Ok(group
        .all_sum(&Array::from_slice(mine, &[n])?)?
        .to_vec::<u8>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leads_clients_can_be_failed_from_another_thread() {
        let mut mirror = Mirror::new(Role::Alone);
        let (tx, mut client) = unbounded_channel();
        let _sequence = mirror.watch(41, Some(tx));
        let failed = std::thread::spawn(|| crate::group::fail_running("rank 1 ended"))
            .join()
            .expect("the failing thread");
        assert!(failed >= 1);
        match client.try_recv() {
            Ok(Event::Error(m)) => {
                assert!(m.starts_with(crate::group::GROUP_LOST), "{m}");
                // No launcher restarts this test's group: the message says what to do.
                assert!(
                    m.contains("rank 1 ended") && m.contains("rmx launch"),
                    "{m}"
                );
            }
            other => panic!("the client got {other:?}"),
        }
        assert!(crate::group::failure().is_some());
        assert!(crate::group::is_collective_failure(
            "MLX eval: [ring] connection to a peer was lost"
        ));
        assert!(!crate::group::is_collective_failure("shape mismatch"));
    }

    #[test]
    fn a_request_crosses_whole_with_its_seed_fixed() {
        let mut req = GenerateRequest::new(vec![1, 2, 3], 7);
        req.sampling.temperature = 0.7;
        req.stop = vec!["\n\n".into()];
        req.top_logprobs = Some(3);
        let wire = WireRequest::new(&mut req).expect("no constraint");
        let seed = req.sampling.seed.expect("a seed was drawn");
        let turn = Turn {
            admit: vec![(4, wire)],
            cancel: vec![2],
            stop: false,
            sleep: false,
        };
        let back: Turn =
            serde_json::from_slice(&serde_json::to_vec(&turn).expect("json")).expect("parse");
        assert_eq!(back, turn);
        let (id, wire) = back.admit.into_iter().next().expect("one");
        let got = wire.into_request();
        assert_eq!(id, 4);
        assert_eq!(got.prompt, req.prompt);
        assert_eq!(got.sampling, req.sampling);
        assert_eq!(got.sampling.seed, Some(seed));
        assert_eq!((got.max_tokens, got.top_logprobs), (7, Some(3)));
        assert_eq!(got.stop, req.stop);
    }
}
