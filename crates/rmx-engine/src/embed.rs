//! The engine thread of an embedding model: each request's inputs run as padded batches, the
//! longest first, under a token budget per forward; the vectors come back in the request's order.
//! Requests take turns (one forward answers many inputs; there is no decode loop to share).

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rmx_models::Embedder;
use tokio::sync::oneshot;

use crate::engine::Command;
use crate::load::Load;

/// The most padded tokens (rows × the longest input) one forward reads: BERT-sized encoders
/// fill a CPU or GPU with it, and a 512-token input batch of 32 stays within it.
pub const BATCH_TOKENS: usize = 16_384;
/// The most inputs one forward reads.
pub const BATCH_ROWS: usize = 64;

/// One vector per input, in the request's order.
pub type Vectors = Vec<Vec<f32>>;

/// An embedding request on its way to the engine thread.
pub(crate) struct EmbedJob {
    pub inputs: Vec<Vec<u32>>,
    pub reply: oneshot::Sender<Result<Vectors, String>>,
}

/// Which inputs (indices into `lens`, longest first) go into each forward.
pub fn plan(lens: &[usize]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by(|&a, &b| lens[b].cmp(&lens[a]).then(a.cmp(&b)));
    let mut batches: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match batches.last_mut() {
            // Longest first: the batch's first input sets its padded width.
            Some(b) if b.len() < BATCH_ROWS && lens[b[0]] * (b.len() + 1) <= BATCH_TOKENS => {
                b.push(i)
            }
            _ => batches.push(vec![i]),
        }
    }
    batches
}

/// One result per input, in the inputs' order: the inputs (token ids) run in [`plan`]'s batches
/// through `run`, which answers one result per row of its batch; `cancelled` is asked before
/// each batch (a client that hung up gets nothing more computed for it).
pub(crate) fn in_batches<T: Clone + Default>(
    inputs: &[Vec<u32>],
    cancelled: impl Fn() -> bool,
    mut run: impl FnMut(&[&[u32]]) -> Result<Vec<T>, String>,
) -> Result<Vec<T>, String> {
    let lens: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let mut out = vec![T::default(); inputs.len()];
    for batch in plan(&lens) {
        if cancelled() {
            return Err("cancelled".into());
        }
        let rows: Vec<&[u32]> = batch.iter().map(|&i| inputs[i].as_slice()).collect();
        for (r, &i) in run(&rows)?.into_iter().zip(&batch) {
            out[i] = r;
        }
    }
    Ok(out)
}

fn run_job(model: &dyn Embedder, job: &EmbedJob) -> Result<Vectors, String> {
    in_batches(
        &job.inputs,
        || job.reply.is_closed(),
        |rows| {
            let vectors = model.embed(rows).map_err(|e| e.to_string())?;
            let dim = vectors.dim(1) as usize;
            let flat = vectors.to_vec::<f32>().map_err(|e| e.to_string())?;
            Ok(flat.chunks_exact(dim.max(1)).map(<[f32]>::to_vec).collect())
        },
    )
}

/// The loop of an embedding model's thread, until the last handle is dropped.
pub(crate) fn serve(model: &dyn Embedder, rx: Receiver<Command>, load: &Arc<Load>) {
    while let Ok(cmd) = rx.recv() {
        match cmd {
            Command::Embed(job) => {
                let busy = load.busy();
                let result = run_job(model, &job);
                busy.release();
                let _ = job.reply.send(result);
            }
            Command::Rerank(job) => {
                let _ = job
                    .reply
                    .send(Err(crate::EngineError::NotReranker.to_string()));
            }
            // Measurements time a generating model's steps.
            Command::Probe(run) => run(None),
            Command::Draft(_, reply) => {
                let _ = reply.send(Err(crate::EngineError::NotGenerative));
            }
            Command::Generate(_, tx, _) => {
                let _ = tx.send(crate::request::Event::Error(
                    crate::EngineError::NotGenerative.to_string(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_the_longest_first_within_the_budget() {
        let lens = [10, 3000, 5, 3000, 2000, 7];
        let p = plan(&lens);
        // 3000 × 6 > 16384: five 3000-wide rows at most; all fit in two forwards here.
        assert_eq!(p, vec![vec![1, 3, 4, 0, 5], vec![2]]);
        let many = vec![4; 200];
        let p = plan(&many);
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|b| b.len() <= BATCH_ROWS));
        let mut all: Vec<usize> = p.concat();
        all.sort();
        assert_eq!(all, (0..200).collect::<Vec<_>>());
    }
}
