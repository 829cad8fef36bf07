//! A MoE layer's experts as three phases of the layer kernel (kernels/layer_moe.cuh): the
//! router's product, the choice and the chosen experts' gate/up, their down products with the
//! shared expert and the residual. In the attention or DeltaNet layer's launch where the layer
//! kernel takes the mixer (Qwen3-MoE, Qwen3.5-MoE's DeltaNet layers), so consecutive MoE layers
//! share a launch; as a launch of its own after any other mixer (Qwen3.5-MoE's gated
//! attention). The per-op path took four launches a layer (router product, `moe_route`, the
//! experts' gate/up and down, moe_kernels.rs), and a shared expert five more, while a decode
//! step was bound by the host's work per launch (docs/perf.md, sessions 18 and 19).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use rmx_mlx::quant::{QuantSpec, Quantized};
use rmx_mlx::{Array, Dtype, Kernel, KernelLang, TemplateArg};

use super::{counters, THREADS};
use crate::error::Result;
use crate::fastpath::{consts, fast_path};
use crate::kernel_source;
use crate::layers::RmsNorm;
use crate::moe::{MoeParts, QuantPart, SparseMoe};

/// A MoE block's tensors as the kernel's parameters name them (`MoePtrs` in kernels/layer.cuh,
/// in that order), suffixed with the layer's index in the launch.
pub(super) const PER_LAYER: [&str; 22] = [
    "mwr", "msr", "mbr", "mwsg", "mssg", "mbsg", "mwg", "msg", "mbg", "mwd", "msd", "mbd", "mwsu",
    "mssu", "mbsu", "mwsd", "mssd", "mbsd", "mlr", "mlg", "mld", "map",
];

/// The kernel's template type for the block's shape, its values the `template()` names.
pub(super) const SHAPE_TYPE: &str = "rmx::MoeShape<E, TOPK, FE, FS, RBITS, RG, RMODE, O_MOE, OAI>";

/// Most experts (the kernel holds their logits in shared memory, moe_route 1/32 of them per
/// lane in registers) and most chosen (the down phase splits a warp's lanes over them).
const MAX_EXPERTS: i32 = 512;
const MAX_TOP_K: i32 = 32;

/// What the kernel's template depends on; layers share a launch only when theirs are equal.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) struct MoeShape {
    /// The experts' (and the shared expert's) quantization.
    pub spec: QuantSpec,
    /// The router's (and the shared expert's gate's): mlx-lm quantizes them 8-bit.
    pub router: QuantSpec,
    pub experts: i32,
    pub top_k: i32,
    /// An expert's hidden size.
    pub hidden: i32,
    /// The shared expert's hidden size; 0 without one.
    pub shared_hidden: i32,
    /// `moe_route`'s MODE: 0 plain softmax-then-top-k, 1 renormalized, 2 top-k-then-softmax.
    pub mode: i32,
    /// GPT-OSS's linear biases and swiglu_oai.
    pub oai: bool,
}

fn lines(floats: i32) -> i32 {
    (floats + 31) / 32 * 32
}

impl MoeShape {
    /// The activations the down phase stages: every chosen expert's, then the shared expert's.
    pub(super) fn act(&self) -> i32 {
        self.top_k * self.hidden + self.shared_hidden
    }

    /// Floats of scratch from `O_MOE`: the router's logits and the shared gate's (in T), then
    /// the choice (ids and weights).
    pub(super) fn scratch(&self) -> i32 {
        lines((self.experts + 2) / 2) + lines(2 * self.top_k)
    }

    /// Bytes of dynamic shared memory for staging vectors of up to `k` values at the experts'
    /// and the router's bits.
    pub(super) fn shared_bytes(&self, k: i32) -> i32 {
        [self.spec.bits, self.router.bits]
            .map(|bits| super::staged_bytes(k, bits))
            .into_iter()
            .max()
            .expect("two")
    }

