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
    // The positions of the step in flight, by their length (`pos_array`'s 2, `layer_pos`'s 6):
    // every layer of a token shares one array.
    static POSITIONS: RefCell<HashMap<usize, (Vec<i32>, Array)>> = RefCell::new(HashMap::new());
    // The differences between consecutive steps' positions that were added on the GPU.
    static STEPS: RefCell<HashMap<Vec<i32>, Array>> = RefCell::new(HashMap::new());
    // Kernels' counters (`counters`), by their owner's name.
    static COUNTERS: RefCell<HashMap<&'static str, Array>> = RefCell::new(HashMap::new());
}

/// `a` copied by a GPU op (lazily, as part of the graph). MLX's CUDA backend keeps arrays made
/// from host data in managed memory, and those of 8 bytes or less in one shared pool of it,
/// which the CPU writes again whenever it makes the next small array: a kernel that reads such
/// an input waits for the page to migrate to the GPU. The copy is an ordinary device buffer:
/// with `a` as both operands, MLX cannot donate its managed buffer to the result.
pub(crate) fn on_device(a: Array) -> Result<Array> {
    Ok(a.maximum(&a)?)
}

/// `len` uint32 counters that outlive launches, zero when made (once per thread and `owner`, in
/// device memory: the GPU's atomics and spinning reads must not cross the bus; a first build
/// of the layer kernel made its counters from host data and hung on the H100). The kernels
/// that use them leave them at zero after each launch.
pub(crate) fn counters(owner: &'static str, len: usize) -> Result<Array> {
    COUNTERS.with(|c| {
        if let Some(a) = c.borrow().get(owner) {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(&vec![0u32; len], &[len as i32])?)?;
        a.eval()?;
        c.borrow_mut().insert(owner, a.clone());
        Ok(a)
    })
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
    positions(pos, |d| *d == [1, 0])
}

/// The layer kernel's `{offset, cap, ring slot, ring positions, ring capacity, ring layers}`
/// (kernels/layer.cuh `decode_layers`), kept as `pos_array` keeps `{offset, cap}`: a step's is
/// the previous one's plus its difference, added on the GPU, where the difference is a decode
/// step's (one more position; a ring's slot and its positions one more or as they were);
/// anything else (a ring's slot wrapping to 0, a grown cache) is copied from the host once.
pub(crate) fn layer_pos(pos: [i32; 6]) -> Result<Array> {
    positions(pos, |d| {
        d[0] == 1
            && [d[1], d[4], d[5]] == [0; 3]
            && (0..=1).contains(&d[2])
            && (0..=1).contains(&d[3])
    })
}

/// `pos` as an int32 array in device memory: the array of the step in flight for positions of
/// its length, or the last one plus the difference where `is_step` takes it (added on the GPU,
/// the difference's array made once), else copied from the host.
fn positions<const N: usize>(pos: [i32; N], is_step: impl Fn(&[i32; N]) -> bool) -> Result<Array> {
    POSITIONS.with(|p| {
        let next = match p.borrow().get(&N) {
            Some((k, a)) if k[..] == pos[..] => return Ok(a.clone()),
            Some((k, a)) => {
                let d: [i32; N] = std::array::from_fn(|i| pos[i] - k[i]);
                if is_step(&d) {
                    Some(a.add(&step_array(&d)?)?)
                } else {
                    None
                }
            }
            None => None,
        };
        let a = match next {
            Some(a) => a,
            None => on_device(Array::from_slice(&pos, &[N as i32])?)?,
        };
        p.borrow_mut().insert(N, (pos.to_vec(), a.clone()));
        Ok(a)
    })
}

fn step_array(d: &[i32]) -> Result<Array> {
    STEPS.with(|s| {
        if let Some(a) = s.borrow().get(d) {
            return Ok(a.clone());
        }
        let a = on_device(Array::from_slice(d, &[d.len() as i32])?)?;
        a.eval()?;
        s.borrow_mut().insert(d.to_vec(), a.clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A step's `{offset, cap}` and the layer kernel's positions, asked for in turn as a decode
    /// step asks for them, each come out as given, whether from the host or added on the GPU.
    #[test]
    fn positions_of_either_length_follow_their_own_last_step() {
        for (offset, slot) in [(7, 3), (8, 4), (9, 5), (9, 5), (10, 0), (40, 1)] {
            let two = [offset, 256];
            let six = [offset, 256, slot, 8, 8, 1];
            assert_eq!(pos_array(two).unwrap().to_vec::<i32>().unwrap(), two);
            assert_eq!(layer_pos(six).unwrap().to_vec::<i32>().unwrap(), six);
        }
    }
}
