//! The tensors of a model directory: every `*.safetensors` file (sharded or not), mapped lazily
//! by MLX. Modules take tensors by name with the shape they expect; what is left over at the end
//! is an error, so a config that does not match its weights fails at load, naming the tensor.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rmx_mlx::Array;

use crate::error::{ModelError, Result};

pub struct Weights {
    tensors: HashMap<String, (Array, usize)>,
    files: Vec<PathBuf>,
}

impl Weights {
    pub fn load(dir: &Path) -> Result<Weights> {
        let entries = std::fs::read_dir(dir).map_err(|source| ModelError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
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
                tensors.insert(name, (a, i));
            }
        }
        Ok(Weights { tensors, files })
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
        self.tensors.iter().any(|(k, (a, _))| pred(k, &a.shape()))
    }

    /// Takes `name`, checking its shape (`-1` matches any size).
    pub fn take(&mut self, name: &str, shape: &[i32]) -> Result<Array> {
        let (a, file) = self
            .tensors
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
        Ok(a)
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
        self.tensors.get(name).map(|(_, f)| *f)
    }

    /// Puts back a tensor made from others (experts stacked from per-expert tensors), under
    /// `file` (the index [`Weights::file_of`] gave for one of its sources), so errors about it
    /// name that file.
    pub fn insert(&mut self, name: &str, a: Array, file: usize) {
        self.tensors.insert(name.to_string(), (a, file));
    }

    /// Drops tensors the reference implementation also ignores (precomputed rotary tables,
    /// a tied model's lm_head, ...).
    /// Renames every tensor by `f` (checkpoints that spell a family's names differently).
    pub fn rename(&mut self, f: impl Fn(&str) -> String) {
        self.tensors = std::mem::take(&mut self.tensors)
            .into_iter()
            .map(|(k, v)| (f(&k), v))
            .collect();
    }

    pub fn discard(&mut self, pred: impl Fn(&str) -> bool) {
        self.tensors.retain(|k, _| !pred(k));
    }

    /// Fails on the first tensor nobody took.
    pub fn finish(self) -> Result<()> {
        let mut left: Vec<_> = self.tensors.into_iter().collect();
        left.sort_by(|a, b| a.0.cmp(&b.0));
        match left.into_iter().next() {
            Some((name, (_, file))) => Err(ModelError::Extra {
                name,
                file: self.files[file].clone(),
            }),
            None => Ok(()),
        }
    }
}