    pub(super) fn template(&self, o_moe: i32) -> [(&'static str, TemplateArg); 9] {
        [
            ("E", TemplateArg::Int(self.experts)),
            ("TOPK", TemplateArg::Int(self.top_k)),
            ("FE", TemplateArg::Int(self.hidden)),
            ("FS", TemplateArg::Int(self.shared_hidden)),
            ("RBITS", TemplateArg::Int(self.router.bits)),
            ("RG", TemplateArg::Int(self.router.group_size)),
            ("RMODE", TemplateArg::Int(self.mode)),
            ("O_MOE", TemplateArg::Int(o_moe)),
            ("OAI", TemplateArg::Bool(self.oai)),
        ]
    }
}

/// A MoE block's tensors for the kernel, in `PER_LAYER` order.
pub(super) struct MoePrepared<'a> {
    pub shape: MoeShape,
    pub tensors: [&'a Array; 22],
}

/// The block's parts for the kernel in activations of `dtype` and rows of `hid`, or `None` where
/// the kernel does not take them (`RMX_LAYER_MOE=0`, see `SparseMoe::decode_parts`, mixed
/// quantization, sizes that are not whole groups, too many experts).
/// `stand_in`: an array of `dtype` for the pointers a block does not read (an mxfp4 product's
/// biases).
pub(super) fn prepare<'a>(
    moe: &'a SparseMoe,
    hid: i32,
    dtype: Dtype,
    stand_in: &'a Array,
) -> Option<MoePrepared<'a>> {
    if !fast_path().layer_moe {
        return None;
    }
    let MoeParts {
        router,
        gate_up,
        down,
        experts,
        top_k,
        hidden,
        mode,
        shared,
        oai,
    } = moe.decode_parts()?;
    let spec = gate_up.1;
    if super::is_mx(spec) && !fast_path().layer_mxfp4_experts {
        return None;
    }
    let fits = |p: &QuantPart, want: QuantSpec, k: i32| super::quant_fits(p, want, k, dtype);
    let shared_hidden = shared.as_ref().map_or(0, |s| s.2);
    let shapes_ok = gate_up.0.weight.shape().first() == Some(&experts)
        && gate_up.0.weight.dim(1) == 2 * hidden
        && down.0.weight.shape().first() == Some(&experts)
        && down.0.weight.dim(1) == hid
        && router.0.weight.dim(0) == experts;
    if !fits(&gate_up, spec, hid)
        || !fits(&down, spec, hidden)
        || !fits(&router, router.1, hid)
        || !shapes_ok
        || experts % 2 != 0
        || experts > MAX_EXPERTS
        || !(1..=MAX_TOP_K.min(experts)).contains(&top_k)
        || hid % 2 != 0
    {
        return None;
    }
    // GPT-OSS's biases: the router's per expert, each expert's per gate/up and down row.
    let oai_ok = oai.is_none_or(|[lr, lg, ld, ap]| {
        lr.shape() == [experts]
            && lg.shape() == [experts, 2 * hidden]
            && ld.shape() == [experts, hid]
            && ap.size() == 2
            && [lr, lg, ld, ap].iter().all(|a| a.dtype() == dtype)
    });
    if !oai_ok {
        return None;
    }
    let three = |q: &'a Quantized| [&q.weight, &q.scales, q.biases.as_ref().unwrap_or(stand_in)];
    let r = three(router.0);
    let (sg, su, sd) = match &shared {
        Some((gate, [gu, sdown], fs)) => {
            if !fits(gate, router.1, hid)
                || gate.0.weight.dim(0) != 1
                || !fits(gu, spec, hid)
                || !fits(sdown, spec, *fs)
                || gu.0.weight.dim(0) != 2 * fs
                || sdown.0.weight.dim(0) != hid
            {
                return None;
            }
            (three(gate.0), three(gu.0), three(sdown.0))
        }
        // Never read without a shared expert (FS 0); any array stands in.
        None => (r, r, r),
    };
    // Never read without GPT-OSS's biases (OAI false); any array of the dtype stands in.
    let biases = oai.unwrap_or([r[1]; 4]);
    let tensors = [r, sg, three(gate_up.0), three(down.0), su, sd]
        .concat()
        .into_iter()
        .chain(biases)
        .collect::<Vec<_>>()
        .try_into()
        .expect("six products of three tensors, four for GPT-OSS");
    Some(MoePrepared {
        shape: MoeShape {
            spec,
            router: router.1,
            experts,
            top_k,
            hidden,
            shared_hidden,
            mode,
            oai: oai.is_some(),
        },
        tensors,
    })
}

/// The experts' and the shared expert's scales, bytes where the products are mxfp4 (the router
/// and the shared expert's gate keep their own affine spec).
const MX_SCALES: [&str; 4] = ["msg", "msd", "mssu", "mssd"];

/// The body lines that fill `mtab`, the table of the launch's `n` MoE blocks (decode_layer.rs
/// `table`), with mxfp4 experts (`mx`).
pub(super) fn table(n: usize, mx: bool) -> String {
    let bytes: &[&str] = if mx { &MX_SCALES } else { &[] };
    super::table("MoePtrs", "mtab", n, &PER_LAYER, bytes)
}

thread_local! {
    // The standalone launch's kernel, by its shared memory bytes and mxfp4 experts.
    static KERNELS: RefCell<HashMap<(i32, bool), Rc<Kernel>>> = RefCell::new(HashMap::new());
}

