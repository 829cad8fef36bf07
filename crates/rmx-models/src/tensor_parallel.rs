//! Tensor parallelism (parallel.rs): one model split over the ranks of a distributed group, each
//! rank holding its share of every large weight, as mlx-lm's `shard()` splits the dense families
//! (mlx/nn/layers/distributed.py's `shard_linear`):
//!
//! * q, k, v, gate and up are split by output rows ("all-to-sharded"): each rank computes its
//!   own heads and its slice of the MLP's hidden units, with no communication;
//! * o and down are split by input columns ("sharded-to-all"): each rank's partial product is
//!   summed over the ranks (`all_sum`) and the bias added once after;
//! * quantized weights are split with their scales and biases (whole quantization groups).
//!
//! Beyond mlx-lm, which keeps the embedding and the output projection whole on every rank:
//! both are split by vocabulary rows here ([`VocabShard`], in pipeline mode too), since at real vocabularies they are
//! a large part of a model (and of a tiny test model nearly all of it). A rank looks up the ids
//! in its rows and the ranks' rows are summed (one rank holds each id, the others add exact
//! zeros); logits are gathered from the ranks' slices. Neither changes a value.
//!
//! Key/value heads are split like query heads when there are at least as many as ranks;
//! with fewer (GQA with 2 KV heads over 4 ranks) each KV head is held by the ranks whose query
//! heads read it, as vLLM does, instead of refusing.

use rmx_mlx::distributed::Group;
use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{r#where, Array};

use crate::config::QuantConfig;
use crate::error::{ModelError, Result};
use crate::layers::{spec_for, Embedding, Linear};
pub(crate) use crate::parallel::{Parallel, Part};
use crate::weights::Weights;

/// The attention heads one rank computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heads {
    pub q: Part,
    pub kv: Part,
}

/// How a layer's weight is split over the ranks.
#[derive(Clone, Copy)]
pub(crate) enum Split<'a> {
    /// This rank's output rows (q, k, v, gate, up, the output projection).
    Rows(Part),
    /// This rank's input columns (o, down); the ranks' outputs are summed over `group`.
    Cols(Part, &'a Group),
}

/// This rank's query heads, and the key/value heads they read.
pub(crate) fn heads(p: &Parallel, heads: i32, kv_heads: i32) -> Result<Heads> {
    let q = p.share(heads, "the attention heads")?;
    let kv = if kv_heads % p.size == 0 {
        p.share(kv_heads, "the key/value heads")?
    } else if p.size % kv_heads == 0 {
        // Fewer KV heads than ranks: the query heads of this rank all read one KV head
        // (heads per KV head is a multiple of heads per rank), which it holds a copy of.
        Part {
            start: p.rank * kv_heads / p.size,
            len: 1,
        }
    } else {
        return Err(p.refuse(format!(
            "{kv_heads} key/value heads can be neither divided among nor copied to every \
             rank; use a number of ranks that divides {kv_heads} or is a multiple of it"
        )));
    };
    Ok(Heads { q, kv })
}
/// `path`'s linear layer, whole or this rank's part of it; `inp` and `out` are the whole
/// layer's sizes, as the file stores it.
pub(crate) fn linear(
    w: &mut Weights,
    q: &QuantConfig,
    path: &str,
    inp: i32,
    out: i32,
    bias: bool,
    split: Option<Split>,
) -> Result<Linear> {
    let Some(split) = split else {
        return Linear::load(w, q, path, inp, out, bias);
    };
    let name = |t: &str| format!("{path}.{t}");
    let (axis, part) = match split {
        Split::Rows(p) => (0, p),
        Split::Cols(p, _) => (1, p),
    };
    let bias = match (bias, &split) {
        (false, _) => None,
        (true, Split::Rows(p)) => Some(w.take_part(&name("bias"), &[out], 0, *p)?),
        // Added once, after the ranks' partial products are summed.
        (true, Split::Cols(..)) => Some(w.take(&name("bias"), &[out])?),
    };
    let local = match spec_for(w, q, path)? {
        Some(spec) => {
            let qp = quantized_part(w, path, &[], inp, out, spec, axis, &[part])?;
            let bias = if axis == 0 { bias.clone() } else { None };
            Linear::Quant { q: qp, spec, bias }
        }
        None => Linear::Dense {
            weight_t: w
                .take_part(&name("weight"), &[out, inp], axis, part)?
                .transpose(&[])?,
            bias: if axis == 0 { bias.clone() } else { None },
        },
    };
    Ok(match split {
        Split::Rows(_) => local,
        Split::Cols(_, group) => Linear::Reduced {
            part: Box::new(local),
            group: group.clone(),
            bias,
        },
    })
}

