//! A kernel of kernels/*.cuh made once per engine thread and cached, and the small device
//! arrays launches share (constants, a step's positions), kept off host-written memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use rmx_mlx::{Array, Kernel, KernelLang};

use crate::error::Result;
use crate::kernel_source::header;

/// One kernel of kernels/*.cuh: its MLX name, parameter names and body.
pub(crate) struct Spec {
    pub name: &'static str,
    pub section: &'static str,
    pub inputs: &'static [&'static str],
    pub outputs: &'static [&'static str],
    pub body: &'static str,
}

thread_local! {
    // Kernels hold MLX objects, which stay on the engine thread that made them.
    static KERNELS: RefCell<HashMap<(&'static str, i32), Rc<Kernel>>> = RefCell::new(HashMap::new());
    // Small constant inputs (eps, scale) made once, not once per launch.
    static CONSTS: RefCell<HashMap<Vec<u32>, Array>> = RefCell::new(HashMap::new());
    // `{offset, cap}` of the step in flight: every layer of a token shares one array.
    static POS: RefCell<Option<([i32; 2], Array)>> = const { RefCell::new(None) };
    // `{1, 0}`: the next step's `POS` from this one's, on the GPU.
    static POS_STEP: RefCell<Option<Array>> = const { RefCell::new(None) };
    // The layer kernel's positions of the step in flight (`layer_pos`), and the differences
    // between consecutive steps' that were added on the GPU.
    static LAYER_POS: RefCell<Option<([i32; 6], Array)>> = const { RefCell::new(None) };
    static LAYER_STEPS: RefCell<HashMap<[i32; 6], Array>> = RefCell::new(HashMap::new());
}

/// `a` copied by a GPU op (lazily, as part of the graph). MLX's CUDA backend keeps arrays made
/// from host data in managed memory, and those of 8 bytes or less in one shared pool of it,
/// which the CPU writes again whenever it makes the next small array: a kernel that reads such
/// an input waits for the page to migrate to the GPU. The copy is an ordinary device buffer:
/// with `a` as both operands, MLX cannot donate its managed buffer to the result.
pub(crate) fn on_device(a: Array) -> Result<Array> {
    Ok(a.maximum(&a)?)
}

/// A float32 array of `vals`, made once per thread, in device memory.
pub(crate) fn consts(vals: &[f32]) -> Result<Array> {
    let key: Vec<u32> = vals.iter().map(|v| v.to_bits()).collect();
    CONSTS.with(|c| {
        if let Some(a) = c.borrow().get(&key) {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(vals, &[vals.len() as i32])?)?;
        a.eval()?;
        c.borrow_mut().insert(key, a.clone());
        Ok(a)
    })
}

/// `{offset, cap}` (a prompt chunk's `{offset, n}`) as an int32 array for the kernels. A decode
/// step's is the previous step's plus `{1, 0}`, added on the GPU, so no step's kernels read
/// host-written memory (see `on_device`); any other (a new sequence, a grown cache, a prompt
/// chunk) is copied from the host once.
pub(crate) fn pos_array(pos: [i32; 2]) -> Result<Array> {
    POS.with(|p| {
        let next = match &*p.borrow() {
            Some((k, a)) if *k == pos => return Ok(a.clone()),
            Some((k, a)) if [k[0] + 1, k[1]] == pos => Some(a.add(&pos_step()?)?),
            _ => None,
        };
        let a = match next {
            Some(a) => a,
            None => on_device(Array::from_slice(&pos, &[2])?)?,
        };
        *p.borrow_mut() = Some((pos, a.clone()));
        Ok(a)
    })
}

/// The layer kernel's `{offset, cap, ring slot, ring positions, ring capacity, ring layers}`
/// (kernels/layer.cuh `decode_layers`), kept as `pos_array` keeps `{offset, cap}`: a step's is
/// the previous one's plus its difference, added on the GPU, where the difference is a decode
/// step's (one more position; a ring's slot and its positions one more or as they were);
/// anything else (a ring's slot wrapping to 0, a grown cache) is copied from the host once.
pub(crate) fn layer_pos(pos: [i32; 6]) -> Result<Array> {
    LAYER_POS.with(|p| {
        let next = match &*p.borrow() {
            Some((k, a)) if *k == pos => return Ok(a.clone()),
            Some((k, a)) => {
                let d: [i32; 6] = std::array::from_fn(|i| pos[i] - k[i]);
                let step = d[0] == 1
                    && [d[1], d[4], d[5]] == [0; 3]
                    && (0..=1).contains(&d[2])
                    && (0..=1).contains(&d[3]);
                if step {
                    Some(a.add(&layer_step(d)?)?)
                } else {
                    None
                }
            }
            None => None,
        };
        let a = match next {
            Some(a) => a,
            None => on_device(Array::from_slice(&pos, &[6])?)?,
        };
        *p.borrow_mut() = Some((pos, a.clone()));
        Ok(a)
    })
}

fn layer_step(d: [i32; 6]) -> Result<Array> {
    LAYER_STEPS.with(|s| {
        if let Some(a) = s.borrow().get(&d) {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(&d, &[6])?)?;
        a.eval()?;
        s.borrow_mut().insert(d, a.clone());
        Ok(a)
    })
}

fn pos_step() -> Result<Array> {
    POS_STEP.with(|s| {
        if let Some(a) = &*s.borrow() {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(&[1i32, 0], &[2])?)?;
        a.eval()?;
        *s.borrow_mut() = Some(a.clone());
        Ok(a)
    })
}

pub(crate) fn kernel(spec: &Spec) -> Result<Rc<Kernel>> {
    kernel_with_shared(spec, 0)
}

/// `spec`'s kernel with `shared_memory` bytes of dynamic shared memory per block.
pub(crate) fn kernel_with_shared(spec: &Spec, shared_memory: i32) -> Result<Rc<Kernel>> {
    KERNELS.with(|ks| {
        if let Some(k) = ks.borrow().get(&(spec.name, shared_memory)) {
            return Ok(k.clone());
        }
        let k = Rc::new(Kernel::with_shared_memory(
            KernelLang::Cuda,
            spec.name,
            spec.inputs,
            spec.outputs,
            spec.body,
            &header(spec.section),
            shared_memory,
        )?);
        ks.borrow_mut()
            .insert((spec.name, shared_memory), k.clone());
        Ok(k)
    })
}
