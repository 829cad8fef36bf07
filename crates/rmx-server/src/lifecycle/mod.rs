//! The loaded models and their lifetimes.
//!
//! - A model is loaded on its first request. Requests that arrive while it loads wait for the
//!   same load (one `OnceCell` per model), they never load it twice. The load runs in its own
//!   task, so a client that hangs up does not waste it.
//! - Every request holds a [`Lease`]; while any lease is held the model is "in use" and is
//!   never evicted. When the last lease goes, the request's `keep_alive` decides: zero unloads
//!   at once, a duration arms a timer, forever keeps it.
//! - Admission: at most `max_loaded` models and at most `budget` bytes of weights. Idle models
//!   are evicted least recently used first to make room; a model larger than the whole budget
//!   is refused with its size and the budget, and one whose family the engine cannot load is
//!   refused (naming the family) before any room is made for it.

pub mod budget;
pub mod group;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rmx_api::KeepAlive;
use rmx_engine::{Engine, EngineError, ModelError, ModelKind};
use rmx_store::{ModelHints, Unsupported};
use tokio::sync::OnceCell;

use crate::error::ServiceError;
use group::{GroupServing, GroupTurn, Split};

/// A model folder the store resolved a name to.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What the user asked for.
    pub name: String,
    /// Canonical folder: the key, so an alias and a path to the same model share one load.
    pub path: PathBuf,
    /// The alias's hints. Per request, not per loaded model: an alias and a path to the same
    /// folder share one load but not their hints.
    pub hints: Option<ModelHints>,
}

pub struct Loaded {
    pub engine: Engine,
    pub load_duration: Duration,
    /// A split model's hold on its group, released after `engine` (fields drop in order, and
    /// the engine joins its thread): the group's next load waits for it (group.rs).
    _turn: Option<GroupTurn>,
}

pub struct Slot {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    cell: OnceCell<Arc<Loaded>>,
    state: Mutex<SlotState>,
}

struct SlotState {
    active: usize,
    last_used: Instant,
    expiry: Expiry,
    /// Bumped whenever the expiry changes, so a stale timer knows to do nothing.
    generation: u64,
    /// `rmx stop` came while requests ran: unload after the last one, whatever its keep_alive.
    stop: bool,
}

#[derive(Debug, Clone, Copy)]
enum Expiry {
    InUse,
    At(Instant, SystemTime),
    Forever,
}

impl Slot {
    pub fn loaded(&self) -> Option<&Arc<Loaded>> {
        self.cell.get()
    }

    fn state(&self) -> MutexGuard<'_, SlotState> {
        // A panic while holding this lock leaves plain counters behind; keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Models {
    table: Mutex<HashMap<PathBuf, Arc<Slot>>>,
    pub max_loaded: usize,
    pub budget: u64,
    /// Where engines keep hot prompt prefixes across restarts (`<rmx home>/prefixes`).
    prefix_dir: Option<PathBuf>,
    /// Under `rmx launch`: every model is split over this group, one at a time.
    group: Option<Arc<GroupServing>>,
}

/// A request's hold on a model; dropping it starts the keep-alive clock.
pub struct Lease {
    slot: Arc<Slot>,
    models: Arc<Models>,
    keep_alive: KeepAlive,
}

impl Lease {
    /// The loaded model (present once [`Models::acquire`] returned).
    pub fn loaded(&self) -> Result<&Arc<Loaded>, ServiceError> {
        self.slot
            .loaded()
            .ok_or_else(|| ServiceError::Internal("model lease without a loaded model".into()))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.models.release(&self.slot, self.keep_alive);
    }
}

/// A line of `/api/ps`.
pub struct RunningInfo {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub active: usize,
    /// The engine's sequences: prefilling or decoding, and waiting for a row in the batch.
    pub running: usize,
    pub waiting: usize,
    pub loaded: bool,
    pub context_length: Option<u64>,
    /// The model's layer kinds and paths (`ModelInfo::layer_kinds`).
    pub layers: Vec<String>,
    /// Bytes of its running sequences' KV caches, and what they would take unquantized.
    pub kv_cache: (usize, usize),
    /// What it answers (chat, embeddings); None while it loads.
    pub kind: Option<ModelKind>,
    /// None: in use or forever (see `forever`).
    pub expires: Option<(Duration, SystemTime)>,
    pub forever: bool,
    /// Over how many ranks, and how, the model is split (under `rmx launch`).
    pub split: Option<Split>,
}