/// `path`'s bias-free linear layer as this rank's output rows of each of `parts` (segments of
/// the stored rows, each split alike), joined in order: Gated DeltaNet's `in_proj_qkv`, whose
/// q, k and v rows a rank takes its heads of.
pub(crate) fn linear_rows(
    w: &mut Weights,
    q: &QuantConfig,
    path: &str,
    inp: i32,
    out: i32,
    parts: &[Part],
) -> Result<Linear> {
    let name = |t: &str| format!("{path}.{t}");
    Ok(match spec_for(w, q, path)? {
        Some(spec) => Linear::Quant {
            q: quantized_part(w, path, &[], inp, out, spec, 0, parts)?,
            spec,
            bias: None,
        },
        None => Linear::Dense {
            weight_t: w
                .take_parts(&name("weight"), &[out, inp], 0, parts)?
                .transpose(&[])?,
            bias: None,
        },
    })
}

/// This rank's part of the quantized weight `path` (`[lead.., out, inp]` as stored, with its
/// scales and biases): output rows `parts` when `axis` is `lead.len()`, input columns when it is
/// the last, the parts joined in order. A column split takes whole quantization groups, and so
/// whole 32-bit words.
#[allow(clippy::too_many_arguments)]
pub(crate) fn quantized_part(
    w: &mut Weights,
    path: &str,
    lead: &[i32],
    inp: i32,
    out: i32,
    spec: QuantSpec,
    axis: usize,
    parts: &[Part],
) -> Result<Quantized> {
    let name = |t: &str| format!("{path}.{t}");
    let (gs, bits) = (spec.group_size, spec.bits);
    if inp % gs != 0 || (inp * bits) % 32 != 0 {
        return Err(ModelError::Config {
            path: path.into(),
            message: format!("{inp} columns do not fit {bits}-bit groups of {gs}"),
        });
    }
    let (packed, groups): (Vec<Part>, Vec<Part>) = if axis == lead.len() {
        (parts.to_vec(), parts.to_vec())
    } else if let Some(part) = parts.iter().find(|p| p.start % gs != 0 || p.len % gs != 0) {
        return Err(ModelError::Config {
            path: path.into(),
            message: format!(
                "a rank's share of the {inp} input columns ({}) is not whole quantization \
                 groups of {gs}; use fewer ranks",
                part.len
            ),
        });
    } else {
        parts
            .iter()
            .map(|p| (p.scaled(bits).divided(32), p.divided(gs)))
            .unzip()
    };
    let shape = |last: i32| [lead, &[out, last]].concat();
    Ok(Quantized {
        weight: w.take_parts(&name("weight"), &shape(inp * bits / 32), axis, &packed)?,
        scales: w.take_parts(&name("scales"), &shape(inp / gs), axis, &groups)?,
        biases: match w.has(&name("biases")) {
            true => Some(w.take_parts(&name("biases"), &shape(inp / gs), axis, &groups)?),
            false => None,
        },
    })
}

/// The embedding (and output projection) split by vocabulary rows: rank r holds rows
/// `r * chunk..` (the last rank fewer when the vocabulary does not divide).
pub(crate) struct VocabShard {
    rows: Part,
    chunk: i32,
    vocab: i32,
    group: Group,
}

impl VocabShard {
    pub fn new(tp: &Parallel, vocab: i32) -> Result<VocabShard> {
        let chunk = (vocab + tp.size - 1) / tp.size;
        let start = tp.rank * chunk;
        let len = chunk.min(vocab - start);
        if len <= 0 {
            return Err(tp.refuse(format!(
                "a vocabulary of {vocab} has no rows for every rank"
            )));
        }
        Ok(VocabShard {
            rows: Part { start, len },
            chunk,
            vocab,
            group: tp.group.clone(),
        })
    }

