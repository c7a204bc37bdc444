//! A caller's one-shot edit (an `FnOnce`) inside a MySQL transaction, which the store tries again
//! from the start after a deadlock or a Galera certification failure: the first try calls the
//! edit; a later try reuses its result when the state it read is the one the edit saw, and gives
//! up otherwise (the edit cannot be applied to a state it did not see; the caller's answer is a
//! store error, as for any write that could not be done).

use std::sync::Mutex;

use store::mysql::TxError;

pub(crate) struct Replay<F, S, O> {
    edit: Mutex<Option<F>>,
    done: Mutex<Option<(S, O)>>,
}

impl<F, S: PartialEq, O: Clone> Replay<F, S, O> {
    pub(crate) fn new(edit: F) -> Self {
        Replay { edit: Mutex::new(Some(edit)), done: Mutex::new(None) }
    }

    /// The edit's outcome over `seen` (what this try read): `Ok(Err(e))` when it refused.
    pub(crate) fn apply<E>(
        &self,
        seen: S,
        call: impl FnOnce(F) -> Result<O, E>,
    ) -> Result<Result<O, E>, TxError> {
        let first = self.edit.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(f) = first {
            let out = call(f);
            if let Ok(o) = &out {
                *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some((seen, o.clone()));
            }
            return Ok(out);
        }
        match &*self.done.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((s, o)) if *s == seen => Ok(Ok(o.clone())),
            _ => Err(TxError::Contract(store::Error::backend_msg(
                "the data changed while the write was tried again: not applied",
            ))),
        }
    }
}
