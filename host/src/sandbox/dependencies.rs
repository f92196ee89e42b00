//! What a join reads (`dependencies`): the tasks its task runs after, with their last runs'
//! results. The sandbox knows no SQL: the runner hands it a reader, called at the run's first
//! `dependencies` only, so a run that never asks costs the database nothing and one that asks
//! again (or in a loop) costs it no more.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::bindings::taskhost::plugin::types;
use crate::model::DependencyResults;

/// What a read of a run's dependencies comes to: the tasks, or why they could not be read.
pub type DependencyRead = Pin<Box<dyn Future<Output = Result<Vec<DependencyResults>, String>> + Send>>;

/// Reads the run's task's dependencies, their results within the given bytes in all.
#[derive(Clone)]
pub struct DependencyReader(Arc<dyn Fn(usize) -> DependencyRead + Send + Sync>);

impl DependencyReader {
    /// A reader calling `read` with the bytes of results the run may be handed.
    pub fn new(read: impl Fn(usize) -> DependencyRead + Send + Sync + 'static) -> Self {
        DependencyReader(Arc::new(read))
    }
}

impl fmt::Debug for DependencyReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DependencyReader")
    }
}

/// A run's dependencies: how to read them, then what the first read came to (kept, error too).
#[derive(Default)]
pub(crate) struct Dependencies {
    reader: Option<DependencyReader>,
    read: Option<Result<Vec<types::Dependency>, String>>,
}

impl Dependencies {
    pub(crate) fn new(reader: Option<DependencyReader>) -> Self {
        Dependencies { reader, read: None }
    }

    /// The dependencies, read at the first call with results within `max_bytes` in all.
    pub(crate) async fn get(&mut self, max_bytes: usize) -> Result<Vec<types::Dependency>, String> {
        if self.read.is_none() {
            let read = match self.reader.take() {
                None => Ok(Vec::new()),
                Some(DependencyReader(read)) => read(max_bytes).await.map(|l| l.into_iter().map(wit).collect()),
            };
            self.read = Some(read.map_err(|e| format!("the tasks this one runs after could not be read: {e}")));
        }
        self.read.clone().unwrap_or_else(|| Ok(Vec::new()))
    }
}

fn wit(d: DependencyResults) -> types::Dependency {
    types::Dependency {
        task_id: d.id,
        handler: d.handler,
        succeeded: d.succeeded,
        results: d.results,
        results_left_out: d.results_left_out,
    }
}