    pub fn rows(&self) -> Part {
        self.rows
    }

    /// This rank's rows of the embedding table `path`.
    pub fn load_embedding(
        &self,
        w: &mut Weights,
        q: &QuantConfig,
        path: &str,
        dim: i32,
    ) -> Result<Embedding> {
        let name = |t: &str| format!("{path}.{t}");
        let v = self.vocab;
        match spec_for(w, q, path)? {
            Some(spec) => {
                let (gs, bits) = (spec.group_size, spec.bits);
                let q = Quantized {
                    weight: w.take_part(&name("weight"), &[v, dim * bits / 32], 0, self.rows)?,
                    scales: w.take_part(&name("scales"), &[v, dim / gs], 0, self.rows)?,
                    biases: match w.has(&name("biases")) {
                        true => Some(w.take_part(&name("biases"), &[v, dim / gs], 0, self.rows)?),
                        false => None,
                    },
                };
                Ok(Embedding::Quant { q, spec })
            }
            None => {
                let weight = w.take_part(&name("weight"), &[v, dim], 0, self.rows)?;
                let weight_t = weight.transpose(&[])?;
                Ok(Embedding::Dense { weight, weight_t })
            }
        }
    }

    /// Rows for token ids: each rank looks up the ids it holds (zeros for the others) and the
    /// ranks' rows are summed, which leaves each row exactly as stored.
    pub fn embed(&self, table: &Embedding, ids: &Array) -> Result<Array> {
        let (start, end) = (
            self.rows.start as f64,
            (self.rows.start + self.rows.len) as f64,
        );
        let mine = ids
            .greater_equal_scalar(start)?
            .logical_and(&ids.less_scalar(end)?)?;
        let local = r#where(&mine, &ids.subtract_scalar(start)?, &ids.weak_scalar(0.0)?)?;
        let rows = table.forward(&local)?;
        let zero = Array::scalar_as(0.0, rows.dtype())?;
        let rows = r#where(&mine.expand_dims(&[-1])?, &rows, &zero)?;
        Ok(self.group.all_sum(&rows)?)
    }