impl Models {
    /// `prefix_dir`: where its engines keep hot prompt prefixes across restarts.
    pub fn new(max_loaded: usize, budget: u64, prefix_dir: Option<PathBuf>) -> Arc<Models> {
        Arc::new(Models {
            table: Mutex::new(HashMap::new()),
            max_loaded: max_loaded.max(1),
            budget,
            prefix_dir,
            group: None,
        })
    }

    /// Models split over `group`'s ranks: one at a time (loading another unloads an idle
    /// one first; one in use makes the new one wait, as `RMX_MAX_LOADED_MODELS=1` would).
    pub fn in_group(
        budget: u64,
        prefix_dir: Option<PathBuf>,
        group: Arc<GroupServing>,
    ) -> Arc<Models> {
        Arc::new(Models {
            table: Mutex::new(HashMap::new()),
            max_loaded: 1,
            budget,
            prefix_dir,
            group: Some(group),
        })
    }

    fn table(&self) -> MutexGuard<'_, HashMap<PathBuf, Arc<Slot>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Finds or admits the model, takes a lease on it, and waits until it is loaded.
    pub async fn acquire(
        self: &Arc<Self>,
        model: Resolved,
        keep_alive: KeepAlive,
    ) -> Result<Lease, ServiceError> {
        // Judged from config.json before admission: a model that can never load must not
        // evict others to make room, nor fail on its tokenizer first.
        if !self.table().contains_key(&model.path) {
            rmx_engine::check_family(&model.path).map_err(|e| load_error(&model.name, e))?;
        }
        let lease = self.admit(model, keep_alive)?;
        let slot = lease.slot.clone();
        if slot.loaded().is_none() {
            // The load runs in its own task: if this request goes away, the load still ends
            // in the cell for the next one.
            let loader = slot.clone();
            let prefix_dir = self.prefix_dir.clone();
            let group = self.group.clone();
            let result = tokio::spawn(async move {
                loader
                    .cell
                    .get_or_try_init(|| {
                        load(loader.path.clone(), loader.name.clone(), prefix_dir, group)
                    })
                    .await
                    .map(|_| ())
            })
            .await;
            match result {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    drop(lease);
                    self.forget_if_unloaded(&slot);
                    return Err(e);
                }
                Err(e) => return Err(ServiceError::Internal(format!("load task failed: {e}"))),
            }
        }
        Ok(lease)
    }

    fn admit(
        self: &Arc<Self>,
        model: Resolved,
        keep_alive: KeepAlive,
    ) -> Result<Lease, ServiceError> {
        let mut table = self.table();
        let slot = match table.get(&model.path) {
            Some(slot) => slot.clone(),
            None => {
                let size = budget::weight_size(&model.path);
                if size > self.budget {
                    return Err(ServiceError::TooLarge {
                        name: model.name,
                        size,
                        budget: self.budget,
                    });
                }
                self.make_room(&mut table, size, &model.name)?;
                let slot = Arc::new(Slot {
                    name: model.name,
                    path: model.path.clone(),
                    size,
                    cell: OnceCell::new(),
                    state: Mutex::new(SlotState {
                        active: 0,
                        last_used: Instant::now(),
                        expiry: Expiry::InUse,
                        generation: 0,
                        stop: false,
                    }),
                });
                table.insert(model.path, slot.clone());
                slot
            }
        };
        {
            let mut st = slot.state();
            st.active += 1;
            st.stop = false;
            st.expiry = Expiry::InUse;
            st.generation += 1;
        }
        Ok(Lease {
            slot,
            models: self.clone(),
            keep_alive,
        })
    }

    /// Evicts idle models, least recently used first, until one more model of `size` fits.
    fn make_room(
        &self,
        table: &mut HashMap<PathBuf, Arc<Slot>>,
        size: u64,
        name: &str,
    ) -> Result<(), ServiceError> {
        let fits = |t: &HashMap<PathBuf, Arc<Slot>>| {
            t.len() < self.max_loaded
                && t.values().map(|s| s.size).sum::<u64>() + size <= self.budget
        };
        while !fits(table) {
            let victim = table
                .iter()
                .filter_map(|(k, s)| {
                    let st = s.state();
                    (st.active == 0).then(|| (k.clone(), st.last_used))
                })
                .min_by_key(|(_, used)| *used)
                .map(|(k, _)| k);
            match victim {
                Some(k) => {
                    table.remove(&k);
                }
                None => {
                    let used: u64 = table.values().map(|s| s.size).sum();
                    return Err(ServiceError::Busy(format!(
                        "cannot load `{name}` ({}) now: {} model(s) in use take {} of the {} budget (RMX_MAX_LOADED_MODELS={}); try again when they finish",
                        rmx_store::human_bytes(size),
                        table.len(),
                        rmx_store::human_bytes(used),
                        rmx_store::human_bytes(self.budget),
                        self.max_loaded
                    )));
                }
            }
        }
        Ok(())
    }

    fn release(self: &Arc<Self>, slot: &Arc<Slot>, keep_alive: KeepAlive) {
        let mut table = self.table();
        let mut st = slot.state();
        st.active = st.active.saturating_sub(1);
        st.last_used = Instant::now();
        if st.active > 0 {
            return;
        }
        st.generation += 1;
        let keep_alive = if st.stop {
            KeepAlive::For(Duration::ZERO)
        } else {
            keep_alive
        };
        match keep_alive {
            KeepAlive::Forever => st.expiry = Expiry::Forever,
            KeepAlive::For(d) if d.is_zero() => {
                drop(st);
                remove_slot(&mut table, slot);
            }
            KeepAlive::For(d) => {
                st.expiry = Expiry::At(Instant::now() + d, SystemTime::now() + d);
                let generation = st.generation;
                // Weak: a model evicted before its timer fires must be freed (its engine
                // stopped) then, not when the timer ends; a split model's next load waits
                // for exactly that.
                let (models, slot) = (Arc::downgrade(self), Arc::downgrade(slot));
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        tokio::time::sleep(d).await;
                        if let (Some(models), Some(slot)) = (models.upgrade(), slot.upgrade()) {
                            models.expire(&slot, generation);
                        }
                    });
                }
            }
        }
    }

    fn expire(&self, slot: &Arc<Slot>, generation: u64) {
        let mut table = self.table();
        let st = slot.state();
        if st.generation == generation && st.active == 0 {
            drop(st);
            remove_slot(&mut table, slot);
        }
    }

    fn forget_if_unloaded(&self, slot: &Arc<Slot>) {
        let mut table = self.table();
        let idle = slot.state().active == 0;
        if idle && slot.loaded().is_none() {
            remove_slot(&mut table, slot);
        }
    }

    /// Unloads the model in `path` now, or, when requests are running on it, right after the
    /// last one. Returns whether it was loaded.
    pub fn unload(&self, path: &std::path::Path) -> bool {
        let mut table = self.table();
        let Some(slot) = table.get(path).cloned() else {
            return false;
        };
        let mut st = slot.state();
        if st.active == 0 {
            drop(st);
            remove_slot(&mut table, &slot);
        } else {
            st.stop = true;
        }
        true
    }

    /// Drops every idle model (shutdown).
    pub fn unload_all(&self) {
        self.table().clear();
    }

    pub fn is_loaded(&self, path: &std::path::Path) -> bool {
        self.table().get(path).is_some_and(|s| s.loaded().is_some())
    }

    /// What the model loaded from `path` answers; None when it is not loaded (yet).
    pub fn kind(&self, path: &std::path::Path) -> Option<ModelKind> {
        let slot = self.table().get(path).cloned()?;
        slot.loaded().map(|l| l.engine.kind())
    }

    pub fn running(&self) -> Vec<RunningInfo> {
        let table = self.table();
        let now = Instant::now();
        let mut out: Vec<RunningInfo> = table
            .values()
            .map(|s| {
                let st = s.state();
                let loaded = s.loaded();
                RunningInfo {
                    name: s.name.clone(),
                    path: s.path.clone(),
                    size: s.size,
                    active: st.active,
                    running: loaded.map_or(0, |l| l.engine.running_sequences()),
                    waiting: loaded.map_or(0, |l| l.engine.waiting_sequences()),
                    kv_cache: loaded.map_or((0, 0), |l| l.engine.kv_cache_bytes()),
                    loaded: loaded.is_some(),
                    context_length: loaded
                        .and_then(|l| l.engine.info().context_length)
                        .map(|c| c as u64),
                    layers: loaded
                        .map(|l| l.engine.info().layer_kinds.clone())
                        .unwrap_or_default(),
                    kind: loaded.map(|l| l.engine.kind()),
                    expires: match st.expiry {
                        Expiry::At(at, wall) => Some((at.saturating_duration_since(now), wall)),
                        _ => None,
                    },
                    forever: matches!(st.expiry, Expiry::Forever),
                    split: self.group.as_ref().map(|g| g.split().clone()),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

fn remove_slot(table: &mut HashMap<PathBuf, Arc<Slot>>, slot: &Arc<Slot>) {
    if table.get(&slot.path).is_some_and(|s| Arc::ptr_eq(s, slot)) {
        table.remove(&slot.path);
    }
}

/// Engine loading blocks (it starts the engine thread and waits for the weights), so it runs
/// on the blocking pool.
async fn load(
    path: PathBuf,
    name: String,
    prefix_dir: Option<PathBuf>,
    group: Option<Arc<GroupServing>>,
) -> Result<Arc<Loaded>, ServiceError> {
    let started = Instant::now();
    let options = rmx_engine::EngineOptions {
        prefix_dir,
        ..rmx_engine::EngineOptions::from_env()
    };
    let (engine, turn) = match group {
        Some(group) => {
            let (engine, turn) = group
                .load(&path, options)
                .await?
                .map_err(|e| load_error(&name, e))?;
            (engine, Some(turn))
        }
        None => {
            let engine = tokio::task::spawn_blocking(move || Engine::load_with(&path, options))
                .await
                .map_err(|e| ServiceError::Internal(format!("load task failed: {e}")))?
                .map_err(|e| load_error(&name, e))?;
            (engine, None)
        }
    };
    Ok(Arc::new(Loaded {
        engine,
        load_duration: started.elapsed(),
        _turn: turn,
    }))
}

/// A family the engine lacks, or files that cannot be read as a model, are the client's
/// choice of model (a 4xx naming the model and what is wrong with it); the device running out
/// of memory is a 507 that says what to do; any other load failure is the daemon's (a 500
/// with the engine's words).
fn load_error(name: &str, e: EngineError) -> ServiceError {
    let name = name.to_string();
    let text = e.to_string();
    // First: an allocation that failed while reading weights is no fault of the files.
    let explained = rmx_engine::explain_device_error(text.clone());
    if explained != text {
        return ServiceError::OutOfMemory {
            name,
            message: explained,
        };
    }
    match e {
        EngineError::Model(ModelError::Unsupported { model_type, .. }) => {
            ServiceError::UnsupportedFamily {
                name,
                unsupported: Unsupported::new(model_type, rmx_engine::supported_model_types()),
            }
        }
        e if in_the_files(&e) => ServiceError::BrokenModel {
            name,
            message: text,
        },
        _ => ServiceError::Load {
            name,
            message: text,
        },
    }
}

/// Whether a load failed on what the model's folder holds (config, weights, tokenizer, chat
/// template) rather than on the runtime.
fn in_the_files(e: &EngineError) -> bool {
    match e {
        EngineError::Model(m) => matches!(
            m,
            ModelError::Io { .. }
                | ModelError::Config { .. }
                | ModelError::NoWeights { .. }
                | ModelError::MissingTensor { .. }
                | ModelError::Shape { .. }
                | ModelError::Extra { .. }
                | ModelError::Load { .. }
        ),
        EngineError::Tokenizer { .. } | EngineError::Template(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn weights_failed(message: &str) -> EngineError {
        EngineError::Model(ModelError::Load {
            file: "model.safetensors".into(),
            source: rmx_mlx::Error::Mlx {
                op: "load_safetensors",
                message: message.to_string(),
            },
        })
    }

    #[test]
    fn running_out_of_device_memory_while_loading_is_a_507_that_says_what_to_do() {
        let e = load_error(
            "big",
            weights_failed("cudaMallocAsync(&data, size, stream) failed: out of memory"),
        );
        assert!(matches!(e, ServiceError::OutOfMemory { .. }), "{e:?}");
        assert_eq!(e.status(), StatusCode::INSUFFICIENT_STORAGE);
        let said = e.to_string();
        assert!(said.starts_with("model `big` cannot be loaded: the device ran out of memory"));
        assert!(said.contains("rmx launch"), "{said}");
        // Broken files stay the client's 400.
        let e = load_error("broken", weights_failed("truncated header"));
        assert!(matches!(e, ServiceError::BrokenModel { .. }), "{e:?}");
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