fn kernel(shared_memory: i32, mx: bool) -> Result<Rc<Kernel>> {
    KERNELS.with(|ks| {
        if let Some(k) = ks.borrow().get(&(shared_memory, mx)) {
            return Ok(k.clone());
        }
        let mut names: Vec<String> = ["x", "n2", "par", "bar"].map(String::from).to_vec();
        names.extend(super::per_layer(&PER_LAYER, 1));
        let body = super::body(
            &[table(1, mx)],
            &format!(
                "rmx::decode_moe<T, BITS, G, HID, NT, KMAX, IDOT, {SHAPE_TYPE}, MX>(x, n2, mtab, \
                 par, bar, y, scratch);"
            ),
        );
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let k = Rc::new(Kernel::with_shared_memory(
            KernelLang::Cuda,
            if mx {
                "rmx_decode_moe_mx"
            } else {
                "rmx_decode_moe"
            },
            &names,
            &["y", "scratch"],
            &body,
            &kernel_source::header("layer_moe"),
            shared_memory,
        )?);
        ks.borrow_mut().insert((shared_memory, mx), k.clone());
        Ok(k)
    })
}

/// `x + moe(norm(x))` for one token as one launch, for a MoE layer whose mixer the layer kernel
/// does not take; `None` where the kernel does not apply (see `prepare`; not one token of bf16
/// or f16), and nothing has run then.
pub(crate) fn forward(moe: &SparseMoe, x: &Array, norm: &RmsNorm) -> Result<Option<Array>> {
    let Some(blocks) = fast_path().layer_blocks else {
        return Ok(None);
    };
    let (dtype, hid) = (x.dtype(), x.dim(-1));
    let (n2, eps) = norm.parts();
    if x.size() != hid as usize
        || !matches!(dtype, Dtype::Bf16 | Dtype::F16)
        || n2.dtype() != dtype
        || n2.size() != hid as usize
    {
        return Ok(None);
    }
    let Some(p) = prepare(moe, hid, dtype, n2) else {
        return Ok(None);
    };
    let s = p.shape;
    let kmax = hid.max(s.act());
    let o_moe = lines(s.act() / 2);
    let par = consts(&[eps])?;
    let bar = counters()?;
    let mx = super::is_mx(s.spec);
    let kernel = kernel(s.shared_bytes(kmax), mx)?;
    let mut inputs: Vec<&Array> = vec![x, n2, &par, &bar];
    inputs.extend(p.tensors);
    let mut template = vec![
        ("T", TemplateArg::Dtype(dtype)),
        ("BITS", TemplateArg::Int(s.spec.bits)),
        ("G", TemplateArg::Int(s.spec.group_size)),
        ("HID", TemplateArg::Int(hid)),
        ("NT", TemplateArg::Int(THREADS)),
        ("KMAX", TemplateArg::Int(kmax)),
        ("IDOT", TemplateArg::Bool(super::idot(s.spec))),
        ("MX", TemplateArg::Bool(mx)),
    ];
    template.extend(s.template(o_moe));
    let out = super::launch(
        &kernel,
        blocks,
        &inputs,
        &[&x.shape(), &[o_moe + s.scratch()]],
        &[dtype, Dtype::F32],
        &template,
    )?;
    Ok(out.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmx_mlx::quant::QuantMode;

    fn spec(bits: i32) -> QuantSpec {
        QuantSpec {
            bits,
            group_size: 64,
            mode: QuantMode::Affine,
        }
    }

    #[test]
    fn shared_memory_holds_every_staging_at_both_bits() {
        // Qwen3-30B-A3B (router 8-bit, experts 4-bit) and Qwen3.5-35B-A3B (a shared expert).
        for (hid, e, top_k, f, fs) in [(2048, 128, 8, 768, 0), (2048, 256, 8, 512, 512)] {
            let s = MoeShape {
                spec: spec(4),
                router: spec(8),
                experts: e,
                top_k,
                hidden: f,
                shared_hidden: fs,
                mode: 1,
                oai: false,
            };
            let k = hid.max(s.act());
            let bytes = s.shared_bytes(k);
            for bits in [4, 8] {
                let per = 128 / bits;
                // Float staging: the values, each chunk's sum, 32 floats of scratch.
                assert!(bytes >= 4 * (k + k / per + 32), "{bits}-bit float staging");
                // Integer staging: 32 floats, two byte planes, a float pair a chunk.
                assert!(
                    bytes >= 4 * 32 + 2 * k + 8 * (k / per),
                    "{bits}-bit integer staging"
                );
            }
            // The logits (E + the shared gate's, 16-bit) and the choice (ids, weights) fit.
            assert!(s.scratch() * 4 >= 2 * (e + 1) + 4 * top_k + 2 * top_k);
            assert_eq!(s.act(), top_k * f + fs);
        }
    }
}
