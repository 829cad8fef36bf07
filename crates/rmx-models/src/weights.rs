//! The tensors of a model directory: every `*.safetensors` file (sharded or not), mapped lazily
//! by MLX. Modules take tensors by name with the shape they expect; what is left over at the end
//! is an error, so a config that does not match its weights fails at load, naming the tensor.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rmx_mlx::Array;

use crate::error::{io_at, ModelError, Result};
use crate::parallel::{Parallel, ParallelMode, Part};
use crate::safetensors_part::Header;

pub struct Weights {
    /// Each tensor: its lazy array, the index of its file, and its name in that file (renames
    /// change the key, not where the bytes are; `None` for tensors made by [`Weights::insert`]).
    tensors: HashMap<String, (Array, usize, Option<String>)>,
    files: Vec<PathBuf>,
    /// The split this load is for, when the model is spread over ranks.
    parallel: Option<Parallel>,
    /// File headers read for [`Weights::take_part`], by file index.
    headers: HashMap<usize, Header>,
}

impl Weights {
    pub fn load(dir: &Path) -> Result<Weights> {
        let entries = std::fs::read_dir(dir).map_err(io_at(dir))?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(ModelError::NoWeights {
                dir: dir.to_path_buf(),
            });
        }
        let mut tensors = HashMap::new();
        for (i, file) in files.iter().enumerate() {
            let t = rmx_mlx::io::load_safetensors(file).map_err(|source| ModelError::Load {
                file: file.clone(),
                source,
            })?;
            for (name, a) in t.tensors {
                tensors.insert(name.clone(), (a, i, Some(name)));
            }
        }
        Ok(Weights {
            tensors,
            files,
            parallel: None,
            headers: HashMap::new(),
        })
    }

    /// Loads for rank `p.rank()` of a group the model is split over: modules that split their
    /// weights ask [`Weights::parallel`] or [`Weights::tensor_parallel`] and take their parts
    /// with [`Weights::take_part`].
    pub(crate) fn set_parallel(&mut self, p: Parallel) {
        self.parallel = Some(p);
    }

    pub(crate) fn parallel(&self) -> Option<&Parallel> {
        self.parallel.as_ref()
    }

    /// The split, when every layer is split (tensor mode).
    pub(crate) fn tensor_parallel(&self) -> Option<&Parallel> {
        self.parallel
            .as_ref()
            .filter(|p| p.mode == ParallelMode::Tensor)
    }

    pub fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn file_list(&self) -> String {
        self.files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether any tensor's name and shape satisfy `pred`.
    pub fn any(&self, pred: impl Fn(&str, &[i32]) -> bool) -> bool {
        self.tensors.iter().any(|(k, (a, ..))| pred(k, &a.shape()))
    }

    /// Takes `name`, checking its shape (`-1` matches any size).
    pub fn take(&mut self, name: &str, shape: &[i32]) -> Result<Array> {
        self.take_entry(name, shape).map(|(a, ..)| a)
    }

    fn take_entry(&mut self, name: &str, shape: &[i32]) -> Result<(Array, usize, Option<String>)> {
        let (a, file, stored) =
            self.tensors
                .remove(name)
                .ok_or_else(|| ModelError::MissingTensor {
                    name: name.to_string(),
                    files: self.file_list(),
                })?;
        let got = a.shape();
        let fits = got.len() == shape.len() && got.iter().zip(shape).all(|(g, w)| *w < 0 || g == w);
        if !fits {
            return Err(ModelError::Shape {
                name: name.to_string(),
                file: self.files[file].clone(),
                got,
                want: shape.to_vec(),
            });
        }
        Ok((a, file, stored))
    }

    /// Takes `part` of `name` along `axis` (`shape` is the whole tensor's, checked as by
    /// [`Weights::take`]), reading only those bytes from the file: a rank's shard.
    pub(crate) fn take_part(
        &mut self,
        name: &str,
        shape: &[i32],
        axis: usize,
        part: Part,
    ) -> Result<Array> {
        self.take_parts(name, shape, axis, &[part])
    }

    /// Takes `parts` of `name` along `axis`, joined in order (`shape` is the whole tensor's): a
    /// rank's share of a tensor whose rows are several segments split alike (Gated DeltaNet's
    /// q, k and v channels), reading only those bytes from the file.
    pub(crate) fn take_parts(
        &mut self,
        name: &str,
        shape: &[i32],
        axis: usize,
        parts: &[Part],
    ) -> Result<Array> {
        let (a, file, stored) = self.take_entry(name, shape)?;
        if let [p] = parts {
            if p.start == 0 && p.len == a.shape()[axis] {
                return Ok(a);
            }
        }
        let mut pieces = Vec::with_capacity(parts.len());
        for p in parts {
            pieces.push(match &stored {
                // Made in memory from other tensors: slice it, and copy the slice so the whole
                // can be freed.
                None => a
                    .slice_axis(axis as i32, p.start, p.start + p.len)?
                    .contiguous()?,
                Some(stored) => {
                    if !self.headers.contains_key(&file) {
                        self.headers.insert(file, Header::read(&self.files[file])?);
                    }
                    self.headers[&file].read_slice(stored, axis, p.start as i64, p.len as i64)?
                }
            });
        }
        match <[Array; 1]>::try_from(pieces) {
            Ok([one]) => Ok(one),
            Err(pieces) => {
                let refs: Vec<&Array> = pieces.iter().collect();
                Ok(rmx_mlx::concatenate(&refs, axis as i32)?)
            }
        }
    }

    /// Takes `name` whatever its shape.
    pub(crate) fn take_whole(&mut self, name: &str) -> Result<Array> {
        let ndim = self.tensors.get(name).map_or(0, |(a, ..)| a.ndim());
        self.take(name, &vec![-1; ndim])
    }

    /// Takes `name` if present.
    pub fn take_opt(&mut self, name: &str, shape: &[i32]) -> Result<Option<Array>> {
        if self.has(name) {
            self.take(name, shape).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The index of the file that holds `name`, for [`Weights::insert`].
    pub fn file_of(&self, name: &str) -> Option<usize> {
        self.tensors.get(name).map(|(_, f, _)| *f)
    }

    /// Puts back a tensor made from others (experts stacked from per-expert tensors), under
    /// `file` (the index [`Weights::file_of`] gave for one of its sources), so errors about it
    /// name that file.
    pub fn insert(&mut self, name: &str, a: Array, file: usize) {
        self.tensors.insert(name.to_string(), (a, file, None));
    }

    /// The path of file `i` (from [`Weights::file_of`]), for errors.
    pub(crate) fn file_path(&self, i: usize) -> std::path::PathBuf {
        self.files[i].clone()
    }

    /// Every tensor's name, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tensors.keys().cloned().collect();
        names.sort();
        names
    }

    /// Replaces `name` (when present) by `f` of it, kept under its file for errors: a layout
    /// rewritten on load (a transposed convolution, a norm stored minus one).
    pub(crate) fn map(
        &mut self,
        name: &str,
        f: impl FnOnce(&Array) -> Result<Array>,
    ) -> Result<()> {
        if let Some((a, file, _)) = self.tensors.get(name) {
            let (b, file) = (f(a)?, *file);
            self.tensors.insert(name.to_string(), (b, file, None));
        }
        Ok(())
    }

    /// Renames every tensor by `f` (checkpoints that spell a family's names differently).
    pub fn rename(&mut self, f: impl Fn(&str) -> String) {
        self.tensors = std::mem::take(&mut self.tensors)
            .into_iter()
            .map(|(k, v)| (f(&k), v))
            .collect();
    }

    /// Drops tensors the reference implementation also ignores (precomputed rotary tables,
    /// a tied model's lm_head, ...).
    pub fn discard(&mut self, pred: impl Fn(&str) -> bool) {
        self.tensors.retain(|k, _| !pred(k));
    }

    /// Fails on the first tensor nobody took.
    pub fn finish(self) -> Result<()> {
        let mut left: Vec<_> = self.tensors.into_iter().collect();
        left.sort_by(|a, b| a.0.cmp(&b.0));
        match left.into_iter().next() {
            Some((name, (_, file, _))) => Err(ModelError::Extra {
                name,
                file: self.files[file].clone(),
            }),
            None => Ok(()),
        }
    }
}