    /// The whole vocabulary's logits from this rank's slice (`[..., rows]`): gathered along
    /// the vocabulary axis, which `all_gather` can only do on axis 0, hence the transposes.
    pub fn logits(&self, local: &Array) -> Result<Array> {
        let nd = local.ndim() as i32;
        let mut x = local.clone();
        if self.rows.len < self.chunk {
            let zero = Array::scalar_as(0.0, x.dtype())?;
            x = x.pad(&[nd - 1], &[0], &[self.chunk - self.rows.len], &zero)?;
        }
        let first: Vec<i32> = std::iter::once(nd - 1).chain(0..nd - 1).collect();
        let back: Vec<i32> = (1..nd).chain(std::iter::once(0)).collect();
        let all = self
            .group
            .all_gather(&x.transpose(&first)?)?
            .transpose(&back)?;
        Ok(if all.dim(-1) > self.vocab {
            all.slice_axis(-1, 0, self.vocab)?
        } else {
            all
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::ParallelMode;
    use rmx_mlx::distributed::CommBackend;
    use rmx_mlx::quant::{self, QuantSpec};
    use rmx_mlx::{concatenate, Dtype};
    use std::path::{Path, PathBuf};

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37 + seed * 11) % 101) as f32 / 50.0 - 1.0)
            .collect()
    }

    fn close(a: &Array, b: &Array) {
        let (a, b) = (
            a.to_vec::<f32>().expect("read"),
            b.to_vec::<f32>().expect("read"),
        );
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }

    /// A dense layer `d` (with bias) and a 4-bit one `q` of `out` x `inp`, saved in `dir`.
    fn layers(dir: &Path, out: i32, inp: i32) -> PathBuf {
        std::fs::create_dir_all(dir).expect("temp dir");
        let n = (out * inp) as usize;
        let w = Array::from_slice(&values(n, 1), &[out, inp]).expect("weight");
        let b = Array::from_slice(&values(out as usize, 2), &[out]).expect("bias");
        let q = quant::quantize(&w, QuantSpec::affine(64, 4)).expect("quantize");
        let biases = q.biases.as_ref().expect("affine has biases");
        let file = dir.join("model.safetensors");
        let t = [
            ("d.weight", &w),
            ("d.bias", &b),
            ("q.weight", &q.weight),
            ("q.scales", &q.scales),
            ("q.biases", biases),
        ];
        rmx_mlx::io::save_safetensors(&file, &t, &[]).expect("save");
        file
    }

    /// A plan for `rank` of `size` without a real group: only the arithmetic is used.
    fn plan(rank: i32, size: i32) -> Parallel {
        let group = Group::init(CommBackend::Any, false).expect("singleton group");
        Parallel {
            group,
            rank,
            size,
            mode: ParallelMode::Tensor,
            collective_handoff: false,
        }
    }

    /// Each rank's share of a layer's experts, read from the file (gate and up by rows, down by
    /// columns): the ranks' outputs add up to the whole experts' output, for one token (the
    /// unsorted path) and a prompt (sorted by expert), dense, quantized and biased; each share
    /// holds 1/N of the experts' bytes.
    #[test]
    fn split_experts_add_up_to_the_whole_experts() {
        use crate::moe::{ExpertActivation, SwitchGlu};
        let dir = std::env::temp_dir().join(format!("rmx-tp-experts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (e, d, f) = (4, 64, 128);
        let spec = QuantSpec::affine(32, 4);
        let mut arrays = vec![];
        for (i, (name, shape)) in [("gate", [e, f, d]), ("up", [e, f, d]), ("down", [e, d, f])]
            .into_iter()
            .enumerate()
        {
            let n = shape.iter().product::<i32>() as usize;
            let w = Array::from_slice(&values(n, i + 4), &shape).expect("weight");
            let q = quant::quantize(&w, spec).expect("quantize");
            let b = q.biases.clone().expect("affine has biases");
            let p = |m: &str, t: &str| format!("{m}.switch_mlp.{name}_proj.{t}");
            // "b": GPT-OSS's experts, with a bias on every projection.
            let out = shape[1];
            let bias = Array::from_slice(&values((e * out) as usize, i + 7), &[e, out]).expect("b");
            arrays.push((p("b", "weight"), w.clone()));
            arrays.push((p("b", "bias"), bias));
            arrays.push((p("d", "weight"), w));
            arrays.push((p("q", "weight"), q.weight));
            arrays.push((p("q", "scales"), q.scales));
            arrays.push((p("q", "biases"), b));
        }
        let named: Vec<(&str, &Array)> = arrays.iter().map(|(k, a)| (k.as_str(), a)).collect();
        rmx_mlx::io::save_safetensors(&dir.join("model.safetensors"), &named, &[]).expect("save");
        let mut qc = QuantConfig::default();
        qc.default = Some(spec);
        let load = |m: &str, tp: Option<&Parallel>| {
            let mut w = Weights::load(&dir).expect("weights");
            let path = format!("{m}.switch_mlp");
            let (bias, act) = match m {
                "b" => (
                    true,
                    ExpertActivation::SwiGluOai {
                        alpha: 1.702,
                        limit: 7.0,
                    },
                ),
                _ => (false, ExpertActivation::SwiGlu),
            };
            SwitchGlu::load_split(&mut w, &qc, &path, e, d, f, bias, act, tp).expect("experts")
        };
        for m in ["d", "q", "b"] {
            let whole = load(m, None);
            let n = 2;
            let parts: Vec<SwitchGlu> = (0..n).map(|r| load(m, Some(&plan(r, n)))).collect();
            // Down's biases ([E, D]) are whole on rank 0 (added once to the sum), absent elsewhere.
            let down_bias = if m == "b" { (e * d) as usize * 4 } else { 0 };
            for (r, p) in parts.iter().enumerate() {
                let extra = if r == 0 { down_bias } else { 0 };
                assert_eq!(
                    (p.nbytes() - extra) * n as usize,
                    whole.nbytes() - down_bias,
                    "{m}: 1/{n} of the bytes"
                );
            }
            // 1 token x 2 experts: unsorted; 40 x 2 = 80 pairs: sorted by expert.
            for tokens in [1usize, 40] {
                let x = Array::from_slice(&values(tokens * d as usize, 9), &[tokens as i32, d])
                    .expect("x");
                let ids: Vec<u32> = (0..2 * tokens as u32)
                    .map(|i| (i * 7 + i / 3) % 4)
                    .collect();
                let idx = Array::from_slice(&ids, &[tokens as i32, 2]).expect("ids");
                let want = whole.forward(&x, &idx).expect("whole");
                let mut sum: Option<Array> = None;
                for p in &parts {
                    let y = p.forward(&x, &idx).expect("part");
                    sum = Some(match sum {
                        Some(s) => s.add(&y).expect("add"),
                        None => y,
                    });
                }
                close(&sum.expect("parts"), &want);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn heads_split_or_copy_key_value_heads() {
        // 4 query heads and 2 KV heads over 2 ranks: two query heads and one KV head each.
        let h = heads(&plan(1, 2), 4, 2).expect("fits");
        assert_eq!(h.q, Part { start: 2, len: 2 });
        assert_eq!(h.kv, Part { start: 1, len: 1 });
        // Over 4 ranks each KV head is held by the two ranks whose query heads read it.
        let kv: Vec<i32> = (0..4)
            .map(|r| heads(&plan(r, 4), 4, 2).expect("fits").kv.start)
            .collect();
        assert_eq!(kv, vec![0, 0, 1, 1]);
        let err = heads(&plan(0, 4), 6, 3).unwrap_err().to_string();
        assert!(err.contains("attention heads (6) do not divide"), "{err}");
        let err = heads(&plan(0, 4), 8, 3).unwrap_err().to_string();
        assert!(err.contains("3 key/value heads"), "{err}");
    }

    /// Each rank's part of a layer, read from the file, against the whole layer: row parts
    /// are slices of the whole output, column parts' partial products add up to it (a
    /// one-process group's sum passes each through, so the test adds them itself).
    #[test]
    fn split_layers_add_up_to_the_whole_layer() {
        let dir = std::env::temp_dir().join(format!("rmx-tp-split-{}", std::process::id()));
        let (out, inp) = (8, 256);
        layers(&dir, out, inp);
        let mut qc = QuantConfig::default();
        qc.default = Some(QuantSpec::affine(64, 4));
        let x = Array::from_slice(&values(2 * inp as usize, 3), &[2, inp]).expect("x");
        let load = |path: &str, bias: bool, split: Option<Split>, x: &Array| {
            let mut w = Weights::load(&dir).expect("weights");
            let l = linear(&mut w, &qc, path, inp, out, bias, split).expect("layer");
            l.forward(x)
                .expect("forward")
                .astype(Dtype::F32)
                .expect("f32")
        };
        for (path, bias) in [("d", true), ("q", false)] {
            let whole = load(path, bias, None, &x);
            let n = 2;
            let rows: Vec<Array> = (0..n)
                .map(|r| {
                    let part = plan(r, n).share(out, "rows").expect("share");
                    load(path, bias, Some(Split::Rows(part)), &x)
                })
                .collect();
            close(
                &concatenate(&rows.iter().collect::<Vec<_>>(), -1).expect("cat"),
                &whole,
            );
            // A row-parallel layer's input is already split: each rank has its own columns.
            let tp = plan(0, 1);
            let mut sum: Option<Array> = None;
            for r in 0..n {
                let part = plan(r, n).share(inp, "columns").expect("share");
                let xs = x
                    .slice_axis(1, part.start, part.start + part.len)
                    .expect("slice");
                // The bias is added once after the sum: leave it to the last part only.
                let split = Some(Split::Cols(part, tp.group()));
                let y = load(path, bias && r == n - 1, split, &xs);
                sum = Some(match sum {
                    Some(s) => s.add(&y).expect("add"),
                    None => y,
                });
            }
            close(&sum.expect("parts"), &whole);
        }
        // 256 columns over 8 ranks are 32 a rank: half a quantization group of 64.
        let mut w = Weights::load(&dir).expect("weights");
        let part = plan(1, 8).share(inp, "columns").expect("share");
        let err = linear(
            &mut w,
            &qc,
            "q",
            inp,
            out,
            false,
            Some(Split::Cols(part, plan(0, 1).group())),
        )
        .err()
        .expect("a split inside a quantization group")
        .to_string();
        assert!(err.contains("not whole quantization groups of 64"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
