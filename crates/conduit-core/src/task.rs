//! Background tasks spawned boxed, so that every one of them is one task type.

use futures::future::BoxFuture;

/// Spawns `work` on the current runtime. Each future type given to `tokio::spawn` makes
/// tokio build its task machinery for that type once more (a few KB of each binary);
/// boxed, every task spawned here shares one. For tasks that only run (their output is
/// `()`); a box more per task is nothing beside the work.
pub fn spawn(work: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
    let boxed: BoxFuture<'static, ()> = Box::pin(work);
    tokio::spawn(boxed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[tokio::test]
    async fn a_spawned_task_runs_to_its_end() {
        let (sender, received) = tokio::sync::oneshot::channel();
        super::spawn(async move {
            let _ = sender.send(42);
        })
        .await
        .unwrap();
        assert_eq!(received.await.unwrap(), 42);
    }
}
